"""Which format a request log is in, told from its first lines: the formats the audit reads, the ones it refuses by
name (with what to pass instead), and the request lines of a vLLM server log.

One JSON object a line is classified by its keys (``classify``); a text line by vLLM's log prefix
(``classify_text``). ``decide`` takes the classes of the first lines: the most common readable format wins; a log
whose first lines are all of a refused format raises ``UnsupportedLogFormat`` naming it.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragtrim.errors import InputError

READ_FORMATS: dict[str, str] = {
    "openai_chat": "OpenAI chat completions request bodies",
    "anthropic_messages": "Anthropic Messages request bodies",
    "openai_completions": "OpenAI completions request bodies",
    "openai_batch": "OpenAI Batch API input lines (the format vLLM's run-batch reads too)",
    "anthropic_batch": "Anthropic Message Batches request lines",
    "gateway_log": "ragtrim serve's request log",
    "ragtrim": "ragtrim requests",
    "vllm_server_log": "a vLLM server log with request logging (--enable-log-requests)",
}
"""The formats the audit reads, by the name the report gives them (``input.format``)."""

REFUSED_FORMATS: dict[str, tuple[str, str]] = {
    "openai_responses": ("OpenAI Responses API bodies ('input', 'instructions')",
                         ("log the requests as chat completions bodies, or convert 'instructions' to a system "
                          "message and 'input' to messages")),
    "openai_embeddings": ("OpenAI embeddings requests (no prompt to a generating model)",
                          "audit the log of the chat or completions requests"),
    "openai_batch_output": ("an OpenAI Batch API output file (the responses, not the prompts)",
                            "pass the batch's input file (the lines with 'custom_id', 'method', 'url', 'body')"),
    "model_responses": ("model responses (chat completion or message objects), not requests",
                        "log the requests, e.g. with ragtrim serve's [log] log_request = true"),
    "gemini": ("Google Gemini generateContent bodies ('contents' with 'parts')",
               "convert them to OpenAI chat bodies ('messages' with 'role' and 'content')"),
    "bedrock_converse": ("Amazon Bedrock Converse bodies (content blocks without a 'type')",
                         "convert them to Anthropic Messages or OpenAI chat bodies"),
    "cohere_chat": ("Cohere chat bodies ('message', 'chat_history')",
                    "convert them to OpenAI chat bodies ('messages' with 'role' and 'content')"),
    "gateway_log_without_text": ("ragtrim serve's request log without the requests' text",
                                 "set [log] log_request = true in the gateway's config and audit the new log"),
}
"""Formats recognised but not read: the audit stops with an error that names the format and the fix."""

DETECT_LINES = 200
DETECT_CLASSIFIED = 20

_BEDROCK_BLOCK_KEYS = frozenset({"text", "image", "document", "video", "toolUse", "toolResult", "guardContent",
                                 "reasoningContent", "cachePoint"})
_ANTHROPIC_BLOCKS = frozenset({"image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
                               "search_result", "server_tool_use", "web_search_tool_result"})

# vLLM's logger: "INFO 05-13 10:11:12 [logger.py:39] ..." (newer: "(APIServer pid=1) INFO 05-13 10:11:12.345 ...").
VLLM_LOG_RE = re.compile(rb"^(?:\(\w+ pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d "
                         rb"\d\d:\d\d:\d\d(?:\.\d+)? \[[\w./-]+:\d+\] ")
_VLLM_REQUEST_RE = re.compile(r"(?:Received request|Request) (\S+?)(?: details)?: (prompt|params): ")
_MAX_TOKENS_RE = re.compile(r"\bmax_tokens=(\d+)")


class UnsupportedLogFormat(InputError):
    """The log is in a format the audit recognises but does not read; ``format`` is its name."""

    def __init__(self, message: str, log_format: str) -> None:
        super().__init__(message)
        self.format = log_format


def classify(obj: Any) -> str | None:
    """The format one parsed JSON line belongs to, or ``None`` when it fits none."""
    if not isinstance(obj, dict):
        return None
    if "custom_id" in obj:
        if isinstance(obj.get("params"), dict):
            return "anthropic_batch"
        if "response" in obj or ("error" in obj and "body" not in obj):
            return "openai_batch_output"
        if isinstance(obj.get("body"), dict):
            url = str(obj.get("url") or "")
            if url.endswith("/responses"):
                return "openai_responses"
            if url.endswith("/embeddings"):
                return "openai_embeddings"
            return "openai_batch"
    if isinstance(obj.get("request"), (dict, str)) or isinstance(obj.get("forwarded"), dict):
        return "gateway_log"
    if "tokens" in obj and "outcome" in obj:
        return "gateway_log_without_text"
    if "choices" in obj or obj.get("object") in ("chat.completion", "text_completion", "response") or (
            obj.get("type") == "message" and obj.get("role") == "assistant"):
        return "model_responses"
    messages = obj.get("messages")
    if isinstance(messages, list):
        if _bedrock_like(messages):
            return "bedrock_converse"
        if "system" in obj or "anthropic_version" in obj or _anthropic_blocks(messages):
            return "anthropic_messages"
        return "openai_chat"
    if "prompt" in obj:
        return "openai_completions"
    if "chunks" in obj:
        return "ragtrim"
    if isinstance(obj.get("contents"), list):
        return "gemini"
    if "input" in obj and ("instructions" in obj or "model" in obj):
        return "openai_embeddings" if "encoding_format" in obj or "dimensions" in obj else "openai_responses"
    if "message" in obj and ("chat_history" in obj or "preamble" in obj):
        return "cohere_chat"
    return None


def _blocks(messages: Sequence[Any]) -> Iterable[Mapping[str, Any]]:
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            yield from (b for b in content if isinstance(b, dict))


def _bedrock_like(messages: Sequence[Any]) -> bool:
    blocks = list(_blocks(messages))
    return bool(blocks) and all("type" not in b and b.keys() & _BEDROCK_BLOCK_KEYS for b in blocks)


def _anthropic_blocks(messages: Sequence[Any]) -> bool:
    return any(b.get("type") in _ANTHROPIC_BLOCKS for b in _blocks(messages))


def classify_text(line: bytes) -> str | None:
    """``vllm_server_log`` for a line of vLLM's logger, else ``None``."""
    return "vllm_server_log" if VLLM_LOG_RE.match(line) else None


