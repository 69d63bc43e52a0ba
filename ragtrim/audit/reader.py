"""Read a request log as a stream of ``AuditRequest``: each prompt cut into parts (system, history, context,
question, other), in the order the model sees them. Plain or gzip JSONL, one request at a time.

Shapes read, one JSON object a line: an OpenAI chat body (``messages``, optional ``documents``), a completions body
(``prompt``), ragtrim's own request (``query``, ``chunks``, ``history``), and any of them wrapped: an OpenAI/vLLM
batch line (``{"custom_id", "body"}``), the gateway's request log (``request`` with ``log_request = true``, else
``forwarded``) or ``{"request": ...}``. A line that fits none is skipped and counted with its reason.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple, cast

from ragtrim.errors import InputError
from ragtrim.openai_text import TOKENS_PER_MESSAGE, TOKENS_PER_REPLY, split_chunks, text_of

Part = Literal["system", "history", "context", "question", "other"]
PARTS: tuple[Part, ...] = ("system", "history", "context", "question", "other")
"""Every prompt token belongs to exactly one part. ``other``: message framing (OpenAI's 4 tokens a message and 3 a
reply, as the gateway counts), tool definitions and function names."""

Endpoint = Literal["chat", "completions", "ragtrim"]
_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_ROLES = frozenset({"tool", "function", "ipython"})
_CONVERSATION_KEYS = ("conversation_id", "session_id", "thread_id", "conversation")
_ID_KEYS = ("request_id", "custom_id", "id")
MAX_SKIP_EXAMPLES = 5


class Segment(NamedTuple):
    """One piece of a prompt: a message's text, a document, a tool result. ``role`` is the message role (``""``
    for documents and definitions); ``source`` says where it came from (``message``, ``documents``, ``context_tag``,
    ``tool_result``, ``tool_call``, ``tools``, ``chunks``, ``prompt``). A named tuple: immutable, and a million of
    them are built several times faster than frozen dataclasses."""

    part: Part
    text: str
    role: str = ""
    source: str = "message"


@dataclass(frozen=True, slots=True)
class AuditRequest:
    """One logged request, its prompt as ``segments`` in the order the model sees them.

    ``fixed_tokens`` are counted without text (message framing) and belong to ``other``. ``conversation`` is the
    explicit conversation id when the log has one, else ``None`` (the audit then groups by system prompt and first
    user message). ``output_tokens`` is the completion size when the log records it, else the request's limit.
    """

    request_id: str
    line: int
    endpoint: Endpoint
    segments: tuple[Segment, ...]
    fixed_tokens: int = 0
    conversation: str | None = None
    model: str | None = None
    output_tokens: int | None = None
    pretrimmed: bool = False

    @property
    def question(self) -> str:
        return "\n".join(s.text for s in self.segments if s.part == "question")

    def texts(self, part: Part) -> list[str]:
        return [s.text for s in self.segments if s.part == part]


@dataclass(slots=True)
class SkipLog:
    """Lines that were not requests: counts by reason, and the first few line numbers (nothing is skipped silently)."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, line: int, reason: str, detail: str) -> None:
        self.counts[reason] += 1
        if len(self.examples) < MAX_SKIP_EXAMPLES:
            self.examples.append({"line": line, "reason": reason, "detail": detail[:200]})

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "by_reason": dict(sorted(self.counts.items())), "examples": list(self.examples)}


def _loads() -> Any:
    try:
        import orjson

        return orjson.loads
    except ImportError:  # orjson comes with the serve extra; json is fine, only slower
        return json.loads


def open_log(path: str | Path) -> io.BufferedIOBase:
    """A byte stream over ``path`` (``-``: stdin), gunzipped when the file starts with the gzip magic bytes.

    Lines stay bytes: the JSON parser decodes (and checks) UTF-8 itself, once."""
    if str(path) == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        except IsADirectoryError:
            raise InputError(f"request log {str(path)!r} is a directory; pass a JSONL file") from None
        except FileNotFoundError:
            raise InputError(f"request log {str(path)!r} does not exist") from None
        except OSError as exc:
            raise InputError(f"request log {str(path)!r} cannot be read: {exc.strerror}") from None
    buffered: Any = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=buffered)
    return cast(io.BufferedIOBase, buffered)


