"""The gateway: authenticate, trim, check limits, queue for a slot, relay to the upstream, account for usage.

``create_app(config)`` returns a Starlette app; ``Gateway`` holds the per-process state (store, gates, client).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ragtrim.errors import RagtrimError
from ragtrim.serve.config import GatewayConfig, KeyConfig
from ragtrim.serve.limits import (
    FairGate,
    Gate,
    QueueFull,
    QueueTimeout,
    RateDecision,
    SharedGate,
    format_reset,
)
from ragtrim.serve.log import RequestLog
from ragtrim.serve.metrics import GatewayMetrics
from ragtrim.serve.render import Prepared, RequestError, prepare_chat, prepare_completion
from ragtrim.serve.state import RedisRateStore, RedisSlots, StateUnavailable, make_store
from ragtrim.serve.upstream import Upstream, UpstreamError, UpstreamResponse
from ragtrim.tokens import TokenCounter, get_counter

try:  # orjson is several times faster on the hot path; the stdlib is the fallback
    import orjson

    def _loads(raw: bytes) -> Any:
        return orjson.loads(raw)

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)
except ImportError:  # pragma: no cover
    def _loads(raw: bytes) -> Any:
        return json.loads(raw)

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


ANONYMOUS = KeyConfig(key="", user="anonymous", org="default")


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    org: str
    key_id: str  # a hash of the API key: what the rate store and the log see, never the key itself
    rpm: int | None
    tpm: int | None
    concurrency: int | None = None


@dataclass(slots=True)
class Record:
    """What one request did; fills in as the request moves, then goes to metrics and the log."""

    request_id: str
    endpoint: str
    started: float
    identity: Identity | None = None
    outcome: str = "ok"
    status: int = 200
    prepared: Prepared | None = None
    upstream: str = ""
    queue_ms: float = 0.0
    upstream_ttft_ms: float | None = None
    completion_tokens: int | None = None
    charged_tokens: int = 0
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ClientGone(Exception):
    """The client disconnected before the response started."""


class GatewayError(Exception):
    """Becomes an OpenAI-style error response."""

    def __init__(self, status: int, message: str, *, type_: str, code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None, outcome: str = "error") -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.code = code
        self.param = param
        self.headers = headers or {}
        self.outcome = outcome

    def response(self, request_id: str) -> Response:
        body = {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}
        return Response(_dumps(body), status_code=self.status, media_type="application/json",
                        headers={**self.headers, "x-request-id": request_id})


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16] if key else "anonymous"


class Gateway:
    def __init__(self, config: GatewayConfig, *, counter: TokenCounter | None = None) -> None:
        self.config = config
        self.counter = counter if counter is not None else get_counter(config.upstream.tokenizer)
        self.metrics = GatewayMetrics()
        lim = config.limits
        self.store = make_store(lim.state, window_s=lim.window_s, timeout_s=lim.state_timeout_s)
        self.upstream = Upstream(config.upstream)
        self.log = (RequestLog(config.log.path, log_text=config.log.log_text, log_request=config.log.log_request)
                    if config.log.path else None)
        self.identities = {
            k: Identity(user=kc.user, org=kc.org, key_id=key_id(k), rpm=kc.rpm, tpm=kc.tpm,
                        concurrency=kc.concurrency)
            for k, kc in config.keys.items()
        }
        # With Redis state, concurrency slots are shared by replicas too (leases in Redis).
        self.slots = RedisSlots(self.store) if isinstance(self.store, RedisRateStore) else None
        self.org_gates: dict[str, Gate | None] = {}
        self.key_gates: dict[str, Gate] = {}
        self.long_gate = (self._gate(FairGate(name="long-request lane", capacity=lim.long_concurrency,
                                              max_queued=lim.max_queued, max_queued_per_user=lim.max_queued_per_user),
                                     "long")
                          if lim.long_request_tokens is not None else None)

    def _gate(self, local: FairGate, shared_key: str) -> Gate:
        if self.slots is None:
            return local
        return SharedGate(local, self.slots, key=shared_key,
                          lease_ms=int((self.config.upstream.timeout_s + 60) * 1000),
                          fail_open=self.config.limits.fail_open, on_state_error=self.metrics.state_errors.inc)

    # -- lifecycle --------------------------------------------------------------------------------------------------
    async def aclose(self) -> None:
        await self.upstream.close()
        await self.store.close()
        if self.log is not None:
            self.log.close()

    def app(self) -> Starlette:
        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            try:
                yield
            finally:
                await self.aclose()

        return Starlette(routes=[
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/metrics", self.metrics_endpoint, methods=["GET"]),
        ], lifespan=lifespan)

    # -- small endpoints --------------------------------------------------------------------------------------------
    async def healthz(self, request: Request) -> Response:
        ok = await self.store.ping()
        state = self.config.limits.state
        body = {"status": "ok" if ok or self.config.limits.fail_open else "degraded",
                "state": "memory" if state == "memory" else ("redis ok" if ok else "redis unreachable")}
        return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)

    async def metrics_endpoint(self, request: Request) -> Response:
        for org, gate in self.org_gates.items():
            if gate is not None:
                self.metrics.queued.labels(org).set(gate.queued)
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def models(self, request: Request) -> Response:
        rid = _request_id(request)
        try:
            self.authenticate(request)
        except GatewayError as exc:
            return exc.response(rid)
        try:
            resp = await self.upstream.request("GET", "/models")
        except UpstreamError as exc:
            if not self.upstream.has_fallback:
                return _upstream_failed(exc).response(rid)
            try:
                resp = await self.upstream.request("GET", "/models", fallback=True)
            except UpstreamError as exc2:
                return _upstream_failed(exc2).response(rid)
        try:
            body = await resp.read()
        except UpstreamError as exc:
            return _upstream_failed(exc).response(rid)
        return Response(body, status_code=resp.status, media_type=resp.content_type,
                        headers={"x-request-id": rid})

    # -- auth -------------------------------------------------------------------------------------------------------
    def authenticate(self, request: Request) -> Identity:
        if self.config.open_mode:
            return Identity(user="anonymous", org="default", key_id="anonymous", rpm=None, tpm=None)
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if not header:
            raise GatewayError(401, "missing API key: send 'Authorization: Bearer <key>'",
                               type_="invalid_request_error", code="missing_api_key", outcome="unauthorized")
        identity = self.identities.get(token.strip()) if scheme.lower() == "bearer" else None
        if identity is None:
            raise GatewayError(401, "invalid API key", type_="invalid_request_error", code="invalid_api_key",
                               outcome="unauthorized")
        return identity

    # -- completions ------------------------------------------------------------------------------------------------
    async def chat(self, request: Request) -> Response:
        return await self._handle(request, "chat", "/chat/completions", prepare_chat)

    async def completions(self, request: Request) -> Response:
        return await self._handle(request, "completions", "/completions", prepare_completion)

    async def _handle(self, request: Request, endpoint: str, path: str,
                      prepare: Callable[[Any, GatewayConfig, TokenCounter], Prepared]) -> Response:
        rec = Record(request_id=_request_id(request), endpoint=endpoint, started=time.perf_counter())
        try:
            rec.identity = self.authenticate(request)
            raw = await request.body()
            if self.log is not None and self.log.log_request:
                rec.extra["request_body"] = raw
            prepared = await self._prepare(raw, prepare)
            rec.prepared = prepared
            self._check_size(prepared)
            response = await _until_disconnect(request.receive, self._admit_and_send(rec, path, prepared))
        except GatewayError as exc:
            rec.outcome, rec.status, rec.error = exc.outcome, exc.status, str(exc)
            self._finish(rec)
            return exc.response(rec.request_id)
        except ClientGone:
            rec.outcome, rec.status = "client_closed", 499
            self._finish(rec)
            return Response(status_code=499)
        if not isinstance(response, _RelayStream):
            self._finish(rec)
        return response

    async def _prepare(self, raw: bytes, prepare: Callable[[Any, GatewayConfig, TokenCounter], Prepared]) -> Prepared:
        try:
            body = _loads(raw)
        except ValueError:
            raise GatewayError(400, "the request body is not valid JSON", type_="invalid_request_error",
                               code="invalid_json", outcome="bad_request") from None
        tag = self.config.trim.context_tag.encode()
        heavy = b'"documents"' in raw or b"<" + tag in raw.lower() or self.config.trim.history_turns > 0
        try:
            if heavy:  # trimming is CPU work: keep it off the event loop
                prepared = await run_in_threadpool(prepare, body, self.config, self.counter)
            else:
                prepared = prepare(body, self.config, self.counter)
        except RequestError as exc:
            raise GatewayError(400, str(exc), type_="invalid_request_error", param=exc.param, code=exc.code,
                               outcome="bad_request") from None
        except RagtrimError as exc:
            raise GatewayError(400, f"ragtrim could not trim this request: {exc}", type_="invalid_request_error",
                               outcome="bad_request") from None
        self.metrics.trim_seconds.observe(prepared.trim_ms / 1000)
        return prepared

    def _check_size(self, p: Prepared) -> None:
        cap = self.config.limits.max_input_tokens
        if cap is not None and p.prompt_tokens > cap:
            raise GatewayError(
                400, f"this request has {p.prompt_tokens} prompt tokens after trimming "
                f"({p.prompt_tokens_before} before), over this gateway's limit of {cap}; send fewer or shorter "
                "documents or messages", type_="invalid_request_error", param="messages",
                code="context_length_exceeded", outcome="too_large")

    async def _admit_and_send(self, rec: Record, path: str, p: Prepared) -> Response:
        ident = rec.identity
        if ident is None:  # authenticate() ran first; kept for the type checker
            raise GatewayError(401, "missing API key", type_="invalid_request_error", outcome="unauthorized")
        decision = await self._rate(ident, p.estimated_tokens)
        rate_headers = _rate_headers(decision) if decision is not None else {}
        if decision is not None and decision.admitted and decision.reason != "state_unavailable":
            rec.charged_tokens = p.estimated_tokens
        fallback_only = False
        gates: list[Gate] = []
        try:
            try:
                gates = await self._take_slots(rec, ident, p)
            except (QueueFull, QueueTimeout) as exc:
                if not self.upstream.has_fallback:
                    await self._refund(rec, ident, requests=1)  # refused: the request costs nothing
                    full = isinstance(exc, QueueFull)
                    raise GatewayError(
                        429, f"too many requests in flight for the {exc}: " + (
                            "the queue is full" if full
                            else f"no slot freed within {self.config.limits.queue_timeout_s:g} s"),
                        type_="server_overloaded", code="queue_full" if full else "queue_timeout",
                        headers={**rate_headers, "retry-after": "1"},
                        outcome="queue_full" if full else "queue_timeout") from None
                fallback_only = True
            return await self._send(rec, path, p, gates, rate_headers, fallback_only)
        except BaseException:
            for g in gates:
                self._release(g, ident.org)
            raise

    async def _rate(self, ident: Identity, tokens: int) -> RateDecision | None:
        if ident.rpm is None and ident.tpm is None:
            return None
        try:
            decision = await self.store.acquire(ident.key_id, ident.rpm, ident.tpm, tokens)
        except StateUnavailable as exc:
            self.metrics.state_errors.inc()
            if self.config.limits.fail_open:
                return RateDecision(True, None, None, reason="state_unavailable")
            raise GatewayError(503, f"rate-limit state is unavailable and this gateway fails closed ({exc})",
                               type_="server_error", code="state_unavailable", outcome="state_unavailable",
                               headers={"retry-after": "1"}) from None
        if not decision.admitted:
            wait = decision.retry_after_s
            headers = _rate_headers(decision)
            if math.isinf(wait):
                what = "tokens" if decision.reason == "tokens" else "requests"
                raise GatewayError(429, f"this request needs {tokens} {what}, more than the key's whole per-minute "
                                   f"limit ({ident.tpm if what == 'tokens' else ident.rpm}); lower max_tokens or "
                                   "the prompt", type_=what, code="rate_limit_exceeded", headers=headers,
                                   outcome="rate_limited")
            headers["retry-after"] = str(max(1, math.ceil(wait)))
            limit = ident.rpm if decision.reason == "requests" else ident.tpm
            raise GatewayError(429, f"rate limit reached for user {ident.user!r} on {decision.reason} per minute: "
                               f"limit {limit}; retry in {wait:.1f} s", type_=decision.reason,
                               code="rate_limit_exceeded", headers=headers, outcome="rate_limited")
        return decision

    async def _refund(self, rec: Record, ident: Identity, *, requests: int) -> None:
        if rec.charged_tokens:
            try:
                await self.store.adjust(ident.key_id, -requests, -rec.charged_tokens)
            except StateUnavailable:
                self.metrics.state_errors.inc()
            rec.charged_tokens = 0

    def _org_gate(self, org: str) -> Gate | None:
        if org not in self.org_gates:
            cap = self.config.org_concurrency(org)
            lim = self.config.limits
            self.org_gates[org] = (self._gate(FairGate(name=f"org {org!r}", capacity=cap, max_queued=lim.max_queued,
                                                       max_queued_per_user=lim.max_queued_per_user), f"org:{org}")
                                   if cap is not None else None)
        return self.org_gates[org]

    async def _take_slots(self, rec: Record, ident: Identity, p: Prepared) -> list[Gate]:
        lim = self.config.limits
        deadline = time.monotonic() + lim.queue_timeout_s
        gates: list[Gate] = []
        lanes: list[tuple[str, Gate]] = []
        if self.long_gate is not None and lim.long_request_tokens is not None \
                and p.prompt_tokens > lim.long_request_tokens:
            lanes.append(("long", self.long_gate))
        if ident.concurrency is not None:
            key_gate = self.key_gates.get(ident.key_id)
            if key_gate is None:
                per_user = lim.max_queued_per_user
                key_gate = self.key_gates[ident.key_id] = self._gate(FairGate(
                    name=f"key of user {ident.user!r}", capacity=ident.concurrency,
                    max_queued=lim.max_queued if per_user is None else per_user), f"key:{ident.key_id}")
            lanes.append(("key", key_gate))
        org_gate = self._org_gate(ident.org)
        if org_gate is not None:
            lanes.append(("org", org_gate))
        try:
            for lane, gate in lanes:  # always long lane, key, then org: one order, no deadlock
                waited = await gate.acquire(ident.user, deadline)
                gates.append(gate)
                rec.queue_ms += waited * 1000
                self.metrics.queue_wait_seconds.labels(lane).observe(waited)
        except BaseException:
            for g in gates:
                g.release()
            raise
        if org_gate is not None:
            self.metrics.in_flight.labels(ident.org).inc()
        return gates

    def _release(self, gate: Gate, org: str) -> None:
        gate.release()
        if gate.name.startswith("org "):
            self.metrics.in_flight.labels(org).dec()

    async def _send(self, rec: Record, path: str, p: Prepared, gates: list[Gate], rate_headers: dict[str, str],
                    fallback_only: bool) -> Response:
        content = _dumps(p.body)
        headers = {"x-request-id": rec.request_id}
        t0 = time.perf_counter()
        resp: UpstreamResponse | None = None
        err: GatewayError | None = None
        use_fallback = fallback_only
        for attempt in ((True,) if fallback_only else (False, True)):
            if attempt and not self.upstream.has_fallback:
                break
            use_fallback = attempt
            try:
                resp = await self.upstream.request("POST", path, content=content, fallback=attempt, headers=headers)
            except UpstreamError as exc:
                err = _upstream_failed(exc)
                if exc.kind == "timeout":  # the upstream took the request: another try could run it twice
                    raise err from None
                continue
            if resp.status >= 500 and not attempt and self.upstream.has_fallback:
                await resp.close()
                resp = None
                continue
            break
        if resp is None:
            raise err or GatewayError(502, "no upstream configured", type_="upstream_error", outcome="upstream_error")
        rec.upstream = "fallback" if use_fallback else "primary"
        out_headers = {**_trim_headers(p), **rate_headers, "x-request-id": rec.request_id}
        if rec.queue_ms:
            out_headers["x-ragtrim-queue-ms"] = f"{rec.queue_ms:.1f}"
        if use_fallback:
            out_headers["x-ragtrim-upstream"] = "fallback"
        if not p.stream:
            try:
                body = await resp.read()
            except UpstreamError as exc:
                raise _upstream_failed(exc) from None
            rec.upstream_ttft_ms = (time.perf_counter() - t0) * 1000
            self.metrics.upstream_ttft_seconds.observe(rec.upstream_ttft_ms / 1000)
            for g in gates:
                self._release(g, rec.identity.org if rec.identity else "")
            gates.clear()
            rec.status = resp.status
            if resp.status == 200:
                usage = _usage_of(body)
                await self._settle(rec, usage)
            else:
                rec.outcome = "upstream_error"
                await self._refund_on_error(rec)
                return _relay_error(resp.status, body, out_headers)
            return Response(body, status_code=200, media_type="application/json", headers=out_headers)
        if resp.status != 200:
            try:
                body = await resp.read()
            except UpstreamError as exc:
                raise _upstream_failed(exc) from None
            for g in gates:
                self._release(g, rec.identity.org if rec.identity else "")
            gates.clear()
            rec.status, rec.outcome = resp.status, "upstream_error"
            await self._refund_on_error(rec)
            return _relay_error(resp.status, body, out_headers)
        held = list(gates)
        gates.clear()  # the stream owns the slots now
        return _RelayStream(self._relay(rec, resp, p, t0), headers=out_headers,
                            on_close=lambda gone: self._close_stream(rec, resp, held, gone))

    async def _relay(self, rec: Record, resp: UpstreamResponse, p: Prepared, t0: float) -> AsyncIterator[bytes]:
        """Upstream SSE events to the client one by one as they arrive; the usage chunk is read for accounting and
        passed on only when the client asked for it."""
        buf = b""
        first = True
        rec.extra["content_events"] = 0
        try:
            async for piece in resp.chunks():
                if first:
                    first = False
                    rec.upstream_ttft_ms = (time.perf_counter() - t0) * 1000
                    self.metrics.upstream_ttft_seconds.observe(rec.upstream_ttft_ms / 1000)
                buf += piece
                out = []
                while True:
                    end, sep = _event_end(buf)
                    if end < 0:
                        break
                    event, buf = buf[: end + sep], buf[end + sep:]
                    if b'"usage"' in event and b'"choices":[]' in event.replace(b" ", b""):
                        usage = _usage_of(event.partition(b"data:")[2])
                        if usage is not None:
                            rec.completion_tokens = usage.get("completion_tokens")
                            rec.extra["usage"] = usage
                        if not p.client_wants_usage:
                            continue
                    elif b'"content"' in event or b'"text"' in event:
                        rec.extra["content_events"] += 1
                    out.append(event)
                if out:
                    yield b"".join(out)
        except UpstreamError as exc:
            # Headers are gone already: tell the client in the stream, OpenAI-style, and end it.
            rec.outcome, rec.error = "upstream_error", str(exc)
            err = {"error": {"message": f"upstream failed mid-stream: {exc}", "type": "upstream_error",
                             "param": None, "code": "upstream_stream_error"}}
            yield buf + b"data: " + _dumps(err) + b"\n\n"
            return
        if buf:
            yield buf

    async def _close_stream(self, rec: Record, resp: UpstreamResponse, gates: list[Gate],
                            client_gone: bool) -> None:
        await resp.close()
        for g in gates:
            self._release(g, rec.identity.org if rec.identity else "")
        if client_gone:
            rec.outcome, rec.status = "client_closed", 499
        usage = rec.extra.get("usage")
        if usage is None and rec.prepared is not None:
            # No usage chunk (an upstream without stream_options): count one token per content event.
            n = rec.extra.get("content_events", 0)
            usage = {"prompt_tokens": rec.prepared.prompt_tokens, "completion_tokens": n,
                     "total_tokens": rec.prepared.prompt_tokens + n}
        await self._settle(rec, usage)
        self._finish(rec)

    async def _settle(self, rec: Record, usage: dict[str, Any] | None) -> None:
        """Correct the admission charge to what the upstream reports."""
        if usage is None:
            return
        completion = usage.get("completion_tokens")
        if isinstance(completion, int):
            rec.completion_tokens = completion
        total = usage.get("total_tokens")
        if rec.charged_tokens and rec.identity is not None and isinstance(total, int):
            delta = total - rec.charged_tokens
            try:
                await self.store.adjust(rec.identity.key_id, 0, delta)
            except StateUnavailable:
                self.metrics.state_errors.inc()
            rec.charged_tokens = total

    async def _refund_on_error(self, rec: Record) -> None:
        # A failed upstream call used no model time: give the tokens back, keep the request counted.
        if rec.identity is not None and rec.charged_tokens:
            try:
                await self.store.adjust(rec.identity.key_id, 0, -rec.charged_tokens)
            except StateUnavailable:
                self.metrics.state_errors.inc()
            rec.charged_tokens = 0

    def _finish(self, rec: Record) -> None:
        m = self.metrics
        m.requests.labels(rec.endpoint, rec.outcome).inc()
        p = rec.prepared
        if p is not None and rec.outcome in ("ok", "client_closed", "upstream_error"):
            m.tokens.labels("prompt_in").inc(p.prompt_tokens_before)
            m.tokens.labels("prompt_out").inc(p.prompt_tokens)
            m.tokens.labels("saved").inc(max(0, p.tokens_saved))
            if rec.completion_tokens:
                m.tokens.labels("completion").inc(rec.completion_tokens)
        if self.log is not None:
            self.log.write(rec, time.perf_counter())


def _request_id(request: Request) -> str:
    given = request.headers.get("x-request-id", "")
    return given[:128] if given else "req-" + uuid.uuid4().hex[:20]


def _trim_headers(p: Prepared) -> dict[str, str]:
    h = {"x-ragtrim-tokens-before": str(p.prompt_tokens_before), "x-ragtrim-tokens-after": str(p.prompt_tokens),
         "x-ragtrim-tokens-saved": str(p.tokens_saved)}
    if p.documents:
        h["x-ragtrim-documents"] = f"{p.documents_kept}/{p.documents}"
    if p.history_turns_folded:
        h["x-ragtrim-history-folded"] = str(p.history_turns_folded)
    return h


def _rate_headers(d: RateDecision) -> dict[str, str]:
    h: dict[str, str] = {}
    for name, s in (("requests", d.requests), ("tokens", d.tokens)):
        if s is not None:
            h[f"x-ratelimit-limit-{name}"] = str(s.limit)
            h[f"x-ratelimit-remaining-{name}"] = str(s.remaining)
            h[f"x-ratelimit-reset-{name}"] = format_reset(s.reset_s if d.admitted or math.isinf(s.retry_after_s)
                                                          else max(s.retry_after_s, 0.0))
    return h


def _event_end(buf: bytes) -> tuple[int, int]:
    """Where the first complete SSE event in ``buf`` ends, and the separator's length (-1 when none is complete).
    Events end with a blank line: LF LF, or CR LF CR LF."""
    lf = buf.find(b"\n\n")
    crlf = buf.find(b"\r\n\r\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return crlf, 4
    return lf, 2


def _usage_of(body: bytes) -> dict[str, Any] | None:
    try:
        obj = _loads(body)
    except ValueError:
        return None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    return usage if isinstance(usage, dict) else None


def _relay_error(status: int, body: bytes, headers: dict[str, str]) -> Response:
    """Pass an upstream error on; wrap it OpenAI-style when the upstream's body is not."""
    try:
        obj = _loads(body)
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            return Response(body, status_code=status, media_type="application/json", headers=headers)
        message = obj.get("message") or obj.get("detail") or obj.get("error") if isinstance(obj, dict) else obj
    except ValueError:
        message = body[:500].decode("utf-8", "replace")
    err = {"error": {"message": f"upstream answered {status}: {message}", "type": "upstream_error", "param": None,
                     "code": status}}
    return Response(_dumps(err), status_code=status if status >= 400 else 502, media_type="application/json",
                    headers=headers)


