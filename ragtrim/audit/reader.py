"""Read a request log as a stream of ``AuditRequest``: each prompt cut into parts (system, history, context,
question, other), in the order the model sees them. Plain or gzip JSONL, one request at a time.

Shapes read, one JSON object a line: an OpenAI chat body (``messages``, optional ``documents``), an Anthropic Messages
body (top-level ``system``; text, document, search_result, tool_use, tool_result, thinking and image blocks), a
completions body (``prompt``), ragtrim's own request (``query``, ``chunks``, ``history``), and any of them wrapped: an
OpenAI/vLLM batch line (``{"custom_id", "method", "url", "body"}``), an Anthropic batch line (``{"custom_id",
"params"}``), the gateway's request log (``request`` with ``log_request = true``, else ``forwarded``) or
``{"request": ...}``. Also a vLLM server log's request lines (``ragtrim.audit.formats``). The format is told from the
first lines; a format the audit does not read stops it with an error that names the format. A line that is no
request, or a malformed one, is skipped and counted with its reason and line number.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import sys
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple, cast

from ragtrim.audit.formats import (
    DETECT_CLASSIFIED,
    DETECT_LINES,
    READ_FORMATS,
    classify,
    classify_text,
    decide,
    parse_vllm_line,
    template_turns,
)
from ragtrim.errors import InputError
from ragtrim.openai_text import TOKENS_PER_MESSAGE, TOKENS_PER_REPLY, split_chunks

Part = Literal["system", "history", "context", "question", "other"]
PARTS: tuple[Part, ...] = ("system", "history", "context", "question", "other")
"""Every prompt token belongs to exactly one part. ``other``: message framing (OpenAI's 4 tokens a message and 3 a
reply, as the gateway counts), tool definitions and function names."""

Endpoint = Literal["chat", "messages", "completions", "ragtrim", "vllm_log"]
"""``messages``: an Anthropic Messages body; ``vllm_log``: a templated prompt from a vLLM server log."""
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
    ``images`` holds the part of each image (their tokens depend on the model: ``AuditConfig.image_tokens``);
    ``uncounted`` names the blocks whose tokens cannot be counted from the log (a base64 PDF, audio, a file id).
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
    images: tuple[Part, ...] = ()
    uncounted: tuple[str, ...] = ()

    @property
    def question(self) -> str:
        return "\n".join(s.text for s in self.segments if s.part == "question")

    def texts(self, part: Part) -> list[str]:
        return [s.text for s in self.segments if s.part == part]


@dataclass(slots=True)
class SkipLog:
    """Lines that were not requests: counts by reason, and the first few line numbers (nothing is skipped silently).
    Also how the reading went: the log's format, the lines read, and where reading stopped when the file ends early
    (a truncated gzip stream)."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)
    log_format: str = "unknown"
    formats_seen: dict[str, int] = field(default_factory=dict)
    lines_read: int = 0
    stopped_after_line: int | None = None
    stop_reason: str | None = None

    def add(self, line: int, reason: str, detail: str) -> None:
        self.counts[reason] += 1
        if len(self.examples) < MAX_SKIP_EXAMPLES:
            self.examples.append({"line": line, "reason": reason, "detail": detail[:200]})

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "by_reason": dict(sorted(self.counts.items())), "examples": list(self.examples)}