def read_requests(path: str | Path, *, skipped: SkipLog, context_tag: str = "context") -> Iterator[AuditRequest]:
    """Stream the requests of a log; lines that are not requests go to ``skipped`` (blank lines are ignored)."""
    loads = _loads()
    with open_log(path) as stream:
        line_no = 0
        lines = iter(stream)
        while True:
            try:
                line = next(lines, b"")
            except (OSError, EOFError) as exc:  # a truncated or corrupt gzip stream
                raise InputError(f"request log {str(path)!r} cannot be read after line {line_no}: {exc}") from None
            if not line:
                return
            line_no += 1
            if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark
                line = line[3:]
            if not line.strip():
                continue
            try:
                obj = loads(line)
            except ValueError as exc:
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as bad:
                    raise InputError(f"request log {str(path)!r} is not UTF-8 at line {line_no}: {bad.reason}; "
                                     "convert it first, e.g. iconv -f latin1 -t utf-8") from None
                skipped.add(line_no, "not_json", str(exc))
                continue
            try:
                yield parse_request(obj, line_no, context_tag=context_tag)
            except InputError as exc:
                skipped.add(line_no, getattr(exc, "reason", "not_a_request"), str(exc))


class _Skip(InputError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def parse_request(obj: Any, line: int, *, context_tag: str = "context") -> AuditRequest:
    """One log line (parsed JSON) as an ``AuditRequest``; raises InputError (with a ``reason``) when it is none."""
    if not isinstance(obj, dict):
        raise _Skip("not_a_request", f"a JSON {type(obj).__name__}, not an object")
    body, wrapper, pretrimmed = _unwrap(obj)
    rid = _first_str(wrapper, _ID_KEYS) or _first_str(body, _ID_KEYS) or f"line-{line}"
    conversation = _conversation(wrapper) or _conversation(body)
    model = body.get("model") if isinstance(body.get("model"), str) else None
    output = _output_tokens(wrapper, body)
    if isinstance(body.get("messages"), list):
        segments, fixed = _chat_segments(body, context_tag)
        return AuditRequest(rid, line, "chat", segments, fixed, conversation, model, output, pretrimmed)
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt)):
        texts = [prompt] if isinstance(prompt, str) else list(prompt)
        segments = tuple(s for t in texts for s in _completion_segments(t, context_tag))
        return AuditRequest(rid, line, "completions", segments, 0, conversation, model, output, pretrimmed)
    if isinstance(body.get("chunks"), list) and isinstance(body.get("query", ""), str):
        return AuditRequest(rid, line, "ragtrim", _ragtrim_segments(body), 0, conversation, model, output, pretrimmed)
    if "tokens" in obj and "outcome" in obj:
        raise _Skip("log_without_text", "a gateway log line without text; set [log] log_request = true")
    raise _Skip("not_a_request", "no 'messages', 'prompt' or 'chunks' (an OpenAI chat or completions body)")


