"""The gateway's probes: ``/health/liveness`` (the process answers), ``/health/readiness`` (the upstream serves its
model list and the limiter's state store answers; one check in flight at a time, its answer kept for a second) and ``/healthz`` (the
limiter's state store), none of which needs a key.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragtrim._util.redact import redact_url
from ragtrim.serve.admission import Admission
from ragtrim.serve.config import GatewayConfig
from ragtrim.serve.rate_store import RateStore
from ragtrim.serve.upstream import Upstream, UpstreamError

READINESS_CACHE_S = 1.0
"""How long a readiness answer is kept: probes cannot make more upstream calls than one per this (and the check)."""

Readiness = tuple[float, int, dict[str, Any]]  # (monotonic time the check ended, status, body)


def upstream_verdict(status: int, url: str) -> str:
    """What the status of the upstream's ``GET /models`` says about serving a request: ``ok`` (2xx, 3xx, and 429,
    which says the server and the path are right and only its own rate limit is spent), else why not. A 404 is the
    usual sign of a URL without its API root (``.../v1``): every request would get ``upstream_404``; a 401 or 403
    refuses the gateway's credentials, which every request would meet too."""
    if status < 400 or status == 429:
        return "ok" if status < 400 else "ok (answers 429: rate limited)"
    where = f"GET {redact_url(url)}/models"
    if status == 404:
        return (f"answers 404: {where} not found; upstream.url must be the API root the endpoints hang under, "
                "usually ending in /v1")
    if status in (401, 403):
        return f"answers {status}: {where} refuses the gateway's credentials (upstream.api_key)"
    return f"answers {status}: {where}"


class Probed(Protocol):
    """What the probes read of the gateway (its config changes on a reload)."""

    @property
    def config(self) -> GatewayConfig: ...

    @property
    def store(self) -> RateStore: ...

    @property
    def upstream(self) -> Upstream: ...

    @property
    def admission(self) -> Admission: ...


class Probes:
    def __init__(self, gateway: Probed) -> None:
        self.gateway = gateway
        self._readiness: Readiness | None = None
        self._flight: asyncio.Future[Readiness] | None = None

    async def liveness(self, request: Request) -> Response:
        """The process answers: for a liveness probe (nothing else is checked)."""
        return JSONResponse({"status": "alive"})

    async def healthz(self, request: Request) -> Response:
        ok, state = await self.limiter_state()
        body = {"status": "ok" if ok or self.gateway.config.limits.fail_open else "degraded", **state}
        return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)

    async def readiness(self, request: Request) -> Response:
        """Ready to take requests: the upstream (or its fallback) answers, and the state store when one is
        configured (with ``fail_open = true`` a gateway without Redis still serves, so it stays ready). One check
        at a time: probes that come while it runs share its answer (single flight), and the answer is kept for a
        second, so that probes cannot flood the upstream however many arrive and however slow it is."""
        cached = self._readiness
        if cached is None or time.monotonic() - cached[0] >= READINESS_CACHE_S:
            flight = self._flight
            if flight is None:
                flight = self._flight = asyncio.ensure_future(self._check_readiness())
                flight.add_done_callback(self._landed)
            # shield: a probe whose client leaves must not cancel the check the others wait for
            cached = await asyncio.shield(flight)
        _, status, body = cached
        return JSONResponse(body, status_code=status)

    def _landed(self, flight: asyncio.Future[Readiness]) -> None:
        self._flight = None
        if not flight.cancelled() and flight.exception() is None:
            self._readiness = flight.result()

    async def _check_readiness(self) -> Readiness:
        upstream = await self._probe_upstream(fallback=False)
        if upstream != "ok" and self.gateway.upstream.has_fallback:
            fallback = await self._probe_upstream(fallback=True)
            upstream = "ok (fallback)" if fallback == "ok" else f"{upstream}; fallback {fallback}"
        state_ok, state = await self.limiter_state()
        ready = upstream.startswith("ok") and (state_ok or self.gateway.config.limits.fail_open)
        body: dict[str, Any] = {"status": "ready" if ready else "not ready", "upstream": upstream, **state}
        return time.monotonic(), 200 if ready else 503, body

    async def _probe_upstream(self, *, fallback: bool) -> str:
        timeout = min(2.0, self.gateway.config.upstream.connect_timeout_s + 1.0)
        try:
            resp = await asyncio.wait_for(self.gateway.upstream.request("GET", "/models", fallback=fallback),
                                          timeout)
        except (UpstreamError, TimeoutError) as exc:
            return f"unreachable ({type(exc).__name__})"
        await resp.close()
        return upstream_verdict(resp.status, self.gateway.config.upstream.fallback_url if fallback
                                else self.gateway.config.upstream.url)

    async def limiter_state(self) -> tuple[bool, dict[str, str]]:
        """Whether the limiter can run (its state store takes a write), and what a probe answer says about it:
        ``state`` (``memory``, ``redis ok``, ``redis unreachable``, ``redis refuses writes``, ``redis refuses the
        password``), then, when it cannot, ``state_error`` and what ``limits.fail_open`` does meanwhile."""
        config = self.gateway.config
        if config.limits.state == "memory":
            return True, {"state": "memory"}
        problem = await self.gateway.store.probe()
        watch = self.gateway.admission.watch
        if problem is None:
            watch.worked()
            return True, {"state": "redis ok"}
        watch.failed(problem, limit="rate", decided=None)
        what, _, detail = problem.partition(" (")
        return False, {"state": f"redis {what}", "state_error": detail.removesuffix(")"),
                       "limits": "off: failing open, requests are admitted without rate and concurrency limits"
                       if config.limits.fail_open else "failing closed: requests get 503 state_unavailable"}
