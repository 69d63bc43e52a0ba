"""Admission of a request: the caller's per-key rate limits (requests and tokens per window, kept in the rate store)
and its concurrency slots (the long-request lane, the key's own, the org's), taken in one fixed order.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Protocol

from ragtrim.serve.config import GatewayConfig
from ragtrim.serve.limiter import LimiterWatch
from ragtrim.serve.limits import FairGate, Gate, RateDecision, SharedGate, StateUnavailable
from ragtrim.serve.metrics import GatewayMetrics
from ragtrim.serve.rate_store import RateStore, RedisRateStore, RedisSlots
from ragtrim.serve.responses import GatewayError, rate_headers


def state_unavailable(exc: Exception, what: str) -> GatewayError:
    return GatewayError(503, f"{what} state is unavailable and this gateway fails closed ({exc})",
                        type_="server_error", code="state_unavailable", outcome="state_unavailable",
                        headers={"retry-after": "1"})


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    org: str
    key_id: str  # a hash of the API key: what the rate store and the log see, never the key itself
    rpm: int | None
    tpm: int | None
    concurrency: int | None = None


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16] if key else "anonymous"


class Queued(Protocol):
    """Where the time a request waited for its slots is added up (the request's record)."""

    queue_ms: float


class Admission:
    """The rate store and the concurrency gates of one gateway process (gates are created on first use)."""

    def __init__(self, config: GatewayConfig, store: RateStore, metrics: GatewayMetrics,
                 watch: LimiterWatch | None = None) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics
        self.watch = watch if watch is not None else LimiterWatch(metrics,
                                                                  fail_open=lambda: self.config.limits.fail_open)
        lim = config.limits
        # With Redis state, concurrency slots are shared by replicas too (leases in Redis).
        self.slots = RedisSlots(store) if isinstance(store, RedisRateStore) else None
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
                          fail_open=self.config.limits.fail_open, on_state_error=self._slots_failed,
                          on_state_ok=self.watch.worked)

    def _slots_failed(self, exc: StateUnavailable, admitted: bool) -> None:
        self.metrics.state_errors.inc()
        self.watch.failed(exc, limit="slots", decided="admitted" if admitted else "refused")

    def reconfigure(self, config: GatewayConfig) -> None:
        """Apply reloaded limits to the gates in place: requests in flight keep (and give back) the slots they hold,
        waiters stay queued, a raised capacity lets waiters in at once, a lowered one drains to its new size. A
        gate whose limit is gone lets its waiters through and is dropped."""
        self.config = config
        lim = config.limits
        unlimited = 1 << 30
        for org, gate in list(self.org_gates.items()):
            cap = config.org_concurrency(org)
            if gate is None or cap is None:
                del self.org_gates[org]  # made again, with the new limit, on next use
                if gate is not None:
                    gate.set_capacity(unlimited)
            else:
                gate.set_capacity(cap)
        concurrency = {key_id(k): kc.concurrency for k, kc in config.keys.items()}
        for kid, gate in list(self.key_gates.items()):
            cap = concurrency.get(kid)
            if cap is None:
                del self.key_gates[kid]
                gate.set_capacity(unlimited)
            else:
                gate.set_capacity(cap)
        if lim.long_request_tokens is None:
            if self.long_gate is not None:
                self.long_gate.set_capacity(unlimited)
                self.long_gate = None
        elif self.long_gate is None:
            self.long_gate = self._gate(FairGate(name="long-request lane", capacity=lim.long_concurrency,
                                                 max_queued=lim.max_queued,
                                                 max_queued_per_user=lim.max_queued_per_user), "long")
        else:
            self.long_gate.set_capacity(lim.long_concurrency)
        for gate in [*self.org_gates.values(), *self.key_gates.values(), self.long_gate]:
            local = gate.local if isinstance(gate, SharedGate) else gate
            if isinstance(local, FairGate):
                per_user = lim.max_queued_per_user
                if local.name.startswith("key "):
                    local.max_queued = lim.max_queued if per_user is None else per_user
                else:
                    local.max_queued, local.max_queued_per_user = lim.max_queued, per_user

    # -- rate limits ------------------------------------------------------------------------------------------------
    @property
    def per_window(self) -> str:
        """The rate window in words: ``per minute`` for the default 60 s, else ``per 4 s window``."""
        window_s = self.config.limits.window_s
        return "per minute" if window_s == 60 else f"per {window_s:g} s window"

    async def rate(self, ident: Identity, tokens: int) -> RateDecision | None:
        """Charge one request and ``tokens`` to the key's limits per ``limits.window_s`` (None: the key has none); a request
        over a limit is refused with a 429 that says when to retry."""
        if ident.rpm is None and ident.tpm is None:
            return None
        try:
            decision = await self.store.acquire(ident.key_id, ident.rpm, ident.tpm, tokens)
        except StateUnavailable as exc:
            self.metrics.state_errors.inc()
            fail_open = self.config.limits.fail_open
            self.watch.failed(exc, limit="rate", decided="admitted" if fail_open else "refused")
            if fail_open:
                return RateDecision(True, None, None, reason="state_unavailable")
            raise state_unavailable(exc, "rate-limit") from None
        self.watch.worked()
        if not decision.admitted:
            wait = decision.retry_after_s
            headers = rate_headers(decision)
            if math.isinf(wait):
                what = "tokens" if decision.reason == "tokens" else "requests"
                # Waiting cannot help: tell the OpenAI SDKs not to retry (they honour x-should-retry).
                raise GatewayError(429, f"this request needs {tokens} {what}, more than the key's whole limit of "
                                   f"{ident.tpm if what == 'tokens' else ident.rpm} {what} {self.per_window}; lower "
                                   "max_tokens or the prompt", type_=what, code="rate_limit_exceeded",
                                   headers={**headers, "x-should-retry": "false"}, outcome="rate_limited")
            headers["retry-after"] = str(max(1, math.ceil(wait)))
            limit = ident.rpm if decision.reason == "requests" else ident.tpm
            raise GatewayError(429, f"rate limit reached for user {ident.user!r} on {decision.reason} "
                               f"{self.per_window}: limit {limit}; retry in {wait:.1f} s", type_=decision.reason,
                               code="rate_limit_exceeded", headers=headers, outcome="rate_limited")
        return decision

    async def adjust(self, key_id: str, requests_delta: int, tokens_delta: int) -> None:
        """Correct a key's charge; an unavailable store is counted, not raised (the charge was an estimate)."""
        try:
            await self.store.adjust(key_id, requests_delta, tokens_delta)
        except StateUnavailable as exc:
            self.metrics.state_errors.inc()
            self.watch.failed(exc, limit="rate", decided=None)

    # -- concurrency slots ------------------------------------------------------------------------------------------
    def org_gate(self, org: str) -> Gate | None:
        if org not in self.org_gates:
            cap = self.config.org_concurrency(org)
            lim = self.config.limits
            self.org_gates[org] = (self._gate(FairGate(name=f"org {org!r}", capacity=cap, max_queued=lim.max_queued,
                                                       max_queued_per_user=lim.max_queued_per_user), f"org:{org}")
                                   if cap is not None else None)
        return self.org_gates[org]

    async def take_slots(self, rec: Queued, ident: Identity, prompt_tokens: int) -> list[Gate]:
        """Every slot the request needs, waiting in each queue until the shared deadline; raises QueueFull or
        QueueTimeout (having given back what it took)."""
        lim = self.config.limits
        deadline = time.monotonic() + lim.queue_timeout_s
        gates: list[Gate] = []
        lanes: list[tuple[str, Gate]] = []
        if self.long_gate is not None and lim.long_request_tokens is not None \
                and prompt_tokens > lim.long_request_tokens:
            lanes.append(("long", self.long_gate))
        if ident.concurrency is not None:
            key_gate = self.key_gates.get(ident.key_id)
            if key_gate is None:
                per_user = lim.max_queued_per_user
                key_gate = self.key_gates[ident.key_id] = self._gate(FairGate(
                    name=f"key of user {ident.user!r}", capacity=ident.concurrency,
                    max_queued=lim.max_queued if per_user is None else per_user), f"key:{ident.key_id}")
            lanes.append(("key", key_gate))
        org_gate = self.org_gate(ident.org)
        if org_gate is not None:
            lanes.append(("org", org_gate))
        try:
            for lane, gate in lanes:  # always long lane, key, then org: one order, no deadlock
                try:
                    waited = await gate.acquire(ident.user, deadline)
                except StateUnavailable as exc:  # a shared gate with fail_open = false
                    raise state_unavailable(exc, "concurrency-slot") from None
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

    def release(self, gate: Gate, org: str) -> None:
        gate.release()
        if gate.name.startswith("org "):
            self.metrics.in_flight.labels(org).dec()
