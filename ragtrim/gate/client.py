"""Sending one request to an arm over HTTP (httpx, the ``serve`` extra): streamed, so the first answer text times
the TTFT; retried with exponential backoff on connection errors, timeouts and 408/409/425/429/5xx answers; every
failure returned as a record, never raised. Also the readiness check that runs before any timed request.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ragtrim.errors import InputError, RagtrimError
from ragtrim.gate.arms import Arm, scrub

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_ERROR_CHARS = 300


class ArmNotReady(InputError):
    """An arm's server did not answer ``GET /models`` before the readiness timeout: no request was timed."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One request's outcome: the text on success, else the error's kind and message (secrets scrubbed)."""

    ok: bool
    text: str | None = None
    error_kind: str | None = None
    error: str | None = None
    status: int | None = None
    attempts: int = 1
    ttft_ms: float | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_source: str | None = None
    gateway_before: int | None = None
    gateway_after: int | None = None


class AttemptFailed(RagtrimError):
    """One try at an arm failed (kind, status, whether to retry); the runner counts it, it never reaches a caller."""

    def __init__(self, kind: str, message: str, status: int | None = None, *, retry: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry = retry


def _headers(api_key: str | None) -> dict[str, str]:
    h = {"content-type": "application/json", "accept": "text/event-stream, application/json"}
    if api_key:
        h["authorization"] = f"Bearer {api_key}"
    return h


def endpoint_url(arm: Arm) -> str:
    return arm.url.rstrip("/") + ("/chat/completions" if arm.endpoint == "chat" else "/completions")


def _piece(choice: Mapping[str, Any], chat: bool) -> str:
    if chat:
        delta = choice.get("delta") or choice.get("message") or {}
        content = delta.get("content") if isinstance(delta, Mapping) else None
        return content if isinstance(content, str) else ""
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _error_message(raw: bytes) -> str:
    try:
        obj = json.loads(raw)
        err = obj.get("error") if isinstance(obj, dict) else None
        msg = err.get("message") if isinstance(err, dict) else (err if isinstance(err, str) else obj.get("detail"))
        if isinstance(msg, str):
            return msg
    except (ValueError, AttributeError):
        pass
    return raw.decode("utf-8", "replace")


async def _attempt(client: Any, arm: Arm, body: Mapping[str, Any], api_key: str | None) -> Reply:
    """One try: stream the answer, time the first text and the end, read usage; raise ``AttemptFailed`` on error."""
    import httpx

    chat = arm.endpoint == "chat"
    payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    ttft: float | None = None
    pieces: list[str] = []
    events = 0
    usage: Mapping[str, Any] | None = None
    finished = False
    try:
        async with asyncio.timeout(arm.timeout_s):
            async with client.stream("POST", endpoint_url(arm), json=payload, headers=_headers(api_key)) as resp:
                gateway = (_int_header(resp.headers, "x-ragtrim-tokens-before"),
                           _int_header(resp.headers, "x-ragtrim-tokens-after"))
                if resp.status_code >= 400:
                    raw = await resp.aread()
                    raise AttemptFailed(f"http_{resp.status_code}", _error_message(raw), resp.status_code,
                                   retry=resp.status_code in RETRY_STATUSES)
                if resp.headers.get("content-type", "").startswith("application/json"):
                    obj = json.loads(await resp.aread())  # a server that does not stream
                    ttft = (time.perf_counter() - started) * 1000
                    choice = (obj.get("choices") or [{}])[0]
                    pieces.append(_piece(choice, chat))
                    usage = obj.get("usage")
                    finished = True
                else:
                    async for line in resp.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            finished = True
                            break
                        chunk = json.loads(data)
                        if isinstance(chunk, dict) and chunk.get("error"):
                            raise AttemptFailed("stream_error", _error_message(data.encode()), retry=True)
                        if isinstance(chunk, dict) and chunk.get("usage"):
                            usage = chunk["usage"]
                        for choice in (chunk.get("choices") or []) if isinstance(chunk, dict) else []:
                            piece = _piece(choice, chat)
                            if piece:
                                events += 1
                                if ttft is None:
                                    ttft = (time.perf_counter() - started) * 1000
                                pieces.append(piece)
                            if choice.get("finish_reason"):
                                finished = True
    except TimeoutError:
        raise AttemptFailed("timeout", f"no complete answer within {arm.timeout_s:g} s", retry=True) from None
    except httpx.TimeoutException as exc:
        raise AttemptFailed("timeout", f"{type(exc).__name__}: {exc}", retry=True) from None
    except httpx.ConnectError as exc:
        raise AttemptFailed("connect", f"cannot connect: {exc}", retry=True) from None
    except (httpx.TransportError, httpx.StreamError) as exc:  # the stream broke off
        raise AttemptFailed("stream", f"{type(exc).__name__}: {exc}", retry=True) from None
    except (ValueError, AttributeError, TypeError) as exc:
        raise AttemptFailed("bad_response", f"the server's answer is not an OpenAI response: {exc}", retry=False) from None
    if not finished:
        raise AttemptFailed("stream", "the stream ended before the answer was complete", retry=True)
    latency = (time.perf_counter() - started) * 1000
    text = "".join(pieces)
    prompt_tokens = completion_tokens = None
    source = None
    if isinstance(usage, Mapping) and isinstance(usage.get("completion_tokens"), int):
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None
        completion_tokens, source = usage["completion_tokens"], "usage"
    elif events:
        completion_tokens, source = events, "events"
    return Reply(ok=True, text=text, ttft_ms=ttft if ttft is not None else latency, latency_ms=latency,
                 prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, usage_source=source,
                 gateway_before=gateway[0], gateway_after=gateway[1])


async def send(client: Any, arm: Arm, body: Mapping[str, Any], *, api_key: str | None = None, retries: int = 2,
               backoff_s: float = 0.5, secrets: Sequence[str] = ()) -> Reply:
    """Send ``body`` to ``arm`` up to ``1 + retries`` times (waiting ``backoff_s``, then twice that, ... between
    tries that may succeed on a retry); the last failure is returned as a ``Reply`` with ``ok=False``."""
    attempt = 0
    while True:
        attempt += 1
        try:
            reply = await _attempt(client, arm, body, api_key)
            return replace(reply, attempts=attempt)
        except AttemptFailed as failure:
            if failure.retry and attempt <= retries:
                await asyncio.sleep(backoff_s * 2 ** (attempt - 1))
                continue
            message = scrub(" ".join(str(failure).split()), secrets)[:MAX_ERROR_CHARS]
            return Reply(ok=False, error_kind=failure.kind, error=message, status=failure.status, attempts=attempt)


async def wait_ready(client: Any, arm: Arm, *, api_key: str | None, timeout_s: float,
                     secrets: Sequence[str] = ()) -> None:
    """Poll ``GET {url}/models`` until it answers below 500 or ``timeout_s`` passes (``ArmNotReady``)."""
    import httpx

    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            resp = await client.get(arm.url.rstrip("/") + "/models", headers=_headers(api_key), timeout=5.0)
            if resp.status_code < 500:
                if resp.status_code in (401, 403):
                    raise ArmNotReady(f"arm {arm.name!r} at {arm.shown_url} refused the key ({resp.status_code}); "
                                      f"set the variable its api_key_env names")
                return
            last = f"status {resp.status_code}"
        except httpx.HTTPError as exc:
            last = scrub(f"{type(exc).__name__}: {exc}", secrets)
        if time.monotonic() >= deadline:
            raise ArmNotReady(f"arm {arm.name!r} at {arm.shown_url} did not answer GET /models within "
                              f"{timeout_s:g} s ({last}); start its server, fix its url, or raise --ready-timeout")
        await asyncio.sleep(min(0.5, max(0.05, deadline - time.monotonic())))