class EmptyLogError(InputError):
    """The log holds no request the audit reads (an empty file, an empty gzip stream, or only skipped lines): there
    is nothing to report."""


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
    """Stream the requests of a log; lines that are not requests go to ``skipped`` (blank lines are ignored).

    The format is decided from the first lines (``ragtrim.audit.formats.decide``): a refused format raises
    ``UnsupportedLogFormat`` before any request is yielded. When the stream ends early (a truncated or corrupt gzip
    file), reading stops there: ``skipped.stopped_after_line`` and ``stop_reason`` say where and why, and the
    requests read so far stand."""
    loads = _loads()
    where = str(path)
    with open_log(path) as stream:
        lines = _lines(stream, skipped, where)
        head: list[tuple[int, bytes, Any]] = []  # (line number, raw line, parsed JSON or _NOT_JSON)
        kinds: list[str | None] = []
        for line_no, line in lines:
            obj = _parse_json(loads, line, line_no, where)
            head.append((line_no, line, obj))
            kinds.append(classify_text(line) if obj is _NOT_JSON else classify(obj))
            if len(head) >= DETECT_LINES or sum(k is not None for k in kinds) >= DETECT_CLASSIFIED:
                break
        log_format = decide(kinds, where)
        skipped.log_format = log_format
        skipped.formats_seen = dict(Counter(k for k in kinds if k is not None).most_common())
        if log_format == "vllm_server_log":
            for line_no, line, _ in head:
                yield from _vllm_request(line, line_no, skipped, context_tag)
            for line_no, line in lines:
                yield from _vllm_request(line, line_no, skipped, context_tag)
            return
        flavor: Endpoint = "messages" if log_format in ("anthropic_messages", "anthropic_batch") else "chat"
        for line_no, line, obj in head:
            yield from _request(obj, line, line_no, skipped, context_tag, flavor)
        for line_no, line in lines:
            yield from _request(_parse_json(loads, line, line_no, where), line, line_no, skipped, context_tag, flavor)


_NOT_JSON = object()


def _lines(stream: Any, skipped: SkipLog, where: str) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the non-blank lines; a stream that ends early stops the iteration and is recorded."""
    line_no = 0
    it = iter(stream)
    while True:
        try:
            line = next(it, b"")
        except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt gzip stream
            skipped.stopped_after_line = line_no
            skipped.stop_reason = f"{type(exc).__name__}: {exc}"
            return
        if not line:
            return
        line_no += 1
        skipped.lines_read = line_no
        if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark
            line = line[3:]
        if line.strip():
            yield line_no, line


def _parse_json(loads: Any, line: bytes, line_no: int, where: str) -> Any:
    try:
        return loads(line)
    except RecursionError:
        return _NOT_JSON
    except ValueError:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise InputError(f"request log {where!r} is not UTF-8 at line {line_no}: {bad.reason}; "
                             "convert it first, e.g. iconv -f latin1 -t utf-8") from None
        return _NOT_JSON


def _request(obj: Any, line: bytes, line_no: int, skipped: SkipLog, context_tag: str,
             flavor: Endpoint) -> Iterator[AuditRequest]:
    if obj is _NOT_JSON:
        skipped.add(line_no, "not_json", _json_error(line))
        return
    try:
        yield parse_request(obj, line_no, context_tag=context_tag, flavor=flavor)
    except InputError as exc:
        skipped.add(line_no, getattr(exc, "reason", "not_a_request"), str(exc))


def _json_error(line: bytes) -> str:
    try:
        json.loads(line)
    except ValueError as exc:
        return str(exc)
    return "not JSON"


class _Skip(InputError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def parse_request(obj: Any, line: int, *, context_tag: str = "context", flavor: Endpoint = "chat") -> AuditRequest:
    """One log line (parsed JSON) as an ``AuditRequest``; raises InputError (with a ``reason``) when it is none.

    ``flavor`` names a ``messages`` body that carries no marker of either format (plain text turns): ``"messages"``
    in an Anthropic log, ``"chat"`` otherwise."""
    if not isinstance(obj, dict):
        raise _Skip("not_a_request", f"a JSON {type(obj).__name__}, not an object")
    body, wrapper, pretrimmed = _unwrap(obj)
    rid = _first_str(wrapper, _ID_KEYS) or _first_str(body, _ID_KEYS) or f"line-{line}"
    conversation = _conversation(wrapper) or _conversation(body)
    model = body.get("model") if isinstance(body.get("model"), str) else None
    output = _output_tokens(wrapper, body)
    messages = body.get("messages")
    if messages is not None and "prompt" not in body and "chunks" not in body:
        if not isinstance(messages, list):
            raise _Skip("bad_messages", f"'messages' is {_kind(messages)}, not a list of messages")
        anthropic = flavor == "messages" or "system" in body or "anthropic_version" in body
        built = _chat_segments(body, messages, context_tag)
        endpoint: Endpoint = "messages" if anthropic or built.anthropic else "chat"
        return AuditRequest(rid, line, endpoint, tuple(built.segments), built.fixed, conversation, model, output,
                            pretrimmed, tuple(built.images), tuple(built.uncounted))
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt)):
        texts = [prompt] if isinstance(prompt, str) else list(prompt)
        segments = tuple(s for t in texts for s in _completion_segments(t, context_tag))
        return AuditRequest(rid, line, "completions", segments, 0, conversation, model, output, pretrimmed)
    if isinstance(body.get("chunks"), list) and isinstance(body.get("query", ""), str):
        return AuditRequest(rid, line, "ragtrim", _ragtrim_segments(body), 0, conversation, model, output, pretrimmed)
    if "tokens" in obj and "outcome" in obj:
        raise _Skip("log_without_text", "a gateway log line without text; set [log] log_request = true")
    kind = classify(obj)
    if kind is not None and kind not in READ_FORMATS:
        raise _Skip("unread_format", f"a line of another format ({kind}), not a request the audit reads")
    raise _Skip("not_a_request", "no 'messages', 'prompt' or 'chunks' (an OpenAI chat or completions body)")


def _kind(value: Any) -> str:
    """How a JSON value reads in an error: ``a number (42)``, ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return f"an object (keys {sorted(value)[:5]})"
    return f"a list of {len(value)}"