def decide(kinds: Sequence[str | None], path: str) -> str:
    """The log's format from the classes of its first lines; raises ``UnsupportedLogFormat`` for a refused one."""
    counts = Counter(k for k in kinds if k is not None)
    readable = [(n, k) for k, n in counts.items() if k in READ_FORMATS]
    if readable:
        return max(readable)[1]
    refused = [(n, k) for k, n in counts.items() if k in REFUSED_FORMATS]
    if refused:
        n, kind = max(refused)
        what, fix = REFUSED_FORMATS[kind]
        seen = sum(counts.values())
        raise UnsupportedLogFormat(
            f"request log {path!r} holds {what} ({n} of the first {seen} recognised lines); the audit does not read "
            f"this format: {fix}. It reads: {', '.join(READ_FORMATS.values())}", kind)
    return "unknown"


# -- vLLM's server log ---------------------------------------------------------------------------------------------
def parse_vllm_line(text: str) -> tuple[str, str | None, int | None] | str:
    """A vLLM request log line as (request id, logged prompt or ``None``, max_tokens or ``None``), or the reason it
    is not one (``vllm_other_log_line``, ``vllm_request_without_prompt``, ``vllm_prompt_unreadable``).

    vLLM's ``RequestLogger`` writes ``Received request ID: prompt: '...', params: SamplingParams(...),
    prompt_token_ids: [...]`` (up to 0.9), or ``Received request ID: params: ...`` at INFO and ``Request ID details:
    prompt: '...', prompt_token_ids: [...]`` at DEBUG (0.10 on). The prompt is Python's repr of the templated
    prompt, cut at ``--max-log-len`` characters when that is set.
    """
    m = _VLLM_REQUEST_RE.search(text)
    if m is None:
        return "vllm_other_log_line"
    rid, field = m.group(1), m.group(2)
    rest = text[m.end():]
    tokens = _MAX_TOKENS_RE.search(rest)
    max_tokens = int(tokens.group(1)) if tokens else None
    if field == "params":
        return "vllm_request_without_prompt"
    literal = _python_string(rest)
    if literal is None:
        return "vllm_request_without_prompt" if rest.startswith("None") else "vllm_prompt_unreadable"
    try:
        prompt = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return "vllm_prompt_unreadable"
    return rid, prompt if isinstance(prompt, str) else None, max_tokens


def _python_string(text: str) -> str | None:
    """The Python string literal (``'...'`` or ``"..."``, as ``%r`` writes it) at the start of ``text``."""
    if not text or text[0] not in "'\"":
        return None
    quote = text[0]
    i = 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            return text[:i + 1]
        i += 1
    return None


# Chat templates whose turns can be told apart in a templated prompt: (name, turn regex with role and content).
_TEMPLATES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("chatml", re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>\n?|$)", re.DOTALL)),
    ("llama3", re.compile(r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\n\n(.*?)(?:<\|eot_id\|>|$)", re.DOTALL)),
    ("gemma", re.compile(r"<start_of_turn>(\w+)\n(.*?)(?:<end_of_turn>\n?|$)", re.DOTALL)),
)


def template_turns(prompt: str) -> tuple[str, list[tuple[str | None, str]]]:
    """(template name, pieces) of a templated prompt: ``(role, content)`` for each turn and ``(None, markup)`` for
    the template's own text between and around them (special tokens, role headers, the generation prompt). A prompt
    in no known template is ``("none", [])``."""
    for name, pattern in _TEMPLATES:
        turns = list(pattern.finditer(prompt))
        if not turns:
            continue
        pieces: list[tuple[str | None, str]] = []
        pos = 0
        for t in turns:
            markup = prompt[pos:t.start(2)]
            if markup:
                pieces.append((None, markup))
            role = "assistant" if t.group(1) == "model" else t.group(1)
            pieces.append((role, t.group(2)))
            pos = t.end(2)
        if prompt[pos:]:
            pieces.append((None, prompt[pos:]))
        return name, pieces
    return "none", []
