"""Graceful drain on SIGTERM and SIGINT: readiness answers 503 ``draining`` at once and new requests get 503
``shutting_down``, while the requests in flight finish for up to ``serve.drain_timeout_s``; then each unfinished
stream ends with an OpenAI-style error event and ``data: [DONE]`` (one log line each, no traceback), and the server
stops. A second signal ends the wait at once; a third is uvicorn's own (SIGINT: quit without waiting).

``Drain`` holds the state, ``DrainMiddleware`` tracks and ends the requests, ``DrainingServer`` is uvicorn's server
with the signals routed here (``ragtrim serve`` runs it).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragtrim._util.redact import get_logger
from ragtrim.serve.responses import GatewayError

logger = get_logger(__package__)

UNTRACKED_PATHS = frozenset({"/health/liveness", "/health/readiness", "/healthz", "/metrics"})
"""Probes and metrics: answered while draining (readiness with 503), never waited for."""
END_WAIT_S = 5.0
"""After the cut, how long the ended requests get to write their last event before the server stops anyway."""


class Drain:
    """``timeout_s`` is read when the drain starts (a SIGHUP reload may have changed it)."""

    def __init__(self, timeout_s: Callable[[], float]) -> None:
        self.timeout_s = timeout_s
        self.reason = ""
        self.since: float | None = None
        self._cut_now = False
        self._cutting = False
        self._active: dict[asyncio.Task[Any], _Exchange] = {}

    @property
    def draining(self) -> bool:
        return self.since is not None

    @property
    def cutting(self) -> bool:
        """The wait is over: what still runs is being ended."""
        return self._cutting

    @property
    def in_flight(self) -> int:
        return len(self._active)

    def begin(self, reason: str) -> None:
        """Start draining (safe in a signal handler: it only sets fields); ``run`` does the rest."""
        if self.since is None:
            self.since, self.reason = time.monotonic(), reason

    def cut_now(self) -> None:
        """End the wait now (a second signal)."""
        self._cut_now = True

    def refuse_new(self) -> None:
        """Raise the 503 a request gets once the drain has begun."""
        if self.since is not None:
            raise GatewayError(503, f"the gateway is shutting down ({self.reason}) and takes no new requests; "
                               "retry on another replica", type_="server_error", code="shutting_down",
                               headers={"retry-after": "1", "connection": "close"}, outcome="shutting_down")

    def readiness(self) -> JSONResponse:
        return JSONResponse({"status": "draining", "reason": f"{self.reason}: finishing {self.in_flight} request(s) "
                             f"in flight, new requests get 503"}, status_code=503)

    async def run(self, stop: Callable[[], None]) -> None:
        """Wait for the requests in flight (up to the timeout), end the rest, then ``stop()`` the server."""
        timeout = self.timeout_s()
        logger.warning("ragtrim serve: %s: draining, %d request(s) in flight get up to %g s (serve.drain_timeout_s); "
                       "readiness and new requests answer 503", self.reason, self.in_flight, timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._active and not self._cut_now and loop.time() < deadline:
            await asyncio.sleep(0.02)
        if self._active:
            self._cutting = True
            for task, exchange in list(self._active.items()):
                exchange.cut = True
                task.cancel()
            end_by = loop.time() + END_WAIT_S
            while self._active and loop.time() < end_by:
                await asyncio.sleep(0.02)
        stop()

    async def serve(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Run one request in the server's task for it (no task of its own: nothing added per request but a dict
        entry); when the drain cuts it, the cancellation ends here and its answer is ended as well as HTTP allows."""
        task = asyncio.current_task()
        if task is None:  # not under asyncio (a test client's thread): nothing to cut
            await app(scope, receive, send)
            return
        exchange = _Exchange(send, scope)
        self._active[task] = exchange
        try:
            await app(scope, receive, exchange.send)
        except asyncio.CancelledError:
            if not exchange.cut:  # the server's own cancellation
                raise
            task.uncancel()  # the cut, not news: no traceback
            await exchange.end(self.timeout_s())
        finally:
            self._active.pop(task, None)


class _Exchange:
    """What a request has sent so far, so that the drain can end it in the right way."""

    def __init__(self, send: Send, scope: Scope) -> None:
        self._send = send
        given = dict(scope.get("headers", [])).get(b"x-request-id", b"")
        self.request_id = given.decode("latin-1")[:128] or "-"
        self.started = self.complete = self.event_stream = self.cut = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            for name, value in message.get("headers", []):
                if name == b"x-request-id":
                    self.request_id = value.decode("latin-1")
                elif name == b"content-type":
                    self.event_stream = value.startswith(b"text/event-stream")
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def end(self, timeout_s: float) -> None:
        if self.complete:
            return
        message = (f"the gateway is shutting down: this request was still running after serve.drain_timeout_s "
                   f"({timeout_s:g} s); retry it")
        if not self.started:  # waiting for a slot or a non-streamed answer: a plain 503
            err = GatewayError(503, message, type_="server_error", code="shutting_down",
                               headers={"retry-after": "1", "connection": "close"}, outcome="shutting_down")
            response = err.response(self.request_id)
            await self._send({"type": "http.response.start", "status": 503, "headers": response.raw_headers})
            await self._send({"type": "http.response.body", "body": response.body, "more_body": False})
            what = "answered 503 shutting_down"
        elif self.event_stream:
            event = {"error": {"message": message, "type": "server_error", "param": None, "code": "shutting_down"}}
            body = b"data: " + json.dumps(event).encode() + b"\n\ndata: [DONE]\n\n"
            await self._send({"type": "http.response.body", "body": body, "more_body": False})
            what = "ended its stream with an error event and [DONE]"
        else:  # a body passed through as it arrives has no place for an error: it ends short, visibly broken
            what = "closed its unfinished answer"
        self.complete = True
        logger.warning("ragtrim serve: request %s still running after the drain timeout (%g s): %s",
                       self.request_id, timeout_s, what)


class DrainMiddleware:
    """Readiness answers 503 while draining; every other request but the probes and metrics runs under
    ``Drain.serve``."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNTRACKED_PATHS:
            if scope["type"] == "http" and scope["path"] == "/health/readiness" and self.drain.draining:
                await self.drain.readiness()(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        await self.drain.serve(self.app, scope, receive, send)


class DrainingServer(uvicorn.Server):
    """uvicorn's server whose SIGTERM and SIGINT start a drain instead of its fixed graceful shutdown."""

    def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
        super().__init__(config)
        self.drain = drain
        self._drain_task: asyncio.Task[None] | None = None
        self._signals = 0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self.should_exit or self._signals > 2:  # the drain is over, or a third signal: uvicorn's own handling
            super().handle_exit(sig, frame)
        elif self.drain.draining:
            self.drain.cut_now()
        else:
            self.drain.begin(f"got {signal.Signals(sig).name}")

    async def on_tick(self, counter: int) -> bool:
        if self.drain.draining and self._drain_task is None:
            self._drain_task = asyncio.ensure_future(self.drain.run(self._stop))
        return await super().on_tick(counter)

    def _stop(self) -> None:
        self.should_exit = True


def serve_with_drain(app: Any, drain: Drain, **uvicorn_options: Any) -> None:
    """``uvicorn.run`` for ``app`` with the drain handling SIGTERM and SIGINT."""
    # The drain has ended or cut every tracked request by the time uvicorn shuts down: its own grace period only
    # covers what the drain does not track (a probe, a body still arriving).
    config = uvicorn.Config(app, timeout_graceful_shutdown=2, **uvicorn_options)
    DrainingServer(config, drain).run()