def _vllm_request(line: bytes, line_no: int, skipped: SkipLog, context_tag: str) -> Iterator[AuditRequest]:
    """One line of a vLLM server log: a request when it carries the logged prompt, else a counted skip."""
    try:
        text = line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        skipped.add(line_no, "not_utf8", "a log line that is not UTF-8")
        return
    parsed = parse_vllm_line(text)
    if isinstance(parsed, str):
        skipped.add(line_no, parsed, text[:200])
        return
    rid, prompt, max_tokens = parsed
    if prompt is None:
        skipped.add(line_no, "vllm_request_without_prompt", text[:200])
        return
    yield AuditRequest(rid, line_no, "vllm_log", _templated_segments(prompt, context_tag), 0, None, None, max_tokens)


def _templated_segments(prompt: str, tag: str) -> tuple[Segment, ...]:
    """A templated prompt cut into parts along its chat template's turns; the template's own text (special tokens,
    role headers) is ``other``. A prompt in no known template reads as a completions prompt."""
    name, pieces = template_turns(prompt)
    if name == "none":
        return tuple(_completion_segments(prompt, tag))
    last_user = max((i for i, (role, text) in enumerate(pieces) if role == "user" and text.strip()), default=None)
    segments: list[Segment] = []
    for i, (role, text) in enumerate(pieces):
        if role is None:
            segments.append(Segment("other", text, "", "template"))
            continue
        part: Part = ("system" if role in _SYSTEM_ROLES else "context" if role in _TOOL_ROLES
                      else "question" if i == last_user else "history")
        if role in _TOOL_ROLES:
            segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(text))
        else:
            segments.extend(_split_context(text, part, role, tag))
    return tuple(segments)


def _unwrap(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(body, wrapper, pretrimmed): the request body inside a batch line or a gateway log line."""
    for key in ("request", "body", "params", "received"):
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
    """The body's ``documents`` (strings or ``{"text", "title"}`` objects, as the gateway and vLLM's chat templates
    take them); any other entry makes the request malformed."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _Skip("bad_documents", f"'documents' is {_kind(raw)}, not a list")
    out = []
    for i, d in enumerate(raw, 1):
        text = d if isinstance(d, str) else d.get("text") if isinstance(d, dict) else None
        if not isinstance(text, str):
            raise _Skip("bad_documents", f"document {i} is {_kind(d)}; give a string or an object with 'text'")
        title = d.get("title") if isinstance(d, dict) else None
        text = f"{title}\n{text}" if isinstance(title, str) and title else text
        if text.strip():
            out.append(Segment("context", text.strip(), "", "documents"))
    return out


@dataclass(slots=True)
class _Built:
    segments: list[Segment] = field(default_factory=list)
    fixed: int = 0
    images: list[Part] = field(default_factory=list)
    uncounted: list[str] = field(default_factory=list)
    anthropic: bool = False


