"""The fakes ragtrim ships, so that users' tests and ours need no mocks: ``FixedScorer`` (scores you choose),
``FakeEmbedder`` (a model scorer without a model: vectors from each text's hash, optionally kept in a vector store,
optionally moved by the other texts of a call, as a batched int8 model's are), ``ScriptedSummarizer`` (history items
you script) and a fake OpenAI-compatible model server whose time to first token
grows with the prompt (``create_fake_app``, ``ragtrim serve-fake-upstream``). The whitespace token counter, the other
fake, is a named counter: ``get_counter("whitespace")`` (``ragtrim.text.tokens.WhitespaceCounter``).

The fake server: prefill takes ``base_ms + per_1k_ms * prompt_tokens / 1000`` (tokens approximated as characters /
4), at most ``slots`` requests are processed at once (the rest wait, as in a GPU batch), then ``output_tokens`` tokens
come ``decode_ms`` apart. Model names ``fail-400``, ``fail-500`` and ``fail-503`` answer that status,
``fail-midstream`` breaks a stream after its first event; POST /v1/embeddings answers deterministic vectors
(``dimensions`` long, default 8) with usage; GET /debug/requests lists the last request bodies received.
With ``answers`` it is a reader instead: it replies to the question it finds in the prompt, wrong for a chosen
share of them (``is_degraded``), so ``ragtrim gate`` can be tested end to end (``golden_answers`` makes the answers
of a golden set). It needs the ``serve`` extra (starlette, uvicorn), imported when a server is made.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ragtrim._util.validate import (
    Boolean,
    Constraints,
    InstanceOf,
    Interval,
    ListOf,
    MappingOf,
    Options,
    Text,
)
from ragtrim.components import Component, component, register
from ragtrim.errors import ConfigError
from ragtrim.history.state import STATE_KINDS, StateItem
from ragtrim.models import Message
from ragtrim.scoring.base import check_score_inputs
from ragtrim.scoring.embedding import CachedEmbedder
from ragtrim.text.scripts import SCRIPTS

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response


@register("scorer", "fixed")
@component
class FixedScorer(Component):
    """A fake for tests and for callers who already have scores: a score per text (mapping) or per position.

    ``scripts`` makes it pose as a model that reads only those scripts (see ``ragtrim.scoring.scripts``); ``calls``
    records the texts of every ``score`` call, so a test can see what a fused scorer asked it."""

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "scores": [MappingOf(Interval(float, None, None), "a dict text -> score"),
                   ListOf(Interval(float, None, None), "a list of scores")],
        "default": [Interval(float, None, None)],
        "scripts": [ListOf(Options(SCRIPTS), "a list of script names"), None],
    }

    scores: Mapping[str, float] | Sequence[float]
    default: float = 0.0
    scripts: Sequence[str] | None = None
    calls: list[list[str]] = field(default_factory=list, init=False)

    @property
    def name(self) -> str:
        return "fixed"

    def scripts_read(self) -> frozenset[str] | None:
        return frozenset(self.scripts) if self.scripts is not None else None

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        self.calls.append(list(texts))
        if isinstance(self.scores, Mapping):
            return [float(self.scores.get(t, self.default)) for t in texts]
        return [float(self.scores[i]) if i < len(self.scores) else self.default for i in range(len(texts))]


@component
class FakeEmbedder(CachedEmbedder):
    """A fake model scorer: a text's vector is a pseudo-random unit vector of ``dim`` numbers seeded by the text's
    SHA-256, so it is the same in every process, under any hash seed.

    ``recipe``: its vectors go to the vector store (``vector_store``) under this recipe (two fakes with different
    recipes are two models); ``None`` keeps them out. ``batch_dependent``: a vector also moves with the other texts
    of the ``_encode`` call (by ``batch_weight`` times their mean), as an int8 model's did with activations
    quantized per call, to test that no result depends on which texts were embedded together. ``calls`` records the
    texts of every ``_encode`` call and the thread that made it; ``fail`` makes ``_encode`` raise.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "dim": [Interval(int, 1, None)],
        "recipe": [Text("a recipe name"), None],
        "batch_dependent": [Boolean()],
        "batch_weight": [Interval(float, 0.0, None)],
        "fail": [Boolean()],
    }

    dim: int = 16
    recipe: str | None = None
    batch_dependent: bool = False
    batch_weight: float = 0.5
    fail: bool = False
    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list, init=False)

    @property
    def name(self) -> str:
        return f"fake-embedding:{self.recipe or 'unstored'}"

    def _recipe(self) -> str | None:
        return self.recipe

    def vector_width(self) -> int:
        return self.dim

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append((threading.current_thread().name, tuple(texts)))
        if self.fail:
            raise RuntimeError("fake model failure")
        base = np.vstack([_seeded_unit(t, self.dim) for t in texts]) if texts else np.zeros((0, self.dim))
        if self.batch_dependent and len(texts) > 0:
            base = base + self.batch_weight * base.mean(axis=0, keepdims=True)
        norms = np.linalg.norm(base, axis=1, keepdims=True)
        return (base / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    def encoded_texts(self) -> list[str]:
        """Every text ``_encode`` was given, in order."""
        return [t for _, texts in self.calls for t in texts]


def _seeded_unit(text: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return np.asarray(v / np.linalg.norm(v), dtype=np.float64)


@register("summarizer", "scripted")
@component
class ScriptedSummarizer(Component):
    """A fake for tests and demos: returns the items scripted for each turn id, and records every call.

    ``script`` maps a turn id to ``(kind, text)`` pairs; turns not in it give nothing. ``calls`` lists the turn ids
    of every batch it was asked about, so a test can check that nothing was folded twice.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "script": [InstanceOf(Mapping, "a dict of turn id -> [(kind, text)]")],
    }

    script: Mapping[str, Sequence[tuple[str, str]]]
    calls: list[tuple[str, ...]] = field(default_factory=list, init=False)

    def _check_params(self) -> None:
        for turn_id, pairs in self.script.items():
            for pair in pairs:
                if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and pair[0] in STATE_KINDS):
                    raise ConfigError(
                        f"script[{turn_id!r}] entries must be (kind, text) with kind in {STATE_KINDS}, got {pair!r}"
                    )

    def extract(self, turns: Sequence[Message]) -> list[StateItem]:
        self.calls.append(tuple(t.turn_id for t in turns))
        return [
            StateItem(text=text, kind=kind, turn_ids=(t.turn_id,), role=t.role)  # type: ignore[arg-type]
            for t in turns
            for kind, text in self.script.get(t.turn_id, ())
        ]


# -- the fake model server ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FakeUpstreamConfig:
    """``answers`` (question -> reply) makes the server a reader: it replies to the question it finds in the prompt
    (the longest one), and ``unknown_reply`` when none; ``wrong_share`` of the questions (those ``is_degraded``
    picks, the same in every run) get ``wrong_reply`` instead (inside the reply's JSON when it is
    ``{"answer": ...}``). With ``evidence`` (question -> text) it answers only
    when that text is in the prompt, as a reader needs its gold passage (else ``unknown_reply``, or a JSON reply's
    ``null``): a trim that drops the passage costs the answer. Without ``answers`` it replies ``tok0 tok1 ...``."""

    base_ms: float = 0.0
    per_1k_ms: float = 0.0
    decode_ms: float = 0.0
    output_tokens: int = 8
    slots: int = 0  # 0: unlimited
    fail_status: int = 0  # answer every completion request with this status (for fallback tests)
    name: str = "fake"
    keep_requests: int = 100
    answers: Mapping[str, str] | None = None
    wrong_share: float = 0.0
    wrong_reply: str = "a mistaken guess"
    unknown_reply: str = "unanswerable"
    evidence: Mapping[str, str] | None = None
    max_model_len: int = 0  # > 0: a prompt whose tokens plus max_tokens exceed it is refused with 400, as vLLM does
    models_ms: float = 0.0  # GET /v1/models answers after this long (a slow upstream, for readiness probes)


def is_degraded(question: str, share: float) -> bool:
    """Whether the fake server answers ``question`` wrong at ``wrong_share=share``: a fixed function of the
    question's SHA-256, so a test knows which ones (and the share over many questions approaches ``share``)."""
    digest = hashlib.sha256(question.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def golden_answers(items: Iterable[Any]) -> dict[str, str]:
    """``question -> reply`` of a reader that is always right, for golden items (``ragtrim.gate.GoldenItem``): the
    first accepted answer, ``unanswerable`` for an unanswerable item, as ``{"answer": ...}`` JSON (``null`` to
    refuse) for an item with a schema. Items without answers (judged by agreement) get ``answer to <id>``."""
    out = {}
    for item in items:
        answer = item.answers[0] if item.answers else (None if not item.answerable else f"answer to {item.id}")
        if item.schema is not None:
            out[item.question] = json.dumps({item.answer_field: answer})
        else:
            out[item.question] = answer if answer is not None else "unanswerable"
    return out


def golden_evidence(items: Iterable[Any]) -> dict[str, str]:
    """``question -> first accepted answer`` of the answerable golden items with answers: the text a fake reader
    with ``evidence`` must find in the prompt to answer right."""
    return {item.question: item.answers[0] for item in items if item.answerable and item.answers}


def _wrong_like(right: str, wrong: str | None) -> str | None:
    """``wrong`` in the shape of the right reply: a JSON reply ``{"answer": ...}`` keeps its JSON, with ``wrong``
    as the answer (``None``: a JSON refusal), so a wrong answer is not also a format failure."""
    try:
        value = json.loads(right)
    except ValueError:
        return wrong
    if isinstance(value, dict) and "answer" in value:
        return json.dumps({**value, "answer": wrong})
    return wrong


def _reply_pieces(reply: str, limit: int) -> tuple[list[str], bool]:
    """The reply as streamed tokens (a word and the space after it), at most ``limit``; whether it was cut."""
    pieces = re.findall(r"\S+\s*", reply) or [reply]
    return pieces[:limit], len(pieces) > limit


def approx_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        parts = []
        for m in body.get("messages") or []:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, list):
                parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
        return "\n".join(parts)
    p = body.get("prompt", "")
    return p if isinstance(p, str) else json.dumps(p)


def create_fake_app(config: FakeUpstreamConfig | None = None) -> Starlette:
    """The fake model server as a Starlette app (serve it with uvicorn)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    cfg = config or FakeUpstreamConfig()
    received: deque[dict[str, Any]] = deque(maxlen=cfg.keep_requests)
    questions = sorted(cfg.answers or {}, key=len, reverse=True)  # the longest match wins

    def answer_for(prompt: str) -> str:
        assert cfg.answers is not None
        question = next((q for q in questions if q in prompt), None)
        if question is None:
            return cfg.unknown_reply
        if is_degraded(question, cfg.wrong_share):
            return _wrong_like(cfg.answers[question], cfg.wrong_reply) or cfg.wrong_reply
        needed = (cfg.evidence or {}).get(question)
        if needed is not None and needed not in prompt:
            return _wrong_like(cfg.answers[question], None) or cfg.unknown_reply
        return cfg.answers[question]

    sem = asyncio.Semaphore(cfg.slots) if cfg.slots > 0 else None
    counter = {"n": 0, "active": 0, "max_active": 0, "models_calls": 0}

    async def models(request: Request) -> Response:
        counter["models_calls"] += 1
        if cfg.models_ms > 0:
            await asyncio.sleep(cfg.models_ms / 1000)
        return JSONResponse({"object": "list", "data": [{"id": cfg.name, "object": "model", "owned_by": "ragtrim"}]})

    async def health(request: Request) -> Response:
        return Response("ok")

    async def debug(request: Request) -> Response:
        return JSONResponse({"requests": list(received), "max_active": counter["max_active"],
                             "models_calls": counter["models_calls"]})

    async def handle(request: Request, kind: str) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return _error(400, "body is not JSON")
        received.append({"path": request.url.path, "body": body, "headers": dict(request.headers)})
        model = str(body.get("model", cfg.name))
        status = cfg.fail_status or (int(model[5:]) if model.startswith("fail-") and model[5:].isdigit() else 0)
        if status:
            return _error(status, f"fake upstream {cfg.name} answers {status}")
        prompt = _prompt_text(body)
        prompt_tokens = approx_tokens(prompt)
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or cfg.output_tokens
        if cfg.max_model_len and prompt_tokens + int(limit) > cfg.max_model_len:
            return _error(400, f"This model's maximum context length is {cfg.max_model_len} tokens. However, you "
                               f"requested {prompt_tokens + int(limit)} tokens ({prompt_tokens} in the messages, "
                               f"{int(limit)} in the completion).")
        if cfg.answers is not None:
            pieces, cut = _reply_pieces(answer_for(prompt), max(1, int(limit)))
        else:
            pieces = [f"tok{i} " for i in range(max(1, min(int(limit), cfg.output_tokens)))]
            cut = True
        out_tokens = len(pieces)
        finish = "length" if cut else "stop"
        counter["n"] += 1
        rid = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{cfg.name}-{counter['n']}"
        prefill_s = (cfg.base_ms + cfg.per_1k_ms * prompt_tokens / 1000) / 1000
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": out_tokens,
                 "total_tokens": prompt_tokens + out_tokens}
        if body.get("stream"):
            opts = body.get("stream_options")
            with_usage = isinstance(opts, dict) and opts.get("include_usage") is True
            return StreamingResponse(_stream(kind, rid, model, prefill_s, pieces, finish, usage, with_usage),
                                     media_type="text/event-stream")
        await _occupy(prefill_s + cfg.decode_ms * out_tokens / 1000)
        text = "".join(pieces).rstrip() if cfg.answers is not None else " ".join(p.strip() for p in pieces)
        if kind == "chat":
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        return JSONResponse({"id": rid, "object": "chat.completion" if kind == "chat" else "text_completion",
                             "created": int(time.time()), "model": model, "choices": [choice], "usage": usage})

    @asynccontextmanager
    async def _slot() -> AsyncIterator[None]:
        """One of the ``slots`` (when they are limited) for a request's prefill and decode, counted in max_active."""
        if sem is not None:
            await sem.acquire()
        counter["active"] += 1
        counter["max_active"] = max(counter["max_active"], counter["active"])
        try:
            yield
        finally:
            counter["active"] -= 1
            if sem is not None:
                sem.release()

    async def _occupy(seconds: float) -> None:
        async with _slot():
            if seconds > 0:
                await asyncio.sleep(seconds)

    async def _stream(kind: str, rid: str, model: str, prefill_s: float, pieces: Sequence[str], finish: str,
                      usage: dict[str, int], with_usage: bool) -> AsyncIterator[bytes]:
        async with _slot():
            if prefill_s > 0:
                await asyncio.sleep(prefill_s)
            obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
            out_tokens = len(pieces)
            for i, piece in enumerate(pieces):
                if i and cfg.decode_ms > 0:
                    await asyncio.sleep(cfg.decode_ms / 1000)
                if kind == "chat":
                    delta: dict[str, Any] = {"content": piece}
                    if i == 0:
                        delta["role"] = "assistant"
                    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
                else:
                    choice = {"index": 0, "text": piece, "finish_reason": None}
                if i == out_tokens - 1:
                    choice["finish_reason"] = finish
                chunk = {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": [choice]}
                yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
                if model == "fail-midstream":
                    raise RuntimeError("fake upstream dies mid-stream (model fail-midstream)")
            if with_usage:
                chunk = {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": [],
                         "usage": usage}
                yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

    async def embeddings(request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return _error(400, "body is not JSON")
        received.append({"path": request.url.path, "body": body, "headers": dict(request.headers)})
        model = str(body.get("model", cfg.name))
        status = cfg.fail_status or (int(model[5:]) if model.startswith("fail-") and model[5:].isdigit() else 0)
        if status:
            return _error(status, f"fake upstream {cfg.name} answers {status}")
        inp = body.get("input")
        items = [inp] if isinstance(inp, str) or (isinstance(inp, list) and inp and isinstance(inp[0], int)) \
            else list(inp or [])
        dims = body.get("dimensions") if isinstance(body.get("dimensions"), int) else 8
        rows, tokens = [], 0
        for i, item in enumerate(items):
            text = item if isinstance(item, str) else json.dumps(item)
            tokens += approx_tokens(text) if isinstance(item, str) else len(item)
            digest = hashlib.sha256(text.encode()).digest()
            # The vector repeats the digest's 32 values: written by repeating their text, so that a 2,048 x 1,536
            # answer (29 MB, for the gateway's large-answer tests) takes the fake a moment, not seconds.
            values = [repr(round(b / 255 - 0.5, 6)) for b in digest]
            vector = ",".join(values * (dims // 32) + values[: dims % 32])
            rows.append(f'{{"object":"embedding","index":{i},"embedding":[{vector}]}}')
        await _occupy(cfg.base_ms / 1000)
        usage = json.dumps({"prompt_tokens": tokens, "total_tokens": tokens})
        content = f'{{"object":"list","data":[{",".join(rows)}],"model":{json.dumps(model)},"usage":{usage}}}'
        return Response(content, media_type="application/json")

    async def chat(request: Request) -> Response:
        return await handle(request, "chat")

    async def completions(request: Request) -> Response:
        return await handle(request, "completion")

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/debug/requests", debug, methods=["GET"]),
    ])


def _error(status: int, message: str) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": "fake_upstream_error", "param": None,
                                   "code": status}}, status_code=status)
