"""Turn an incoming OpenAI request into the plain request the upstream gets: documents and ``<context>`` blocks
trimmed and rendered as a numbered block before the question, old turns folded, output clamped, unknown fields gone.

Pure functions over dicts (no I/O), so the gateway runs them in a worker thread and tests call them directly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtrim.errors import ServeError
from ragtrim.openai_text import (
    TOKENS_PER_MESSAGE,
    TOKENS_PER_REPLY,
    context_re,
    document_text,
    extract_context,
    split_chunks,
)
from ragtrim.openai_text import text_of as _text_of
from ragtrim.recipes import RecipeChoice
from ragtrim.serve.autotrim import AutoTrim
from ragtrim.serve.config import GatewayConfig
from ragtrim.serve.messages import message_problem
from ragtrim.text.counting import PendingCounts, start_counts
from ragtrim.text.tokens import TokenCounter

CHAT_FIELDS = frozenset({
    "model", "messages", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "max_tokens",
    "max_completion_tokens", "n", "presence_penalty", "response_format", "seed", "stop", "stream",
    "stream_options", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls", "user",
    "service_tier", "store", "metadata", "modalities", "reasoning_effort", "prediction", "audio", "functions",
    "function_call",
})
COMPLETION_FIELDS = frozenset({
    "model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n",
    "presence_penalty", "seed", "stop", "stream", "stream_options", "suffix", "temperature", "top_p", "user",
})
# Output tokens assumed for the tpm charge when neither the request nor [limits] bounds them; corrected from usage.
DEFAULT_OUTPUT_ESTIMATE = 256


class RequestError(ServeError):
    """The request cannot be forwarded; becomes a 400 OpenAI-style error naming ``param``, with OpenAI's codes
    (``invalid_type``, ``invalid_value``, ``missing_required_parameter``) or the gateway's own."""

    def __init__(self, message: str, *, param: str | None = None, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the gateway forwards, and the token accounting for headers, limits, metrics and the log."""

    body: dict[str, Any]
    stream: bool
    client_wants_usage: bool
    prompt_tokens_before: int
    prompt_tokens: int
    documents: int
    documents_kept: int
    document_tokens_before: int
    document_tokens_after: int
    history_turns_folded: int
    history_tokens_before: int
    history_tokens_after: int
    max_output_tokens: int
    trim_ms: float
    removed_fields: tuple[str, ...]
    prompts: int = 1  # a completions request may carry a batch of prompts, each with its own output
    largest_input_tokens: int | None = None  # embeddings: the longest input, what max_input_tokens caps
    recipe: str = ""  # trim.scorer = "auto": the recipe chosen for the documents (ragtrim.serve.autotrim)
    recipe_reason: str = ""
    trim_stage_seconds: tuple[tuple[str, float], ...] = ()
    """Where the documents' trim spent its time: ``("pipeline", s)`` for the whole run (prefetch and waits for a
    model pass included), ``("prefetch:<stage>", s)`` for each stage's prefetch, then each stage of its trace with
    its own seconds; empty when nothing was trimmed."""

    @property
    def tokens_saved(self) -> int:
        return self.prompt_tokens_before - self.prompt_tokens

    @property
    def estimated_tokens(self) -> int:
        """The tpm charge on admission: prompt tokens plus the output the request may produce."""
        choices = [v for v in (self.body.get("n"), self.body.get("best_of"))
                   if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        return self.prompt_tokens + self.max_output_tokens * max(choices, default=1) * self.prompts


def prepare_chat(body: Any, config: GatewayConfig, counter: TokenCounter, *, auto: AutoTrim | None = None) -> Prepared:
    t0 = time.perf_counter()
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_type")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty array of message objects", param="messages",
                           code="missing_required_parameter" if messages is None else "invalid_type")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise RequestError(f"messages[{i}] must be an object with a string 'role'", param=f"messages[{i}]",
                               code="invalid_type")
        problem = message_problem(i, m)
        if problem is not None:
            raise RequestError(problem[0], param=problem[1], code=problem[2])
    budget_override = _budget_override(body)
    tag = config.trim.context_tag
    docs = _documents(body.get("documents"))
    # Retrieved context inside <context>...</context> of any message joins the documents.
    clean: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str) and f"<{tag}" in content.lower():
            text, found = extract_context(content, tag)
            docs.extend(found)
            m = {**m, "content": text}
        elif isinstance(content, list):
            parts = []
            for p in content:
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) \
                        and f"<{tag}" in p["text"].lower():
                    text, found = extract_context(p["text"], tag)
                    docs.extend(found)
                    p = {**p, "text": text}
                parts.append(p)
            m = {**m, "content": parts}
        clean.append(m)

    q_index = _last_user_index(clean)
    query = _text_of(clean[q_index].get("content")) if q_index is not None else ""
    untrimmed = _with_documents(clean, docs, q_index is not None)
    ahead = count_ahead([_text_of(m.get("content")) for m in untrimmed] if docs else [], counter)

    kept, doc_before, doc_after, choice, timings = _trim_documents(docs, query, config, counter, budget_override,
                                                                   auto, streamed=body.get("stream") is True)
    folded_messages, n_folded, hist_before, hist_after = _fold_history(clean, q_index, config, counter)

    final = _with_documents(folded_messages, kept, q_index is not None)
    out, removed = _plain(body, CHAT_FIELDS)
    out["messages"] = final
    max_out = _clamp_output(out, config, ("max_completion_tokens", "max_tokens"))
    _check_choices(out, config, ("n",))
    stream, wants_usage = _stream_flags(out)
    fields = fields_tokens(out, counter, skip=("messages",))
    prompt_tokens = count_messages(final, counter) + fields
    if docs or n_folded:
        ahead.result()
        before = count_messages(untrimmed, counter) + fields
    else:
        before = prompt_tokens
    return Prepared(
        body=out, stream=stream, client_wants_usage=wants_usage, prompt_tokens_before=before,
        prompt_tokens=prompt_tokens, documents=len(docs), documents_kept=len(kept),
        document_tokens_before=doc_before, document_tokens_after=doc_after, history_turns_folded=n_folded,
        history_tokens_before=hist_before, history_tokens_after=hist_after, max_output_tokens=max_out,
        trim_ms=(time.perf_counter() - t0) * 1000, removed_fields=removed,
        recipe=choice.recipe if choice else "", recipe_reason=choice.reason if choice else "",
        trim_stage_seconds=timings,
    )


def prepare_completion(body: Any, config: GatewayConfig, counter: TokenCounter, *,
                       auto: AutoTrim | None = None) -> Prepared:
    t0 = time.perf_counter()
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_type")
    prompt = body.get("prompt")
    budget_override = _budget_override(body)
    out, removed = _plain(body, COMPLETION_FIELDS)
    docs: list[str] = []
    kept: list[str] = []
    doc_before = doc_after = 0
    choice: RecipeChoice | None = None
    timings: tuple[tuple[str, float], ...] = ()
    n_prompts = 1
    tag = config.trim.context_tag
    if isinstance(prompt, str):
        match = context_re(tag).search(prompt)
        ahead = count_ahead([prompt] if match else [], counter)
        untrimmed = prompt
        if match:
            docs = split_chunks(match.group(1))
            query = (prompt[: match.start()] + prompt[match.end():]).strip()
            kept, doc_before, doc_after, choice, timings = _trim_documents(
                docs, query, config, counter, budget_override, auto, streamed=body.get("stream") is True)
            prompt = prompt[: match.start()] + render_documents(kept) + prompt[match.end():]
            out["prompt"] = prompt
        ahead.result()
        before = count_text(untrimmed, counter)
        prompt_tokens = count_text(prompt, counter)
    elif isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            prompt_tokens = sum(count_text(p, counter) for p in prompt)
            n_prompts = len(prompt)
        elif all(isinstance(p, int) for p in prompt):
            prompt_tokens = len(prompt)
        elif all(isinstance(p, list) for p in prompt):
            prompt_tokens = sum(len(p) for p in prompt)
            n_prompts = len(prompt)
        else:
            raise RequestError("'prompt' must be a string, an array of strings or token arrays", param="prompt",
                               code="invalid_type")
        before = prompt_tokens
    else:
        raise RequestError("'prompt' must be a non-empty string or array", param="prompt",
                           code="missing_required_parameter" if prompt is None else "invalid_type")
    max_out = _clamp_output(out, config, ("max_tokens",))
    _check_choices(out, config, ("n", "best_of"))
    stream, wants_usage = _stream_flags(out)
    fields = fields_tokens(out, counter, skip=("prompt",))
    prompt_tokens += fields
    before += fields
    return Prepared(
        body=out, stream=stream, client_wants_usage=wants_usage, prompt_tokens_before=before,
        prompt_tokens=prompt_tokens, documents=len(docs), documents_kept=len(kept),
        document_tokens_before=doc_before, document_tokens_after=doc_after, history_turns_folded=0,
        history_tokens_before=0, history_tokens_after=0, max_output_tokens=max_out,
        trim_ms=(time.perf_counter() - t0) * 1000, removed_fields=removed, prompts=n_prompts,
        recipe=choice.recipe if choice else "", recipe_reason=choice.reason if choice else "",
        trim_stage_seconds=timings,
    )


EMBEDDING_FIELDS = frozenset({"model", "input", "encoding_format", "dimensions", "user"})


def prepare_embeddings(body: Any, config: GatewayConfig, counter: TokenCounter, *,
                       auto: AutoTrim | None = None) -> Prepared:
    """An embeddings request: ``input`` is a string, an array of strings, a token array or an array of token
    arrays; each input is counted (``max_input_tokens`` caps the longest), nothing is trimmed."""
    t0 = time.perf_counter()
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_type")
    inp = body.get("input")
    sizes: list[int]
    if isinstance(inp, str):
        sizes = [count_text(inp, counter)]
    elif isinstance(inp, list) and inp:
        if all(isinstance(x, str) for x in inp):
            sizes = [count_text(x, counter) for x in inp]
        elif all(isinstance(x, int) and not isinstance(x, bool) for x in inp):
            sizes = [len(inp)]
        elif all(isinstance(x, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in x)
                 for x in inp):
            sizes = [len(x) for x in inp]
        else:
            raise RequestError("'input' must be a string, an array of strings, a token array or an array of token "
                               "arrays", param="input", code="invalid_type")
    else:
        raise RequestError("'input' must be a non-empty string or array", param="input",
                           code="missing_required_parameter" if inp is None else "invalid_type")
    out, removed = _plain(body, EMBEDDING_FIELDS)
    tokens = sum(sizes)
    return Prepared(
        body=out, stream=False, client_wants_usage=False, prompt_tokens_before=tokens, prompt_tokens=tokens,
        documents=0, documents_kept=0, document_tokens_before=0, document_tokens_after=0, history_turns_folded=0,
        history_tokens_before=0, history_tokens_after=0, max_output_tokens=0,
        trim_ms=(time.perf_counter() - t0) * 1000, removed_fields=removed, prompts=len(sizes),
        largest_input_tokens=max(sizes),
    )


# -- documents ------------------------------------------------------------------------------------------------------
def _documents(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RequestError("'documents' must be an array of strings or {\"text\", \"id\"} objects", param="documents",
                           code="invalid_type")
    docs = []
    for i, d in enumerate(raw):
        text = document_text(d)
        if text is None:
            raise RequestError(f"documents[{i}] must be a string or an object with a string 'text'",
                               param=f"documents[{i}]", code="invalid_type")
        if text.strip():
            docs.append(text.strip())
    return docs


def render_documents(docs: Sequence[str]) -> str:
    """The numbered block placed before the question."""
    if not docs:
        return ""
    return "Documents:\n" + "\n\n".join(f"[{i}] {d}" for i, d in enumerate(docs, 1))


def _budget_override(body: Mapping[str, Any]) -> int | None:
    extra = body.get("ragtrim")
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise RequestError("'ragtrim' must be an object such as {\"budget\": 500}", param="ragtrim",
                           code="invalid_type")
    unknown = set(extra) - {"budget"}
    if unknown:
        raise RequestError("unknown 'ragtrim' option; only 'budget' is accepted", param="ragtrim",
                           code="unknown_parameter")
    b = extra.get("budget")
    if b is None:
        return None
    if isinstance(b, bool) or not isinstance(b, int) or b < 0:
        raise RequestError("ragtrim.budget must be an integer token count >= 0", param="ragtrim.budget")
    return b


def document_budget(doc_tokens: int, config_budget: float | str | None, override: int | None) -> int | None:
    """The token budget for this request's documents (a share of ``doc_tokens`` when ``config_budget`` is a float,
    else a token count; none for ``"lossless"``); a per-request override can only lower it."""
    if config_budget is None or isinstance(config_budget, str):
        base = None
    elif isinstance(config_budget, int):
        base = config_budget
    else:
        base = math.ceil(config_budget * doc_tokens)
    if override is None:
        return base
    return override if base is None else min(base, override)


def _trim_documents(docs: list[str], query: str, config: GatewayConfig, counter: TokenCounter,
                    override: int | None, auto: AutoTrim | None = None, *, streamed: bool = False,
                    ) -> tuple[list[str], int, int, RecipeChoice | None, tuple[tuple[str, float], ...]]:
    """The documents kept, their tokens before and after, (``trim.scorer = "auto"`` with the gateway's ``AutoTrim``)
    the recipe chosen by cost, and where the trim spent its time (``Prepared.trim_stage_seconds``; empty when
    nothing ran); ``streamed``: the request streams (its time to first token teaches ``auto`` the upstream's prefill
    cost)."""
    if not docs:
        return [], 0, 0, None, ()
    tokens = sum(count_text(d, counter) for d in docs)
    budget = document_budget(tokens, config.trim.budget, override)
    keep = config.trim.keep
    if budget is not None and budget >= tokens:
        budget = None  # nothing to cut for it: at most retention mode runs
    from ragtrim.api import default_pipeline, lossless_pipeline, recipe_pipeline

    choice: RecipeChoice | None = None
    if budget is None and keep is None:
        if config.trim.budget != "lossless":
            return docs, tokens, tokens, None, ()
        pipeline = lossless_pipeline(tokenizer=counter)
    # retention mode decides how much to keep by the answer's probability, so it is not chosen by cost
    elif keep is not None or config.trim.scorer != "auto" or auto is None:
        pipeline = default_pipeline(budget=budget, tokenizer=counter, scorer=config.trim.scorer, keep=keep)
    else:
        choice = auto.choose(tokens_before=tokens, budget=budget,
                             prior_ms_per_token=config.trim.prefill_ms_per_token, hard_budget=override is not None,
                             tokenizer=counter, streamed=streamed)
        pipeline = recipe_pipeline(choice.recipe, budget=budget, tokenizer=counter)
    started = time.perf_counter()
    result = pipeline.run(docs, query=query)
    seconds = time.perf_counter() - started
    if choice is not None and auto is not None:
        auto.observe_trim(choice.recipe, tokens, seconds)
    timings = (("pipeline", seconds), *((f"prefetch:{name}", s) for name, s in result.prefetch_seconds),
               *((r.stage, r.seconds) for r in result.trace))
    return [c.text for c in result.chunks], result.tokens_before, result.tokens_after, choice, timings


# -- messages -------------------------------------------------------------------------------------------------------
def _last_user_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


def _with_documents(messages: list[dict[str, Any]], docs: Sequence[str], has_user: bool) -> list[dict[str, Any]]:
    if not docs:
        return messages
    block = render_documents(docs)
    if not has_user:
        return [*messages, {"role": "user", "content": block}]
    i = _last_user_index(messages)
    assert i is not None  # has_user guarantees it; the folded list keeps the question last
    m = messages[i]
    content = m.get("content")
    if isinstance(content, list):
        new_content: Any = [{"type": "text", "text": block}, *content]
    else:
        question = content if isinstance(content, str) else ""
        new_content = f"{block}\n\n{question}" if question else block
    return [*messages[:i], {**m, "content": new_content}, *messages[i + 1:]]


def _fold_history(messages: list[dict[str, Any]], q_index: int | None, config: GatewayConfig,
                  counter: TokenCounter) -> tuple[list[dict[str, Any]], int, int, int]:
    """Fold turns before the question beyond the last ``history_turns`` into one state message."""
    keep = config.trim.history_turns
    if keep <= 0 or q_index is None:
        return messages, 0, 0, 0
    lead = 0
    while lead < q_index and messages[lead].get("role") in ("system", "developer"):
        lead += 1
    turns = messages[lead:q_index]
    if len(turns) <= keep:
        return messages, 0, 0, 0
    # Only plain text turns can be folded; tool calls and multimodal parts stay verbatim.
    if not all(m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str) and
               set(m) <= {"role", "content", "name"} for m in turns):
        return messages, 0, 0, 0
    from ragtrim.history.fold import compress_history

    hist = compress_history([{"role": m["role"], "content": m["content"], "turn_id": f"t{i}"}
                             for i, m in enumerate(turns)], keep_last_turns=keep, counter=counter)
    state_msgs: list[dict[str, Any]] = []
    if hist.state_text:
        state_msgs.append({"role": "system", "content": "Earlier in this conversation:\n" + hist.state_text})
    recent = turns[len(turns) - len(hist.recent):]
    folded = [*messages[:lead], *state_msgs, *recent, *messages[q_index:]]
    return folded, len(hist.folded_turn_ids), hist.tokens_before, hist.tokens_after


PIECE_CHARS = 1 << 16
"""Texts longer than this are counted in pieces (see ``count_text``)."""


def count_ahead(texts: Sequence[str], counter: TokenCounter) -> PendingCounts:
    """Start counting ``texts`` (the untrimmed prompt's) on ragtrim's counting threads, where the host has them to
    spare (``start_counts``; with rs-bpe too, from ``FAST_PARALLEL_WORKERS`` threads up, whatever the prompt's size),
    while the documents are trimmed; ``result()`` puts the counts in the counter's cache, where ``count_text`` finds
    them. Texts ``count_text`` counts in pieces are left to it."""
    return start_counts(counter, [t for t in texts if len(t) <= PIECE_CHARS], fast_small_in_caller=False)


def count_text(text: str, counter: TokenCounter) -> int:
    """Tokens of ``text``. A long text is counted in pieces of at most ``PIECE_CHARS`` characters, each cut just
    before a space that precedes a non-space: a pre-token boundary of the BPE tokenizers (tiktoken's and the
    Hugging Face byte-level and metaspace ones start a new pre-token there), so the sum is the whole text's count.
    Counted whole, a message of megabytes becomes one list of millions of ints at once, built while the
    tokenizer holds the interpreter lock."""
    if not text:
        return 0
    if len(text) <= PIECE_CHARS:
        return counter.count(text)
    total = 0
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + PIECE_CHARS)
        if end < n:
            cut = _space_before_word(text, start + PIECE_CHARS // 2, end)
            if cut > start:
                end = cut
        total += counter.count(text[start:end])
        start = end
    return total


def _space_before_word(text: str, lo: int, hi: int) -> int:
    """The last index in [lo, hi) holding a space followed by a non-space character (-1 when none)."""
    i = text.rfind(" ", lo, hi)
    while i >= lo:
        if i + 1 < len(text) and not text[i + 1].isspace():
            return i
        i = text.rfind(" ", lo, i)
    return -1


def count_messages(messages: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Prompt tokens of chat messages: OpenAI's framing, the text of each message, and every other text-bearing
    thing a message carries (names, tool calls, non-text parts, other fields), so that none of it slips past
    ``max_input_tokens``. Media parts (images, audio, files) are the model server's to count."""
    total = TOKENS_PER_REPLY
    for m in messages:
        content = m.get("content")
        total += TOKENS_PER_MESSAGE + count_text(_text_of(content), counter)
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                    continue  # counted in the text above
                if isinstance(part, dict) and part.get("type") in MEDIA_PARTS:
                    continue
                total += json_tokens(part, counter)
        elif content is not None and not isinstance(content, str):
            total += json_tokens(content, counter)
        name = m.get("name")
        if isinstance(name, str):
            total += count_text(name, counter)
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            for c in calls:
                fn = c.get("function") if isinstance(c, dict) else None
                if isinstance(fn, dict):
                    total += count_text(str(fn.get("name", "")), counter)
                    total += count_text(str(fn.get("arguments", "")), counter)
                else:
                    total += json_tokens(c, counter)
        elif calls is not None:
            total += json_tokens(calls, counter)
        for key, value in m.items():
            if key not in _MESSAGE_COUNTED and value is not None:
                total += json_tokens(value, counter)
    return total


# Message keys counted above (``role`` is framing).
_MESSAGE_COUNTED = frozenset({"role", "content", "name", "tool_calls"})
MEDIA_PARTS = frozenset({"image_url", "input_audio", "file", "video_url", "audio_url", "input_image", "input_file"})
"""Content part types whose payload is media, not text: counted by the model server, bounded by
``limits.max_body_bytes`` here."""
# Top-level fields that carry no text the model reads (numbers, flags, the model name).
_FIELDS_WITHOUT_TEXT = frozenset({
    "model", "stream", "stream_options", "n", "best_of", "max_tokens", "max_completion_tokens", "temperature",
    "top_p", "frequency_penalty", "presence_penalty", "seed", "logprobs", "top_logprobs", "echo", "store",
    "parallel_tool_calls", "service_tier", "reasoning_effort", "modalities", "encoding_format", "dimensions",
})


def fields_tokens(body: Mapping[str, Any], counter: TokenCounter, *, skip: tuple[str, ...]) -> int:
    """Tokens of every forwarded field besides the prompt that can carry text (``tools``, ``response_format``,
    ``prediction``, ``stop``, ``metadata``, ``suffix``, ...), counted as their compact JSON."""
    total = 0
    for key, value in body.items():
        if key in skip or key in _FIELDS_WITHOUT_TEXT or value is None or isinstance(value, (bool, int, float)):
            continue
        total += json_tokens(value, counter)
    return total


def json_tokens(value: Any, counter: TokenCounter) -> int:
    """Tokens of ``value`` as compact JSON (a plain string as itself)."""
    if isinstance(value, str):
        return count_text(value, counter)
    import json

    return count_text(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str), counter)


# -- fields and limits ----------------------------------------------------------------------------------------------
def _plain(body: Mapping[str, Any], allowed: frozenset[str]) -> tuple[dict[str, Any], tuple[str, ...]]:
    out = {k: v for k, v in body.items() if k in allowed}
    removed = tuple(sorted(k for k in body if k not in allowed))
    return out, removed


def _clamp_output(out: dict[str, Any], config: GatewayConfig, names: tuple[str, ...]) -> int:
    cap = config.limits.max_output_tokens
    present = [n for n in names if out.get(n) is not None]
    for n in present:
        v = out[n]
        if isinstance(v, bool) or not isinstance(v, int):
            raise RequestError(f"{n} must be an integer >= 1, got a {type(v).__name__}", param=n, code="invalid_type")
        if v < 1:
            raise RequestError(f"{n} must be an integer >= 1, got {v}", param=n)
        if cap is not None and v > cap:
            out[n] = cap
    if not present:
        if cap is not None:
            out["max_tokens"] = cap
            return cap
        return DEFAULT_OUTPUT_ESTIMATE
    return min(int(out[n]) for n in present)


def _check_choices(out: Mapping[str, Any], config: GatewayConfig, names: tuple[str, ...]) -> None:
    """``n`` (and ``best_of``): an integer >= 1 and at most ``limits.max_n``: each choice is a full generation."""
    cap = config.limits.max_n
    for name in names:
        v = out.get(name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise RequestError(f"{name} must be an integer >= 1, got {type(v).__name__}", param=name,
                               code="invalid_type")
        if v < 1:
            raise RequestError(f"{name} must be an integer >= 1, got {v}", param=name)
        if cap is not None and v > cap:
            raise RequestError(f"{name} must be at most {cap} on this gateway (limits.max_n), got {v}", param=name)


def _stream_flags(out: dict[str, Any]) -> tuple[bool, bool]:
    raw = out.get("stream")
    if raw is not None and not isinstance(raw, bool):
        # "stream": "yes" or 1 used to be relayed as an SSE body under a JSON content type.
        raise RequestError(f"'stream' must be true or false, got a {type(raw).__name__}", param="stream",
                           code="invalid_type")
    opts = out.get("stream_options")
    if opts is not None:
        if not isinstance(opts, dict):
            raise RequestError(f"'stream_options' must be an object, got a {type(opts).__name__}",
                               param="stream_options", code="invalid_type")
        if opts.get("include_usage") is not None and not isinstance(opts.get("include_usage"), bool):
            raise RequestError("'stream_options.include_usage' must be true or false",
                               param="stream_options.include_usage", code="invalid_type")
    stream = raw is True
    if not stream:
        out.pop("stream_options", None)
        return False, False
    wants = isinstance(opts, dict) and opts.get("include_usage") is True
    # Ask the upstream for usage so the tpm charge can be corrected; the gateway drops that chunk again when the
    # client did not ask for it.
    out["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
    return True, wants
