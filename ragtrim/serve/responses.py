"""OpenAI-style responses of the gateway: the JSON codec, the error that becomes an error response, upstream errors
relayed or wrapped, and the ``x-ragtrim-*`` / ``x-ratelimit-*`` headers.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ragtrim._util.redact import redact
from ragtrim.errors import ServeError
from ragtrim.serve.limits import RateDecision, format_reset
from ragtrim.serve.render import Prepared
from ragtrim.serve.upstream import UpstreamError

try:  # orjson is several times faster on the hot path; the stdlib is the fallback
    import orjson

    def loads(raw: bytes | bytearray) -> Any:
        return orjson.loads(raw)

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)
except ImportError:  # pragma: no cover
    def loads(raw: bytes | bytearray) -> Any:
        return json.loads(raw)

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


class GatewayError(ServeError):
    """Becomes an OpenAI-style error response: ``{"error": {"message", "type", "param", "code"}}``, always with a
    ``code``. ``client_text``: the message may quote what the client sent (so the request log leaves it out
    unless ``log.log_text`` is on)."""

    def __init__(self, status: int, message: str, *, type_: str, code: str, param: str | None = None,
                 headers: dict[str, str] | None = None, outcome: str = "error", client_text: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.code = code
        self.param = param
        self.headers = headers or {}
        self.outcome = outcome
        self.client_text = client_text

    def response(self, request_id: str) -> Response:
        return error_response(self.status, str(self), type_=self.type, code=self.code, param=self.param,
                              headers={**self.headers, "x-request-id": request_id})


def error_response(status: int, message: str, *, type_: str, code: str, param: str | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    """An OpenAI-style JSON error response."""
    body = {"error": {"message": redact(message), "type": type_, "param": param, "code": code}}
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


def request_id(request: Request) -> str:
    """The client's ``x-request-id`` (at most 128 characters), else a new one."""
    given = request.headers.get("x-request-id", "")
    return given[:128] if given else "req-" + uuid.uuid4().hex[:20]


def trim_headers(p: Prepared) -> dict[str, str]:
    """What trimming did to the request, for the client."""
    h = {"x-ragtrim-tokens-before": str(p.prompt_tokens_before), "x-ragtrim-tokens-after": str(p.prompt_tokens),
         "x-ragtrim-tokens-saved": str(p.tokens_saved)}
    if p.documents:
        h["x-ragtrim-documents"] = f"{p.documents_kept}/{p.documents}"
    if p.history_turns_folded:
        h["x-ragtrim-history-folded"] = str(p.history_turns_folded)
    if p.recipe:
        h["x-ragtrim-recipe"] = p.recipe
    return h


def rate_headers(d: RateDecision) -> dict[str, str]:
    """OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` for a rate decision."""
    h: dict[str, str] = {}
    for name, s in (("requests", d.requests), ("tokens", d.tokens)):
        if s is not None:
            h[f"x-ratelimit-limit-{name}"] = str(s.limit)
            h[f"x-ratelimit-remaining-{name}"] = str(s.remaining)
            h[f"x-ratelimit-reset-{name}"] = format_reset(s.reset_s if d.admitted or math.isinf(s.retry_after_s)
                                                          else max(s.retry_after_s, 0.0))
    return h


def usage_of(body: bytes) -> dict[str, Any] | None:
    """The ``usage`` object of a completion (or of one streamed event's data), when it has one."""
    try:
        obj = loads(body)
    except ValueError:
        return None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    return usage if isinstance(usage, dict) else None


USAGE_TAIL_BYTES = 64 * 1024
"""How much of the end of a large answer is kept to find its ``usage`` (``usage_in_tail``)."""
_USAGE_KEY = b'"usage"'
_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


