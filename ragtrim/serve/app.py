"""The gateway: authenticate, trim, check limits, queue for a slot, relay to the upstream, account for usage.

``create_app(config)`` returns a Starlette app; ``Gateway`` holds the per-process state (store, gates, client),
routes and request handling. Elsewhere: reading a request ``serve.intake``, admission (rate limits and slots)
``serve.admission`` (its state store watched by ``serve.limiter``), the probes ``serve.probes``, the streaming
relay ``serve.relay``, error responses and headers ``serve.responses``.

No request can stall the event loop: the body is read under a size cap and a deadline; parsing, counting, trimming,
encoding and the prefill-cost refit run in a worker thread; an answer over ``SMALL_ANSWER_BYTES`` streams through,
never held whole. Any non-success answer is OpenAI-shaped JSON with a ``code``; every request reaches the metrics.
"""

from __future__ import annotations

import asyncio
import hmac
import signal
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ragtrim._util import gcclock, gcfreeze
from ragtrim._util.redact import get_logger
from ragtrim.errors import ConfigError, RagtrimError, require

for _package in ("starlette", "uvicorn", "aiohttp", "prometheus_client"):  # one clear error naming the extra
    require(_package, "serve", "ragtrim serve")

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ragtrim.serve.admission import Admission, Identity, key_id
from ragtrim.serve.autotrim import AutoTrim
from ragtrim.serve.config import GatewayConfig, load_config, restart_only_changes
from ragtrim.serve.drain import Drain, DrainMiddleware
from ragtrim.serve.intake import Prepare, parse_and_prepare, read_body
from ragtrim.serve.limiter import check_state_servers, shared_redis_problem
from ragtrim.serve.limits import Gate, QueueFull, QueueTimeout
from ragtrim.serve.log import Record, RequestLog
from ragtrim.serve.metrics import GatewayMetrics
from ragtrim.serve.probes import Probes
from ragtrim.serve.rate_store import make_store
from ragtrim.serve.relay import BodyBroken, ClientGone, RelayStream, relay_events, then_done, until_disconnect
from ragtrim.serve.render import Prepared, RequestError, prepare_chat, prepare_completion, prepare_embeddings
from ragtrim.serve.responses import (
    MAX_ERROR_BYTES,
    USAGE_TAIL_BYTES,
    GatewayError,
    error_response,
    rate_headers,
    relay_error,
    request_id,
    trim_headers,
    upstream_code,
    upstream_failed,
    usage_in_tail,
    usage_of,
)
from ragtrim.serve.upstream import Upstream, UpstreamError, UpstreamResponse
from ragtrim.text.tokens import TokenCounter, get_counter
from ragtrim.vectors.store import configure_default_store, default_store_spec