_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
_IMAGE_BLOCKS = frozenset({"image", "image_url", "input_image"})


def _check_messages(messages: Sequence[Any]) -> None:
    """Raise ``_Skip`` for a message list a model server would reject: empty, a message without a role, content
    that is neither text nor a list of typed parts."""
    if not messages:
        raise _Skip("empty_messages", "'messages' is an empty list")
    for i, m in enumerate(messages, 1):
        if not isinstance(m, dict):
            raise _Skip("bad_message", f"message {i} is {_kind(m)}, not an object with 'role' and 'content'")
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise _Skip("bad_message", f"message {i} has no 'role'" if role is None else
                        f"message {i}: 'role' is {_kind(role)}, not a string")
        content = m.get("content")
        if isinstance(content, str):
            continue
        if content is None:
            if role != "assistant":  # an assistant turn may carry only tool calls
                raise _Skip("bad_content", f"message {i} ({role}) has no content")
        elif isinstance(content, list):
            for j, block in enumerate(content, 1):
                if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                    raise _Skip("bad_content", f"message {i} ({role}): part {j} is {_kind(block)}, not an object "
                                               "with a 'type'")
                if block["type"] in _TEXT_BLOCKS and not isinstance(block.get("text"), str):
                    raise _Skip("bad_content", f"message {i} ({role}): text part {j} has no text string")
        else:
            raise _Skip("bad_content", f"message {i} ({role}): content is {_kind(content)}; it must be a string or "
                                       "a list of parts")


def _has_text(m: Mapping[str, Any]) -> bool:
    content = m.get("content")
    if isinstance(content, str):
        return bool(content)
    return isinstance(content, list) and any(b.get("type") in _TEXT_BLOCKS for b in content)


def _chat_segments(body: Mapping[str, Any], messages: list[Any], tag: str) -> _Built:
    """Segments of an OpenAI chat or Anthropic Messages body: the two formats share ``messages`` and differ in
    their block types (``text``, ``image_url`` vs ``document``, ``tool_use``, ``tool_result``, ``image``) and in
    Anthropic's top-level ``system``, so one walk reads both."""
    _check_messages(messages)
    out = _Built()
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user" and _has_text(m)), default=None)
    if last_user is None:
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    documents = _documents(body.get("documents"))
    tools = body.get("tools") or body.get("functions")
    if tools:
        out.segments.append(Segment("other", json.dumps(tools, ensure_ascii=False, sort_keys=True), "", "tools"))
    system = body.get("system")
    framed = len(messages)
    if system is not None:  # Anthropic: the system prompt is a top-level string or list of text blocks
        if isinstance(system, str):
            system_text = system
        elif isinstance(system, list) and all(isinstance(b, dict) and isinstance(b.get("text"), str) for b in system):
            system_text = "\n".join(b["text"] for b in system)
        else:
            raise _Skip("bad_content", f"'system' is {_kind(system)}; it must be a string or a list of text blocks")
        out.anthropic = True
        out.segments.extend(_text_segments(system_text, "system", "system", tag))
        framed += 1
    for i, m in enumerate(messages):
        role = m["role"]
        if role in _SYSTEM_ROLES:
            part: Part = "system"
        elif role in _TOOL_ROLES:
            part = "context"
        elif i == last_user:
            part = "question"
            out.segments.extend(documents)  # the gateway renders them before the question
        else:
            part = "history"
        content = m.get("content")
        if isinstance(content, list):
            _content_blocks(content, part, role, tag, out)
        elif isinstance(content, str):
            if role in _TOOL_ROLES:
                out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(content))
            else:
                out.segments.extend(_text_segments(content, part, role, tag))
        if len(m) <= 2:  # role and content only: no name, no tool calls
            continue
        name = m.get("name")
        if isinstance(name, str) and name:
            out.segments.append(Segment("other", name, role, "name"))
        calls = m.get("tool_calls") or ([{"function": m["function_call"]}] if m.get("function_call") else [])
        if not isinstance(calls, list):
            raise _Skip("bad_message", f"message {i + 1}: 'tool_calls' is {_kind(calls)}, not a list")
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                out.segments.extend(Segment("history", str(fn.get(k, "")), role, "tool_call")
                                    for k in ("name", "arguments") if fn.get(k))
    if last_user is None:
        out.segments.extend(documents)
    out.fixed = TOKENS_PER_REPLY + TOKENS_PER_MESSAGE * framed
    return out