def _upstream_failed(exc: UpstreamError) -> GatewayError:
    if exc.kind == "timeout":
        return GatewayError(504, f"upstream timed out: {exc}", type_="upstream_error", code="upstream_timeout",
                            outcome="upstream_error")
    if exc.kind == "connect":
        return GatewayError(502, f"upstream unreachable: {exc}", type_="upstream_error", code="upstream_unreachable",
                            outcome="upstream_error")
    return GatewayError(502, f"upstream broke the protocol: {exc}", type_="upstream_error", code="upstream_error",
                        outcome="upstream_error")


async def _disconnected(receive: Receive) -> None:
    """Return when the client has gone (the ASGI ``http.disconnect`` message); other messages are ignored."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _until_disconnect(receive: Receive, work: Awaitable[Response]) -> Response:
    """Run ``work`` but cancel it when the client disconnects (queued or waiting on a non-streaming upstream), so
    a gone client frees its slot at once."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watcher.cancel()
        raise
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()
    try:
        result = await task
    except asyncio.CancelledError:
        raise ClientGone() from None
    except GatewayError:
        raise ClientGone() from None
    if isinstance(result, _RelayStream):  # finished just as the client left: close it properly
        await result.close()
    raise ClientGone()


class _RelayStream(Response):
    """An SSE response that relays events as they come and always runs ``on_close`` (client gone, upstream done
    or error), which releases the slots and settles the token charge."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[bytes], *, headers: dict[str, str],
                 on_close: Callable[[bool], Awaitable[None]]) -> None:
        super().__init__(content=None, status_code=200, headers={**headers, "cache-control": "no-cache"},
                         media_type="text/event-stream")
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.events = events
        self.on_close = on_close
        self._closed = False
        self.client_gone = False

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            aclose = getattr(self.events, "aclose", None)
            if aclose is not None:
                await aclose()
            await self.on_close(self.client_gone)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relay = asyncio.ensure_future(self._relay(send))
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            done, _ = await asyncio.wait({relay, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if relay in done:
                watcher.cancel()
                relay.result()
            else:
                self.client_gone = True
                relay.cancel()
                # The relay's own error (a send to a closed socket) is moot once the client has gone.
                await asyncio.gather(relay, return_exceptions=True)
        finally:
            watcher.cancel()
            if not relay.done():
                relay.cancel()
            await self._close_shielded()

    async def _close_shielded(self) -> None:
        await asyncio.shield(self.close())

    async def _relay(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for chunk in self.events:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def create_app(config: GatewayConfig, *, counter: TokenCounter | None = None) -> Starlette:
    """The gateway as an ASGI app (run it with uvicorn)."""
    return Gateway(config, counter=counter).app()