def usage_in_tail(tail: bytes) -> dict[str, Any] | None:
    """The top-level ``usage`` object of a JSON object of which ``tail`` holds the last bytes, or None.

    A large answer (a 2,048 x 1,536 embeddings answer is 29 MB) is never parsed whole: that would hold the event
    loop and the interpreter lock for the parse and build millions of Python floats. OpenAI, vLLM, llama.cpp's
    server, TGI and Ollama all put ``usage`` after ``data``, near the end. A ``"usage"`` found in the tail is the
    top-level one exactly when the members after it (parsed here, a few bytes) close the whole object: a key of a
    nested object is followed by that object's ``}`` before the end, and inside a JSON string the quotes of
    ``"usage"`` would be escaped."""
    end = len(tail.rstrip())
    if not end or tail[end - 1] != ord("}"):
        return None
    pos = tail.rfind(_USAGE_KEY)
    while pos >= 0:
        usage = _members_to_end(tail[pos:end - 1])
        if usage is not None:
            return usage
        pos = tail.rfind(_USAGE_KEY, 0, pos)
    return None


def _members_to_end(raw: bytes) -> dict[str, Any] | None:
    """``raw`` = ``"usage": {...}`` and then only ``, "key": value`` members: the usage object, else None."""
    try:
        text = raw.decode("utf-8")
        i = _skip(text, len(_USAGE_KEY))
        if text[i:i + 1] != ":":
            return None
        usage, i = _DECODER.raw_decode(text, _skip(text, i + 1))
        while True:
            i = _skip(text, i)
            if i == len(text):
                return usage if isinstance(usage, dict) else None
            if text[i] != ",":
                return None
            key, i = _DECODER.raw_decode(text, _skip(text, i + 1))
            i = _skip(text, i)
            if not isinstance(key, str) or text[i:i + 1] != ":":
                return None
            _, i = _DECODER.raw_decode(text, _skip(text, i + 1))
    except (ValueError, IndexError):
        return None


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


MAX_ERROR_BYTES = 64 * 1024
"""How much of an upstream's error answer is read and passed on (an error is a sentence, not megabytes)."""


def relay_error(status: int, body: bytes, headers: dict[str, str]) -> Response:
    """Pass an upstream error on; wrap it OpenAI-style when the upstream's body is not, and give it a ``code``
    (``upstream_<status>``) when the upstream gave none. The body goes through the one redaction function first:
    an upstream that quotes the key it was sent ("Incorrect API key provided: ...") must not hand the gateway's
    upstream key to a client."""
    text = body.decode("utf-8", "replace")
    clean = redact(text)
    if clean != text:
        body = clean.encode()
    try:
        obj = loads(body)
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            if isinstance(obj["error"].get("code"), str) and obj["error"]["code"]:
                return Response(body, status_code=status, media_type="application/json", headers=headers)
            obj["error"] = {**obj["error"], "code": upstream_code(status, obj["error"].get("code"))}
            return Response(dumps(obj), status_code=status, media_type="application/json", headers=headers)
        message = obj.get("message") or obj.get("detail") or obj.get("error") if isinstance(obj, dict) else obj
    except ValueError:
        message = body[:500].decode("utf-8", "replace")
    err = {"error": {"message": f"upstream answered {status}: {str(message)[:500]}", "type": "upstream_error",
                     "param": None, "code": upstream_code(status, None)}}
    return Response(dumps(err), status_code=status if status >= 400 else 502, media_type="application/json",
                    headers=headers)


def upstream_code(status: int, given: Any) -> str:
    """A string code for an upstream error: the upstream's own when it gave one (vLLM sends the status as an int),
    else ``upstream_<status>``."""
    if isinstance(given, str) and given:
        return given
    return f"upstream_{status}"


def upstream_failed(exc: UpstreamError) -> GatewayError:
    """The error response for an upstream that timed out, could not be reached or broke the protocol."""
    if exc.kind == "timeout":
        return GatewayError(504, f"upstream timed out: {exc}", type_="upstream_error", code="upstream_timeout",
                            outcome="upstream_error")
    if exc.kind == "connect":
        return GatewayError(502, f"upstream unreachable: {exc}", type_="upstream_error", code="upstream_unreachable",
                            outcome="upstream_error")
    return GatewayError(502, f"upstream broke the protocol: {exc}", type_="upstream_error", code="upstream_error",
                        outcome="upstream_error")
