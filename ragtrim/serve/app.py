"""The gateway: authenticate, trim, check limits, queue for a slot, relay to the upstream, account for usage.

``create_app(config)`` returns a Starlette app; ``Gateway`` holds the per-process state (store, gates, client) and
its routes and request handling. Admission (rate limits and slots) is ``ragtrim.serve.admission``, the streaming
relay ``ragtrim.serve.relay``, and error responses and headers ``ragtrim.serve.responses``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from ragtrim.errors import RagtrimError, require

for _package in ("starlette", "uvicorn", "aiohttp", "prometheus_client"):  # one clear error naming the extra
    require(_package, "serve", "ragtrim serve")

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ragtrim.serve.admission import Admission, Identity, key_id
from ragtrim.serve.config import GatewayConfig
from ragtrim.serve.limits import Gate, QueueFull, QueueTimeout
from ragtrim.serve.log import RequestLog
from ragtrim.serve.metrics import GatewayMetrics
from ragtrim.serve.rate_store import make_store
from ragtrim.serve.relay import ClientGone, RelayStream, event_end, until_disconnect
from ragtrim.serve.render import Prepared, RequestError, prepare_chat, prepare_completion
from ragtrim.serve.responses import (
    GatewayError,
    dumps,
    loads,
    rate_headers,
    relay_error,
    request_id,
    trim_headers,
    upstream_failed,
    usage_of,
)
from ragtrim.serve.upstream import Upstream, UpstreamError, UpstreamResponse
from ragtrim.text.tokens import TokenCounter, get_counter
from ragtrim.vectors.store import configure_default_store


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
        self.admission = Admission(config, self.store, self.metrics)
        max_mb = config.trim.vector_store_max_mb
        configure_default_store(config.trim.vector_store,
                                max_bytes=int(max_mb * 2**20) if max_mb is not None else None)

    @property
    def org_gates(self) -> dict[str, Gate | None]:
        """The org concurrency gates made so far (None: the org has no limit)."""
        return self.admission.org_gates

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
        rid = request_id(request)
        try:
            self.authenticate(request)
        except GatewayError as exc:
            return exc.response(rid)
        try:
            resp = await self.upstream.request("GET", "/models")
        except UpstreamError as exc:
            if not self.upstream.has_fallback:
                return upstream_failed(exc).response(rid)
            try:
                resp = await self.upstream.request("GET", "/models", fallback=True)
            except UpstreamError as exc2:
                return upstream_failed(exc2).response(rid)
        try:
            body = await resp.read()
        except UpstreamError as exc:
            return upstream_failed(exc).response(rid)
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
        rec = Record(request_id=request_id(request), endpoint=endpoint, started=time.perf_counter())
        try:
            rec.identity = self.authenticate(request)
            raw = await request.body()
            if self.log is not None and self.log.log_request:
                rec.extra["request_body"] = raw
            prepared = await self._prepare(raw, prepare)
            rec.prepared = prepared
            self._check_size(prepared)
            response = await until_disconnect(request.receive, self._admit_and_send(rec, path, prepared))
        except GatewayError as exc:
            rec.outcome, rec.status, rec.error = exc.outcome, exc.status, str(exc)
            self._finish(rec)
            return exc.response(rec.request_id)
        except ClientGone:
            rec.outcome, rec.status = "client_closed", 499
            self._finish(rec)
            return Response(status_code=499)
        if not isinstance(response, RelayStream):
            self._finish(rec)
        return response

    async def _prepare(self, raw: bytes, prepare: Callable[[Any, GatewayConfig, TokenCounter], Prepared]) -> Prepared:
        try:
            body = loads(raw)
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
        decision = await self.admission.rate(ident, p.estimated_tokens)
        limit_headers = rate_headers(decision) if decision is not None else {}
        if decision is not None and decision.admitted and decision.reason != "state_unavailable":
            rec.charged_tokens = p.estimated_tokens
        fallback_only = False
        gates: list[Gate] = []
        try:
            try:
                gates = await self.admission.take_slots(rec, ident, p.prompt_tokens)
            except (QueueFull, QueueTimeout) as exc:
                if not self.upstream.has_fallback:
                    await self._refund(rec, requests=1)  # refused: the request costs nothing
                    full = isinstance(exc, QueueFull)
                    raise GatewayError(
                        429, f"too many requests in flight for the {exc}: " + (
                            "the queue is full" if full
                            else f"no slot freed within {self.config.limits.queue_timeout_s:g} s"),
                        type_="server_overloaded", code="queue_full" if full else "queue_timeout",
                        headers={**limit_headers, "retry-after": "1"},
                        outcome="queue_full" if full else "queue_timeout") from None
                fallback_only = True
            return await self._send(rec, path, p, gates, limit_headers, fallback_only)
        except BaseException:
            for g in gates:
                self.admission.release(g, ident.org)
            raise

    async def _refund(self, rec: Record, *, requests: int) -> None:
        """Give back the tokens charged on admission, and ``requests`` requests."""
        if rec.identity is not None and rec.charged_tokens:
            await self.admission.adjust(rec.identity.key_id, -requests, -rec.charged_tokens)
            rec.charged_tokens = 0

    async def _send(self, rec: Record, path: str, p: Prepared, gates: list[Gate], limit_headers: dict[str, str],
                    fallback_only: bool) -> Response:
        content = dumps(p.body)
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
                err = upstream_failed(exc)
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
        out_headers = {**trim_headers(p), **limit_headers, "x-request-id": rec.request_id}
        if rec.queue_ms:
            out_headers["x-ragtrim-queue-ms"] = f"{rec.queue_ms:.1f}"
        if use_fallback:
            out_headers["x-ragtrim-upstream"] = "fallback"
        if not p.stream:
            try:
                body = await resp.read()
            except UpstreamError as exc:
                raise upstream_failed(exc) from None
            rec.upstream_ttft_ms = (time.perf_counter() - t0) * 1000
            self.metrics.upstream_ttft_seconds.observe(rec.upstream_ttft_ms / 1000)
            for g in gates:
                self.admission.release(g, rec.identity.org if rec.identity else "")
            gates.clear()
            rec.status = resp.status
            if resp.status == 200:
                usage = usage_of(body)
                await self._settle(rec, usage)
            else:
                rec.outcome = "upstream_error"
                await self._refund(rec, requests=0)  # a failed upstream call used no model time
                return relay_error(resp.status, body, out_headers)
            return Response(body, status_code=200, media_type="application/json", headers=out_headers)
        if resp.status != 200:
            try:
                body = await resp.read()
            except UpstreamError as exc:
                raise upstream_failed(exc) from None
            for g in gates:
                self.admission.release(g, rec.identity.org if rec.identity else "")
            gates.clear()
            rec.status, rec.outcome = resp.status, "upstream_error"
            await self._refund(rec, requests=0)
            return relay_error(resp.status, body, out_headers)
        held = list(gates)
        gates.clear()  # the stream owns the slots now
        return RelayStream(self._relay(rec, resp, p, t0), headers=out_headers,
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
                    end, sep = event_end(buf)
                    if end < 0:
                        break
                    event, buf = buf[: end + sep], buf[end + sep:]
                    if b'"usage"' in event and b'"choices":[]' in event.replace(b" ", b""):
                        usage = usage_of(event.partition(b"data:")[2])
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
            yield buf + b"data: " + dumps(err) + b"\n\n"
            return
        if buf:
            yield buf

    async def _close_stream(self, rec: Record, resp: UpstreamResponse, gates: list[Gate],
                            client_gone: bool) -> None:
        await resp.close()
        for g in gates:
            self.admission.release(g, rec.identity.org if rec.identity else "")
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
            await self.admission.adjust(rec.identity.key_id, 0, total - rec.charged_tokens)
            rec.charged_tokens = total

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


def create_app(config: GatewayConfig, *, counter: TokenCounter | None = None) -> Starlette:
    """The gateway as an ASGI app (run it with uvicorn)."""
    return Gateway(config, counter=counter).app()