def _unwrap(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(body, wrapper, pretrimmed): the request body inside a batch line or a gateway log line."""
    for key in ("request", "body", "received"):
        inner = obj.get(key)
        if isinstance(inner, dict):
            return inner, obj, False
        if isinstance(inner, str) and key == "request":
            raise _Skip("request_not_json", "the logged request is not a JSON object (the gateway answered 400)")
    forwarded = obj.get("forwarded")
    if isinstance(forwarded, dict):  # the gateway's log_text: already trimmed, so savings are understated
        return forwarded, obj, True
    return obj, obj, False


def _first_str(d: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return str(v)
    return None


def _conversation(d: Mapping[str, Any]) -> str | None:
    found = _first_str(d, _CONVERSATION_KEYS)
    meta = d.get("metadata")
    if found is None and isinstance(meta, dict):
        found = _first_str(meta, _CONVERSATION_KEYS)
    return found


def _output_tokens(wrapper: Mapping[str, Any], body: Mapping[str, Any]) -> int | None:
    tokens = wrapper.get("tokens")
    if isinstance(tokens, dict) and isinstance(tokens.get("completion"), int):
        return int(tokens["completion"])
    usage = wrapper.get("usage")
    response = wrapper.get("response")
    if not isinstance(usage, dict) and isinstance(response, dict):
        usage = response.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return int(usage["completion_tokens"])
    for key in ("max_completion_tokens", "max_tokens"):
        v = body.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


@functools.cache
def _tag_re(tag: str) -> re.Pattern[str]:
    """Opening and closing ``tag``s, the tag in any case. The leading literal ``<`` lets the regex engine jump from
    one ``<`` to the next; ``context_re``'s case-insensitive ``(.*?)`` steps through every character (25x slower)."""
    return re.compile("<(/?)(?i:" + re.escape(tag) + ")>")


def _blocks(text: str, tag: str) -> list[tuple[int, int, int, int]]:
    """(start, content start, content end, end) of each ``<tag>...</tag>`` block, as ``context_re`` finds them:
    an opening tag, then the first closing tag after it."""
    out = []
    opened = None
    for m in _tag_re(tag).finditer(text):
        if opened is None:
            if not m.group(1):
                opened = m
        elif m.group(1):
            out.append((opened.start(), opened.end(), m.start(), m.end()))
            opened = None
    return out


def _split_context(text: str, part: Part, role: str, tag: str) -> list[Segment]:
    """``text`` cut at its ``<tag>`` blocks: the text around them keeps ``part``, the blocks' chunks are context."""
    blocks = _blocks(text, tag) if "<" in text else []
    if not blocks:
        return [Segment(part, text, role)] if text else []
    out: list[Segment] = []
    pos = 0
    for start, inner_start, inner_end, end in blocks:
        before = text[pos:start].strip()
        if before:
            out.append(Segment(part, before, role))
        out.extend(Segment("context", c, role, "context_tag") for c in split_chunks(text[inner_start:inner_end]))
        pos = end
    rest = text[pos:].strip()
    if rest:
        out.append(Segment(part, rest, role))
    return out


def _completion_segments(prompt: str, tag: str) -> list[Segment]:
    """A completions prompt: the instructions before its first context block play the system prompt's part."""
    segments = _split_context(prompt, "question", "", tag)
    first_context = next((i for i, s in enumerate(segments) if s.part == "context"), None)
    if first_context:
        segments[:first_context] = [Segment("system", s.text, "", "prompt") for s in segments[:first_context]]
    return segments


def _documents(raw: Any) -> list[Segment]:
    if not isinstance(raw, list):
        return []
    out = []
    for d in raw:
        text = d if isinstance(d, str) else d.get("text") if isinstance(d, dict) else None
        if not isinstance(text, str):
            continue
        title = d.get("title") if isinstance(d, dict) else None
        text = f"{title}\n{text}" if isinstance(title, str) and title else text
        if text.strip():
            out.append(Segment("context", text.strip(), "", "documents"))
    return out


def _chat_segments(body: Mapping[str, Any], tag: str) -> tuple[tuple[Segment, ...], int]:
    messages = [m for m in body["messages"] if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    segments: list[Segment] = []
    tools = body.get("tools") or body.get("functions")
    if tools:
        segments.append(Segment("other", json.dumps(tools, ensure_ascii=False, sort_keys=True), "", "tools"))
    for i, m in enumerate(messages):
        role = str(m["role"]) if isinstance(m.get("role"), str) else ""
        if role in _SYSTEM_ROLES:
            part: Part = "system"
        elif role in _TOOL_ROLES:
            part = "context"
        elif i == last_user:
            part = "question"
            segments.extend(_documents(body.get("documents")))  # the gateway renders them before the question
        else:
            part = "history"
        content = m.get("content")
        text = content if isinstance(content, str) else text_of(content)
        if role in _TOOL_ROLES:
            segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(text))
        elif "<" not in text:  # the common case, without the call: no context block
            if text:
                segments.append(Segment(part, text, role))
        else:
            segments.extend(_split_context(text, part, role, tag))
        if len(m) <= 2:  # role and content only: no name, no tool calls
            continue
        name = m.get("name")
        if isinstance(name, str) and name:
            segments.append(Segment("other", name, role, "name"))
        for call in m.get("tool_calls") or ([{"function": m["function_call"]}] if m.get("function_call") else []):
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                segments.extend(Segment("history", str(fn.get(k, "")), role, "tool_call") for k in ("name", "arguments")
                                if fn.get(k))
    if last_user is None:
        segments.extend(_documents(body.get("documents")))
    return tuple(segments), TOKENS_PER_REPLY + TOKENS_PER_MESSAGE * len(messages)


def _ragtrim_segments(body: Mapping[str, Any]) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    history = body.get("history")
    if isinstance(history, list):
        for m in history:
            if isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"]:
                segments.append(Segment("history", m["content"], str(m.get("role", "user"))))
    for c in body["chunks"]:
        text = c if isinstance(c, str) else next((c[k] for k in ("text", "page_content", "content")
                                                  if isinstance(c, dict) and isinstance(c.get(k), str)), None)
        if text:
            segments.append(Segment("context", text, "", "chunks"))
    query = body.get("query") or ""
    if query:
        segments.append(Segment("question", query, "user"))
    return tuple(segments)