logger = get_logger(__package__)  # the package logger, which `ragtrim serve` sends to stderr

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
SMALL_ANSWER_BYTES = 256 * 1024
"""A non-streamed answer up to this size (declared by its Content-Length) is read whole and its usage parsed; a
larger or undeclared one is passed through as it arrives (``Gateway._pass_through``)."""
class Gateway:
    """``config_path``: the file the config came from; SIGHUP re-reads it (keys, orgs, limits, trim)."""

    def __init__(self, config: GatewayConfig, *, counter: TokenCounter | None = None,
                 config_path: str | Path | None = None) -> None:
        self.config = config
        self.config_path = config_path
        self.counter = counter if counter is not None else get_counter(config.upstream.tokenizer)
        self.metrics = GatewayMetrics()
        lim = config.limits
        self.store = make_store(lim.state, window_s=lim.window_s, timeout_s=lim.state_timeout_s,
                                breaker_s=lim.state_breaker_s)
        self.upstream = Upstream(config.upstream)
        self.log = (RequestLog(config.log.path, log_text=config.log.log_text, log_request=config.log.log_request)
                    if config.log.path else None)
        self.identities = self._identities(config)
        self.admission = Admission(config, self.store, self.metrics)
        self.auto = AutoTrim(registry=self.metrics.registry)  # trim.scorer = "auto": learns the prefill cost
        self.probes = Probes(self)
        self.drain = Drain(lambda: self.config.serve.drain_timeout_s)  # SIGTERM's drain (ragtrim.serve.drain)
        max_mb = config.trim.vector_store_max_mb
        configure_default_store(config.trim.vector_store,
                                max_bytes=int(max_mb * 2**20) if max_mb is not None else None)
        problem = shared_redis_problem(lim.state, self.vector_store_spec)
        if problem is not None:  # "default" may name the limiter's Redis through $RAGTRIM_VECTOR_STORE
            raise ConfigError(problem)

    @property
    def vector_store_spec(self) -> str:
        """The vector store trims use in this process (``"default"`` resolved: the config, else the environment)."""
        return default_store_spec()[0]

    def check_state_servers(self) -> list[str]:
        """Ask the Redis servers before serving (``ragtrim serve`` does): ConfigError when the limiter and the
        vector store are one server under two names; warnings (also logged) about the limiter's Redis."""
        warnings = check_state_servers(self.config.limits.state, self.vector_store_spec)
        for w in warnings:
            logger.warning("ragtrim serve: %s", w)
        return warnings

    @staticmethod
    def _identities(config: GatewayConfig) -> dict[str, Identity]:
        return {k: Identity(user=kc.user, org=kc.org, key_id=key_id(k), rpm=kc.rpm, tpm=kc.tpm,
                            concurrency=kc.concurrency)
                for k, kc in config.keys.items()}

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
            hup = self.config_path is not None and threading.current_thread() is threading.main_thread()
            if hup:  # signal handlers can only be set from the main thread (a server run by `ragtrim serve`)
                asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.reload)
            await run_in_threadpool(self.warm_up)
            gcclock.install()  # times the collector's stops: /metrics, and each request's share in the log
            frozen = self.config.serve.freeze_gc  # read once: a reload cannot change it (RESTART_ONLY)
            if frozen:
                count = gcfreeze.freeze_start_up()
                logger.debug("ragtrim serve: %d start-up objects frozen", count)
            try:
                yield
            finally:
                if hup:
                    asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
                if frozen:
                    gcfreeze.release()
                gcclock.uninstall()
                await self.aclose()

        return Starlette(routes=[
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/healthz", self.probes.healthz, methods=["GET"]),
            Route("/health/liveness", self.probes.liveness, methods=["GET"]),
            Route("/health/readiness", self.probes.readiness, methods=["GET"]),
            Route("/metrics", self.metrics_endpoint, methods=["GET"]),
        ], lifespan=lifespan, exception_handlers={HTTPException: self._http_error, Exception: self._internal_error},
            middleware=[Middleware(DrainMiddleware, drain=self.drain)])

    def warm_up(self) -> None:
        """Load the tokenizer and the trimming code before the first request: loading them is seconds of work that
        holds the interpreter lock, which would otherwise stall every other request of the first one's client."""
        try:
            self.counter.count("warm up")
            if self.config.trim.scorer == "auto" and self.config.trim.budget is not None:
                self.auto.warm_up(self.counter)  # measure the recipes before the first request needs them
            if self.config.trim.budget is not None:
                prepare_chat({"model": "warm-up", "messages": [{"role": "user", "content": "warm up"}],
                              "documents": ["The first warm-up passage.", "The second warm-up passage."],
                              "ragtrim": {"budget": 4}}, self.config, self.counter)
        except Exception as exc:  # noqa: BLE001 - a warm-up never stops the start; each request reports its error
            logger.warning("ragtrim serve: warm-up failed (%s: %s)", type(exc).__name__, exc)

    # -- config reload ----------------------------------------------------------------------------------------------
    def reload(self) -> bool:
        """Re-read the config file (SIGHUP): keys, orgs, limits and trim take effect for new requests; requests in
        flight finish under the slots they hold. A config that does not load, or that changes what needs a restart
        (``upstream``, ``log``, the state store, the vector store), is refused and the old one kept."""
        if self.config_path is None:
            logger.error("ragtrim serve: config reload refused: the gateway was not started from a config file")
            return False
        try:
            new = load_config(self.config_path)
        except Exception as exc:  # noqa: BLE001 - a signal handler must not die; any failure refuses the reload
            self.metrics.reloads.labels("refused").inc()
            detail = exc if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
            logger.error("ragtrim serve: config reload refused, keeping the running config: %s", detail)
            return False
        changed = restart_only_changes(self.config, new)
        if changed:
            self.metrics.reloads.labels("refused").inc()
            logger.error("ragtrim serve: config reload refused, keeping the running config: %s changed, which "
                         "needs a restart", ", ".join(changed))
            return False
        self.config = new
        self.identities = self._identities(new)
        self.admission.reconfigure(new)
        self.metrics.reloads.labels("applied").inc()
        logger.warning("ragtrim serve: config reloaded from %s (%d keys, %d orgs)", self.config_path,
                       len(new.keys), len(new.orgs))
        return True

    # -- errors outside the request handlers ------------------------------------------------------------------------
    async def _http_error(self, request: Request, exc: Exception) -> Response:
        """404 and 405 (and any other HTTPException) as OpenAI-shaped JSON, counted and logged."""
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code = _HTTP_CODES.get(status, f"http_{status}")
        rec = Record(request_id=request_id(request), endpoint="other", started=time.perf_counter())
        message = (f"no route {request.method} {request.url.path[:200]}" if status == 404 else
                   f"method {request.method} is not allowed here" if status == 405 else str(exc))
        err = GatewayError(status, message, type_="invalid_request_error", code=code, outcome=code,
                           client_text=True,
                           headers=dict(exc.headers or {}) if isinstance(exc, HTTPException) else {})
        rec.fail(err)
        self._finish(rec)
        return err.response(rec.request_id)

    async def _internal_error(self, request: Request, exc: Exception) -> Response:
        logger.error("ragtrim serve: internal error on %s", request.url.path, exc_info=exc)
        return error_response(500, f"internal error in the gateway ({type(exc).__name__})", type_="server_error",
                              code="internal_error", headers={"x-request-id": request_id(request)})

    # -- small endpoints --------------------------------------------------------------------------------------------
    async def metrics_endpoint(self, request: Request) -> Response:
        token = self.config.metrics.bearer_token
        if token:
            scheme, _, given = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                rec = Record(request_id=request_id(request), endpoint="metrics", started=time.perf_counter())
                err = GatewayError(401, "/metrics needs 'Authorization: Bearer <metrics.bearer_token>'",
                                   type_="invalid_request_error", code="invalid_api_key", outcome="unauthorized")
                rec.fail(err)
                self._finish(rec)
                return err.response(rec.request_id)
        for org, gate in self.org_gates.items():
            if gate is not None:
                self.metrics.queued.labels(org).set(gate.queued)
        await run_in_threadpool(self.auto.refresh_metrics)
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def models(self, request: Request) -> Response:
        rec = Record(request_id=request_id(request), endpoint="models", started=time.perf_counter())
        try:
            self.drain.refuse_new()
            rec.identity = self.authenticate(request)
            try:
                resp = await self.upstream.request("GET", "/models")
            except UpstreamError as exc:
                if not self.upstream.has_fallback:
                    raise upstream_failed(exc) from None
                try:
                    resp = await self.upstream.request("GET", "/models", fallback=True)
                except UpstreamError as exc2:
                    raise upstream_failed(exc2) from None
            try:
                body = await resp.read()
            except UpstreamError as exc:
                raise upstream_failed(exc) from None
        except GatewayError as exc:
            rec.fail(exc)
            self._finish(rec)
            return exc.response(rec.request_id)
        rec.status = resp.status
        if resp.status >= 400:
            rec.outcome, rec.error_code = "upstream_error", upstream_code(resp.status, None)
            self._finish(rec)
            return relay_error(resp.status, body, {"x-request-id": rec.request_id})
        self._finish(rec)
        return Response(body, status_code=resp.status, media_type=resp.content_type,
                        headers={"x-request-id": rec.request_id})

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

    async def embeddings(self, request: Request) -> Response:
        return await self._handle(request, "embeddings", "/embeddings", prepare_embeddings)

    async def _handle(self, request: Request, endpoint: str, path: str, prepare: Prepare) -> Response:
        rec = Record(request_id=request_id(request), endpoint=endpoint, started=time.perf_counter())
        try:
            try:
                self.drain.refuse_new()
                rec.identity = self.authenticate(request)
                raw = await read_body(request, self.config.limits)
                if self.log is not None and self.log.log_request:
                    rec.extra["request_body"] = bytes(raw)
                prepared, content, too_large = await self._prepare(raw, prepare)
                del raw  # the parsed request is all that is needed from here on
                rec.prepared = prepared
                if too_large is not None:
                    raise too_large
                response = await until_disconnect(request.receive,
                                                  self._admit_and_send(rec, path, prepared, content))
            except GatewayError as exc:
                rec.fail(exc)
                self._finish(rec)
                return exc.response(rec.request_id)
            except (ClientGone, ClientDisconnect):
                if rec.charged and not rec.sent:  # gave up before the upstream saw it: the request costs nothing
                    await self._refund(rec, requests=1)
                rec.outcome, rec.status, rec.error_code = "client_closed", 499, "client_closed"
                self._finish(rec)
                return Response(status_code=499)
            except asyncio.CancelledError:  # ended by the drain's timeout (ragtrim.serve.drain answers the 503)
                rec.outcome, rec.status, rec.error_code = "shutting_down", 503, "shutting_down"
                self._finish(rec)
                raise
        except Exception as exc:  # a bug, not the client's doing: still an OpenAI error, counted and logged
            logger.error("ragtrim serve: internal error on %s (request %s)", path, rec.request_id, exc_info=exc)
            if rec.charged and not rec.sent:
                await self._refund(rec, requests=1)
            err = GatewayError(500, f"internal error in the gateway ({type(exc).__name__})", type_="server_error",
                               code="internal_error", outcome="internal_error")
            rec.fail(err)
            self._finish(rec)
            return err.response(rec.request_id)
        if not isinstance(response, RelayStream):
            self._finish(rec)
        return response

    async def _prepare(self, raw: bytearray, prepare: Prepare) -> tuple[Prepared, bytes, GatewayError | None]:
        """Parse, check, trim, count and encode the request in a worker thread: the event loop only waits."""
        config = self.config  # one config for the whole request, even if a reload lands meanwhile
        try:
            prepared, content, too_large = await run_in_threadpool(parse_and_prepare, raw, prepare, config, self.counter,
                                                                   self.auto if config.trim.scorer == "auto" else None)
        except RequestError as exc:
            raise GatewayError(400, str(exc), type_="invalid_request_error", param=exc.param, code=exc.code,
                               outcome="bad_request") from None
        except RagtrimError as exc:
            raise GatewayError(400, f"ragtrim could not trim this request: {exc}", type_="invalid_request_error",
                               code="trim_failed", outcome="bad_request", client_text=True) from None
        self.metrics.trim_seconds.observe(prepared.trim_ms / 1000)
        for stage, seconds in prepared.trim_stage_seconds:
            self.metrics.trim_stage_seconds.labels(stage=stage).observe(seconds)
        return prepared, content, too_large

    async def _admit_and_send(self, rec: Record, path: str, p: Prepared, content: bytes) -> Response:
        ident = rec.identity
        if ident is None:  # authenticate() ran first; kept for the type checker
            raise GatewayError(401, "missing API key", type_="invalid_request_error", code="missing_api_key",
                               outcome="unauthorized")
        decision = await self.admission.rate(ident, p.estimated_tokens)
        limit_headers = rate_headers(decision) if decision is not None else {}
        if decision is not None and decision.admitted and decision.reason != "state_unavailable":
            rec.charged, rec.charged_tokens = True, p.estimated_tokens
        fallback_only = False
        gates: list[Gate] = []
        try:
            try:
                gates = await self.admission.take_slots(rec, ident, p.prompt_tokens)
            except GatewayError:
                await self._refund(rec, requests=1)  # the shared gate's state is gone (fail_open = false)
                raise
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
            return await self._send(rec, path, p, content, gates, limit_headers, fallback_only)
        except BaseException:
            for g in gates:
                self.admission.release(g, ident.org)
            raise

    async def _refund(self, rec: Record, *, requests: int) -> None:
        """Give back the tokens charged on admission, and ``requests`` requests."""
        if rec.identity is not None and rec.charged:
            rec.charged = False
            tokens, rec.charged_tokens = rec.charged_tokens, 0
            await self.admission.adjust(rec.identity.key_id, -requests, -tokens)

    async def _send(self, rec: Record, path: str, p: Prepared, content: bytes, gates: list[Gate],
                    limit_headers: dict[str, str], fallback_only: bool) -> Response:
        headers = {"x-request-id": rec.request_id}
        t0 = time.perf_counter()
        resp: UpstreamResponse | None = None
        err: GatewayError | None = None
        use_fallback = fallback_only
        for attempt in ((True,) if fallback_only else (False, True)):
            if attempt and not self.upstream.has_fallback:
                break
            use_fallback = attempt
            if not rec.sent:
                self.auto.sent()
            rec.sent = True
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
            raise err or GatewayError(502, "no upstream configured", type_="upstream_error", code="upstream_error",
                                      outcome="upstream_error")
        rec.upstream = "fallback" if use_fallback else "primary"
        out_headers = {**trim_headers(p), **limit_headers, "x-request-id": rec.request_id}
        if rec.queue_ms:
            out_headers["x-ragtrim-queue-ms"] = f"{rec.queue_ms:.1f}"
        if use_fallback:
            out_headers["x-ragtrim-upstream"] = "fallback"
        if not p.stream:
            if resp.status == 200 and (resp.content_length is None or resp.content_length > SMALL_ANSWER_BYTES):
                return self._pass_through(rec, resp, gates, out_headers, t0)
            try:
                body = await resp.read(None if resp.status == 200 else MAX_ERROR_BYTES)
            except UpstreamError as exc:
                raise upstream_failed(exc) from None
            self._answered(rec, t0)
            for g in gates:
                self.admission.release(g, rec.identity.org if rec.identity else "")
            gates.clear()
            rec.status = resp.status
            if resp.status == 200:
                usage = usage_of(body)
                await self._settle(rec, usage)
            else:
                rec.outcome, rec.error_code = "upstream_error", upstream_code(resp.status, None)
                await self._refund(rec, requests=0)  # a failed upstream call used no model time
                return relay_error(resp.status, body, out_headers)
            return Response(body, status_code=200, media_type="application/json", headers=out_headers)
        if resp.status != 200:
            try:
                body = await resp.read(MAX_ERROR_BYTES)
            except UpstreamError as exc:
                raise upstream_failed(exc) from None
            for g in gates:
                self.admission.release(g, rec.identity.org if rec.identity else "")
            gates.clear()
            rec.status, rec.outcome = resp.status, "upstream_error"
            rec.error_code = upstream_code(resp.status, None)
            await self._refund(rec, requests=0)
            return relay_error(resp.status, body, out_headers)
        held = list(gates)
        gates.clear()  # the stream owns the slots now
        events = relay_events(rec, resp.chunks(), p.client_wants_usage, lambda: self._answered(rec, t0),
                              lambda: self._upstream_done(rec))
        return RelayStream(events, headers=out_headers, on_close=lambda gone: self._close_stream(rec, resp, held, gone))

    def _pass_through(self, rec: Record, resp: UpstreamResponse, gates: list[Gate], headers: dict[str, str],
                      t0: float) -> RelayStream:
        """A large (or undeclared) answer passed to the client piece by piece as it arrives: never held whole,
        never parsed whole; its ``usage`` is read from its last bytes (``usage_in_tail``). The slots go back once
        the upstream has sent the last byte, as they do for an answer read whole."""
        held = list(gates)
        gates.clear()  # the response owns the slots now

        async def body() -> AsyncIterator[bytes]:
            tail = b""
            try:
                async for piece in then_done(resp.chunks(), lambda: self._upstream_done(rec)):
                    if rec.upstream_ttft_ms is None:
                        self._answered(rec, t0)
                    tail = (tail + piece)[-USAGE_TAIL_BYTES:] if len(piece) < USAGE_TAIL_BYTES \
                        else piece[-USAGE_TAIL_BYTES:]
                    yield piece
            except UpstreamError as exc:
                rec.outcome, rec.error, rec.error_code = "upstream_error", str(exc), "upstream_body_broken"
                raise BodyBroken() from None
            self._release(rec, held)
            rec.extra["usage"] = usage_in_tail(tail)

        async def close(client_gone: bool) -> None:
            await resp.close()
            self._release(rec, held)
            if client_gone:
                rec.outcome, rec.status = "client_closed", 499
            await self._settle(rec, rec.extra.get("usage"))
            self._finish(rec)

        return RelayStream(body(), headers=headers, on_close=close, media_type=resp.content_type,
                           content_length=resp.content_length)

    def _release(self, rec: Record, gates: list[Gate]) -> None:
        for g in gates:
            self.admission.release(g, rec.identity.org if rec.identity else "")
        gates.clear()

    async def _close_stream(self, rec: Record, resp: UpstreamResponse, gates: list[Gate],
                            client_gone: bool) -> None:
        await resp.close()
        for g in gates:
            self.admission.release(g, rec.identity.org if rec.identity else "")
        if client_gone:
            rec.outcome, rec.status = "client_closed", 499
        elif self.drain.cutting:  # ended by the drain's timeout with an error event (ragtrim.serve.drain)
            rec.outcome, rec.error_code = "shutting_down", "shutting_down"
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
        if rec.charged and rec.identity is not None and isinstance(total, int):
            await self.admission.adjust(rec.identity.key_id, 0, total - rec.charged_tokens)
            rec.charged_tokens = total

    def _answered(self, rec: Record, t0: float) -> None:
        """The upstream's first byte (or whole answer) for ``rec`` arrived: its time to first event, from ``t0``."""
        rec.upstream_ttft_ms = (time.perf_counter() - t0) * 1000
        self.metrics.upstream_ttft_seconds.observe(rec.upstream_ttft_ms / 1000)

    def _upstream_done(self, rec: Record) -> None:
        """The upstream finished with ``rec`` (its answer ended, or it failed): off auto's in-flight count, once.
        Streams call it as the upstream's last event arrives, before the client can send its next request."""
        if rec.sent and not rec.upstream_done:
            self.auto.done()
        rec.upstream_done = True

    def _finish(self, rec: Record) -> None:
        self._upstream_done(rec)
        self.auto.observe_request(rec.prepared, rec.upstream_ttft_ms, rec.outcome)
        m = self.metrics
        m.requests.labels(rec.endpoint, rec.outcome).inc()
        if rec.error_code is not None:
            m.errors.labels(rec.endpoint, str(rec.status), rec.error_code).inc()
        p = rec.prepared
        if p is not None and rec.outcome in ("ok", "client_closed", "upstream_error"):
            m.tokens.labels("prompt_in").inc(p.prompt_tokens_before)
            m.tokens.labels("prompt_out").inc(p.prompt_tokens)
            m.tokens.labels("saved").inc(max(0, p.tokens_saved))
            if rec.completion_tokens:
                m.tokens.labels("completion").inc(rec.completion_tokens)
        if self.log is not None:
            self.log.write(rec, time.perf_counter())


def create_app(config: GatewayConfig, *, counter: TokenCounter | None = None,
               config_path: str | Path | None = None) -> Starlette:
    """The gateway as an ASGI app (run it with uvicorn); with ``config_path``, SIGHUP reloads that file."""
    return Gateway(config, counter=counter, config_path=config_path).app()