def _text_segments(text: str, part: Part, role: str, tag: str) -> list[Segment]:
    if "<" not in text:  # the common case, without the call: no context block
        return [Segment(part, text, role)] if text else []
    return _split_context(text, part, role, tag)


def _content_blocks(blocks: list[dict[str, Any]], part: Part, role: str, tag: str, out: _Built) -> None:
    """A message's blocks in order. Runs of text blocks are joined with newlines (images inside a run do not break
    it, as OpenAI's text parts were always read); documents, search results and tool results are context, tool
    calls and thinking are history."""
    run: list[str] = []

    def flush() -> None:
        if run:
            text = "\n".join(run)
            if role in _TOOL_ROLES:
                out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(text))
            else:
                out.segments.extend(_text_segments(text, part, role, tag))
            run.clear()

    for block in blocks:
        kind = block["type"]
        if kind in _TEXT_BLOCKS:
            run.append(block["text"])
        elif kind == "refusal" and isinstance(block.get("refusal"), str):
            run.append(block["refusal"])
        elif kind in _IMAGE_BLOCKS:
            out.images.append(part)
            out.anthropic |= kind == "image"
        elif kind in ("document", "search_result"):
            flush()
            out.anthropic = True
            _document_block(block, role, out)
        elif kind in ("tool_use", "server_tool_use"):
            flush()
            out.anthropic = True
            out.segments.extend(Segment("history", t, role, "tool_call") for t in (
                str(block.get("name") or ""), json.dumps(block.get("input", {}), ensure_ascii=False)) if t)
        elif kind == "tool_result" or kind.endswith("_tool_result"):
            flush()
            out.anthropic = True
            _tool_result_block(block, role, tag, out)
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            flush()
            out.anthropic = True
            out.segments.append(Segment("history", block["thinking"], role, "thinking"))
        else:  # redacted thinking, audio, files: no text to count
            out.uncounted.append(kind)
    flush()


def _document_block(block: Mapping[str, Any], role: str, out: _Built) -> None:
    """An Anthropic ``document`` (source text, or content blocks) or ``search_result``: one context piece, its
    title and context lines first. A PDF, URL or file source has no text in the log: counted as uncounted."""
    head = [str(block[k]) for k in ("title", "context") if isinstance(block.get(k), str) and block[k]]
    source = block.get("source")
    content = block.get("content") if block["type"] == "search_result" else None
    body: list[str] = []
    if isinstance(source, dict) and source.get("type") == "text" and isinstance(source.get("data"), str):
        body.append(source["data"])
    elif isinstance(source, dict) and source.get("type") == "content":
        content = source.get("content")
    elif block["type"] == "document":
        kind = source.get("type") if isinstance(source, dict) else None
        media = source.get("media_type") if isinstance(source, dict) else None
        out.uncounted.append(f"document:{media or kind or 'unknown'}")
    if isinstance(content, str):
        body.append(content)
    elif isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                body.append(b["text"])
            elif isinstance(b, dict) and b.get("type") == "image":
                out.images.append("context")
    text = "\n".join(head + body).strip()
    if text:
        out.segments.append(Segment("context", text, role, "document"))


def _tool_result_block(block: Mapping[str, Any], role: str, tag: str, out: _Built) -> None:
    """An Anthropic ``tool_result``: its content (a string or text, image and document blocks) is context, cut
    into chunks at blank lines as OpenAI's tool messages are."""
    content = block.get("content")
    if isinstance(content, str):
        out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(content))
        return
    if not isinstance(content, list):
        return
    for b in content:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(b["text"]))
        elif b.get("type") == "image":
            out.images.append("context")
        elif b.get("type") in ("document", "search_result"):
            _document_block(b, role, out)
        else:
            out.uncounted.append(str(b.get("type")))


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
