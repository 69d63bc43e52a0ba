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

import gzip
import io
import json
import sys
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, cast

from ragtrim.audit.formats import (
    DETECT_CLASSIFIED,
    DETECT_LINES,
    READ_FORMATS,
    classify,
    classify_text,
    decide,
    parse_vllm_line,
)
from ragtrim.audit.segments import (
    PARTS,
    Part,
    Segment,
    Skip,
    chat_segments,
    completion_segments,
    describe,
    ragtrim_segments,
    templated_segments,
)
from ragtrim.errors import InputError

__all__ = ["PARTS", "AuditRequest", "EmptyLogError", "Part", "Segment", "SkipLog", "parse_request", "read_requests"]

Endpoint = Literal["chat", "messages", "completions", "ragtrim", "vllm_log"]
"""``messages``: an Anthropic Messages body; ``vllm_log``: a templated prompt from a vLLM server log."""
_CONVERSATION_KEYS = ("conversation_id", "session_id", "thread_id", "conversation")
_ID_KEYS = ("request_id", "custom_id", "id")
MAX_SKIP_EXAMPLES = 5


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


def parse_request(obj: Any, line: int, *, context_tag: str = "context", flavor: Endpoint = "chat") -> AuditRequest:
    """One log line (parsed JSON) as an ``AuditRequest``; raises InputError (with a ``reason``) when it is none.

    ``flavor`` names a ``messages`` body that carries no marker of either format (plain text turns): ``"messages"``
    in an Anthropic log, ``"chat"`` otherwise."""
    if not isinstance(obj, dict):
        raise Skip("not_a_request", f"a JSON {type(obj).__name__}, not an object")
    body, wrapper, pretrimmed = _unwrap(obj)
    rid = _first_str(wrapper, _ID_KEYS) or _first_str(body, _ID_KEYS) or f"line-{line}"
    conversation = _conversation(wrapper) or _conversation(body)
    model = body.get("model") if isinstance(body.get("model"), str) else None
    output = _output_tokens(wrapper, body)
    messages = body.get("messages")
    if messages is not None and "prompt" not in body and "chunks" not in body:
        if not isinstance(messages, list):
            raise Skip("bad_messages", f"'messages' is {describe(messages)}, not a list of messages")
        anthropic = flavor == "messages" or "system" in body or "anthropic_version" in body
        built = chat_segments(body, messages, context_tag)
        endpoint: Endpoint = "messages" if anthropic or built.anthropic else "chat"
        return AuditRequest(rid, line, endpoint, tuple(built.segments), built.fixed, conversation, model, output,
                            pretrimmed, tuple(built.images), tuple(built.uncounted))
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt)):
        texts = [prompt] if isinstance(prompt, str) else list(prompt)
        segments = tuple(s for t in texts for s in completion_segments(t, context_tag))
        return AuditRequest(rid, line, "completions", segments, 0, conversation, model, output, pretrimmed)
    if isinstance(body.get("chunks"), list) and isinstance(body.get("query", ""), str):
        return AuditRequest(rid, line, "ragtrim", ragtrim_segments(body), 0, conversation, model, output, pretrimmed)
    if "tokens" in obj and "outcome" in obj:
        raise Skip("log_without_text", "a gateway log line without text; set [log] log_request = true")
    kind = classify(obj)
    if kind is not None and kind not in READ_FORMATS:
        raise Skip("unread_format", f"a line of another format ({kind}), not a request the audit reads")
    raise Skip("not_a_request", "no 'messages', 'prompt' or 'chunks' (an OpenAI chat or completions body)")


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
    yield AuditRequest(rid, line_no, "vllm_log", templated_segments(prompt, context_tag), 0, None, None, max_tokens)


def _unwrap(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(body, wrapper, pretrimmed): the request body inside a batch line or a gateway log line."""
    for key in ("request", "body", "params", "received"):
        inner = obj.get(key)
        if isinstance(inner, dict):
            return inner, obj, False
        if isinstance(inner, str) and key == "request":
            raise Skip("request_not_json", "the logged request is not a JSON object (the gateway answered 400)")
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

