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
    extract_context,
    split_chunks,
)
from ragtrim.openai_text import text_of as _text_of
from ragtrim.serve.config import GatewayConfig
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
    """The request cannot be forwarded; becomes a 400 OpenAI-style error naming ``param``."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
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

    @property
    def tokens_saved(self) -> int:
        return self.prompt_tokens_before - self.prompt_tokens

    @property
    def estimated_tokens(self) -> int:
        """The tpm charge on admission: prompt tokens plus the output the request may produce."""
        n = self.body.get("n", 1)
        n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
        return self.prompt_tokens + self.max_output_tokens * n * self.prompts


def prepare_chat(body: Any, config: GatewayConfig, counter: TokenCounter) -> Prepared:
    t0 = time.perf_counter()
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty array of message objects", param="messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise RequestError(f"messages[{i}] must be an object with a string 'role'", param=f"messages[{i}]")
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

    kept, doc_before, doc_after = _trim_documents(docs, query, config, counter, budget_override)
    folded_messages, n_folded, hist_before, hist_after = _fold_history(clean, q_index, config, counter)

    final = _with_documents(folded_messages, kept, q_index is not None)
    out, removed = _plain(body, CHAT_FIELDS)
    out["messages"] = final
    max_out = _clamp_output(out, config, ("max_completion_tokens", "max_tokens"))
    stream, wants_usage = _stream_flags(out)
    prompt_tokens = count_messages(final, counter) + _tools_tokens(out, counter)
    if docs or n_folded:
        before = count_messages(_with_documents(clean, docs, q_index is not None), counter) + \
            _tools_tokens(out, counter)
    else:
        before = prompt_tokens
    return Prepared(
        body=out, stream=stream, client_wants_usage=wants_usage, prompt_tokens_before=before,
        prompt_tokens=prompt_tokens, documents=len(docs), documents_kept=len(kept),
        document_tokens_before=doc_before, document_tokens_after=doc_after, history_turns_folded=n_folded,
        history_tokens_before=hist_before, history_tokens_after=hist_after, max_output_tokens=max_out,
        trim_ms=(time.perf_counter() - t0) * 1000, removed_fields=removed,
    )


def prepare_completion(body: Any, config: GatewayConfig, counter: TokenCounter) -> Prepared:
    t0 = time.perf_counter()
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    prompt = body.get("prompt")
    budget_override = _budget_override(body)
    out, removed = _plain(body, COMPLETION_FIELDS)
    docs: list[str] = []
    kept: list[str] = []
    doc_before = doc_after = 0
    n_prompts = 1
    tag = config.trim.context_tag
    if isinstance(prompt, str):
        before = count_text(prompt, counter)
        match = context_re(tag).search(prompt)
        if match:
            docs = split_chunks(match.group(1))
            query = (prompt[: match.start()] + prompt[match.end():]).strip()
            kept, doc_before, doc_after = _trim_documents(docs, query, config, counter, budget_override)
            prompt = prompt[: match.start()] + render_documents(kept) + prompt[match.end():]
            out["prompt"] = prompt
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
            raise RequestError("'prompt' must be a string, an array of strings or token arrays", param="prompt")
        before = prompt_tokens
    else:
        raise RequestError("'prompt' must be a non-empty string or array", param="prompt")
    max_out = _clamp_output(out, config, ("max_tokens",))
    stream, wants_usage = _stream_flags(out)
    return Prepared(
        body=out, stream=stream, client_wants_usage=wants_usage, prompt_tokens_before=before,
        prompt_tokens=prompt_tokens, documents=len(docs), documents_kept=len(kept),
        document_tokens_before=doc_before, document_tokens_after=doc_after, history_turns_folded=0,
        history_tokens_before=0, history_tokens_after=0, max_output_tokens=max_out,
        trim_ms=(time.perf_counter() - t0) * 1000, removed_fields=removed, prompts=n_prompts,
    )


# -- documents ------------------------------------------------------------------------------------------------------
def _documents(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RequestError("'documents' must be an array of strings or {\"text\", \"id\"} objects", param="documents")
    docs = []
    for i, d in enumerate(raw):
        if isinstance(d, str):
            text = d
        elif isinstance(d, dict) and isinstance(d.get("text"), str):
            title = d.get("title")
            text = f"{title}\n{d['text']}" if isinstance(title, str) and title else d["text"]
        else:
            raise RequestError(f"documents[{i}] must be a string or an object with a string 'text'",
                               param=f"documents[{i}]")
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
        raise RequestError("'ragtrim' must be an object such as {\"budget\": 500}", param="ragtrim")
    unknown = set(extra) - {"budget"}
    if unknown:
        raise RequestError(f"unknown 'ragtrim' option {min(unknown)!r}; only 'budget' is accepted",
                           param="ragtrim")
    b = extra.get("budget")
    if b is None:
        return None
    if isinstance(b, bool) or not isinstance(b, int) or b < 0:
        raise RequestError(f"ragtrim.budget must be an integer token count >= 0, got {b!r}", param="ragtrim.budget")
    return b


def document_budget(doc_tokens: int, config_budget: float | None, override: int | None) -> int | None:
    """The token budget for this request's documents (a share of ``doc_tokens`` when ``config_budget`` is a float,
    else a token count); a per-request override can only lower it."""
    if config_budget is None:
        base = None
    elif isinstance(config_budget, int):
        base = config_budget
    else:
        base = math.ceil(config_budget * doc_tokens)
    if override is None:
        return base
    return override if base is None else min(base, override)


def _trim_documents(docs: list[str], query: str, config: GatewayConfig, counter: TokenCounter,
                    override: int | None) -> tuple[list[str], int, int]:
    if not docs:
        return [], 0, 0
    tokens = sum(counter.count(d) for d in docs)
    budget = document_budget(tokens, config.trim.budget, override)
    if budget is None or budget >= tokens:
        return docs, tokens, tokens
    from ragtrim.api import default_pipeline

    pipeline = default_pipeline(budget=budget, tokenizer=counter, scorer=config.trim.scorer)
    result = pipeline.run(docs, query=query)
    kept = [c.text for c in result.chunks]
    return kept, result.tokens_before, result.tokens_after


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


def count_text(text: str, counter: TokenCounter) -> int:
    return counter.count(text) if text else 0


def count_messages(messages: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    total = TOKENS_PER_REPLY
    for m in messages:
        total += TOKENS_PER_MESSAGE + count_text(_text_of(m.get("content")), counter)
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
    return total


def _tools_tokens(body: Mapping[str, Any], counter: TokenCounter) -> int:
    tools = body.get("tools")
    if not tools:
        return 0
    import json

    return count_text(json.dumps(tools, separators=(",", ":")), counter)


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
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise RequestError(f"{n} must be an integer >= 1, got {v!r}", param=n)
        if cap is not None and v > cap:
            out[n] = cap
    if not present:
        if cap is not None:
            out["max_tokens"] = cap
            return cap
        return DEFAULT_OUTPUT_ESTIMATE
    return min(int(out[n]) for n in present)


def _stream_flags(out: dict[str, Any]) -> tuple[bool, bool]:
    stream = out.get("stream") is True
    if not stream:
        out.pop("stream_options", None)
        return False, False
    opts = out.get("stream_options")
    wants = isinstance(opts, dict) and opts.get("include_usage") is True
    # Ask the upstream for usage so the tpm charge can be corrected; the gateway drops that chunk again when the
    # client did not ask for it.
    out["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
    return True, wants
