"""Rate windows (rpm/tpm as sliding-window counters) and concurrency gates (org slots and the long lane).

The window arithmetic is pure (``window_decision``) and shared by the memory and Redis stores; ``FairGate`` queues
waiters FIFO per user and serves users round robin, so one noisy user cannot take every slot of an org.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from ragtrim.errors import ServeError


@dataclass(frozen=True, slots=True)
class WindowState:
    """Counts of one limit in the previous and current fixed windows, how far into the current one we are, and
    where (as fractions of their window) each window's first and last charges fell. The defaults, (0, 1), say
    nothing about when the charges came, and give the classic estimate that spreads them over the whole window."""

    previous: float
    current: float
    elapsed_fraction: float
    previous_first: float = 0.0
    previous_last: float = 1.0
    current_first: float = 0.0
    current_last: float = 1.0


def previous_weight(w: WindowState) -> float:
    """The share of the previous window's count still inside the last window length: its charges are taken as
    spread evenly between its first and its last charge, so each leaves one window length after it came and the
    last is gone by ``previous_last`` into this window (with the defaults, ``1 - elapsed``: Cloudflare's and the
    ``limits`` library's estimate)."""
    return _weight_at(w.elapsed_fraction, w.previous_first, w.previous_last)


def _weight_at(e: float, first: float, last: float) -> float:
    if e >= last:
        return 0.0
    if e <= first:
        return 1.0
    return (last - e) / (last - first)


def _when_weight_is(ratio: float, first: float, last: float) -> float:
    """The earliest fraction of a window at which ``_weight_at`` has fallen to ``ratio``."""
    if ratio >= 1:
        return 0.0
    if ratio <= 0:
        return last
    return last - (last - first) * ratio


def weighted_count(w: WindowState) -> float:
    """The sliding-window estimate: the previous window's count weighted by ``previous_weight``, plus the current
    window's count."""
    return max(0.0, w.previous) * previous_weight(w) + max(0.0, w.current)


def seconds_until_fits(w: WindowState, limit: float, cost: float, window_s: float) -> float:
    """How long until ``cost`` more fits under ``limit`` (0 when it fits now; inf when it never can). With the
    charges' times known, never more than one window length: every charge has left the window by then."""
    if cost > limit:
        return math.inf
    if weighted_count(w) + cost <= limit:
        return 0.0
    now = w.elapsed_fraction
    room = limit - cost - max(0.0, w.current)
    prev = max(0.0, w.previous)
    if room >= 0 and prev > 0:
        # Still in this window: wait until the previous window's weight has decayed enough.
        return max(0.0, (_when_weight_is(room / prev, w.previous_first, w.previous_last) - now) * window_s)
    # Only the next window can fit it: there the current count becomes the decaying "previous".
    cur = max(0.0, w.current)
    at = 0.0 if cur <= 0 else _when_weight_is((limit - cost) / cur, w.current_first, w.current_last)
    return (1.0 - now + at) * window_s


def seconds_until_reset(w: WindowState, window_s: float) -> float:
    """How long until the window is back to its full allowance: until its last charge has left it."""
    now = w.elapsed_fraction
    if w.current > 0:
        return (1.0 - now + w.current_last) * window_s
    if w.previous > 0:
        return max(0.0, w.previous_last - now) * window_s
    return 0.0


@dataclass(frozen=True, slots=True)
class LimitStatus:
    """One limit (requests or tokens) after a decision: for the x-ratelimit-* headers."""

    limit: int
    remaining: int
    reset_s: float
    retry_after_s: float


@dataclass(frozen=True, slots=True)
class RateDecision:
    admitted: bool
    requests: LimitStatus | None
    tokens: LimitStatus | None
    reason: str = ""  # "requests" or "tokens" when rejected; "state_unavailable" when the store failed open

    @property
    def retry_after_s(self) -> float:
        waits = [s.retry_after_s for s in (self.requests, self.tokens) if s is not None]
        return max(waits) if waits else 0.0


def charged(w: WindowState, amount: float) -> WindowState:
    """``w`` after a charge of ``amount`` now (nothing changes for 0)."""
    if not amount:
        return w
    first = w.current_first if w.current > 0 else w.elapsed_fraction
    return replace(w, current=w.current + amount, current_first=first, current_last=w.elapsed_fraction)


def window_decision(req: WindowState | None, tok: WindowState | None, rpm: int | None, tpm: int | None,
                    tokens: int, window_s: float) -> RateDecision:
    """Admit one request costing ``tokens`` when both limits have room (nothing is charged otherwise)."""
    req_wait = seconds_until_fits(req, rpm, 1, window_s) if req is not None and rpm is not None else 0.0
    tok_wait = seconds_until_fits(tok, tpm, tokens, window_s) if tok is not None and tpm is not None else 0.0
    admitted = req_wait == 0.0 and tok_wait == 0.0
    charge_r = 1 if admitted else 0
    charge_t = tokens if admitted else 0
    r_status = t_status = None
    if req is not None and rpm is not None:
        used = weighted_count(req) + charge_r
        reset = seconds_until_reset(charged(req, charge_r), window_s)
        r_status = LimitStatus(rpm, max(0, math.floor(rpm - used)), reset, req_wait)
    if tok is not None and tpm is not None:
        used = weighted_count(tok) + charge_t
        reset = seconds_until_reset(charged(tok, charge_t), window_s)
        t_status = LimitStatus(tpm, max(0, math.floor(tpm - used)), reset, tok_wait)
    # A request that can never fit its tokens is refused for them, even when the requests are spent as well.
    reason = "" if admitted else ("requests" if req_wait > 0 and not math.isinf(tok_wait) else "tokens")
    return RateDecision(admitted, r_status, t_status, reason)


def format_reset(seconds: float) -> str:
    """OpenAI's reset format: ``1s``, ``6m0s``, ``120ms``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    s = math.ceil(seconds * 10) / 10
    minutes, rest = divmod(s, 60)
    rest_text = f"{rest:.1f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{rest_text}s" if minutes else f"{rest_text}s"


# -- concurrency ----------------------------------------------------------------------------------------------------
class QueueFull(ServeError):
    """The gate's queue already holds ``max_queued`` waiters."""


class StateUnavailable(ServeError):
    """The shared state (Redis) could not be reached in time."""


class QueueTimeout(ServeError):
    """No slot freed within the queue timeout."""


class FairGate:
    """``capacity`` slots; waiters queue FIFO per user, and a freed slot goes to the next user in round robin.

    A freed slot is handed to the chosen waiter directly (no stampede). A waiter cancelled after being handed a slot
    passes it on, so cancellation never leaks a slot.
    """

    def __init__(self, *, name: str, capacity: int, max_queued: int, max_queued_per_user: int | None = None) -> None:
        self.name = name
        self.capacity = capacity
        self.max_queued = max_queued
        self.max_queued_per_user = max_queued_per_user
        self.in_use = 0
        self._waiters: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._queued = 0

    @property
    def queued(self) -> int:
        return self._queued

    async def acquire(self, user: str, deadline: float) -> float:
        """Take a slot before ``deadline`` (``time.monotonic()`` clock); return the seconds waited."""
        if self.in_use < self.capacity and self._queued == 0:
            self.in_use += 1
            return 0.0
        q = self._waiters.get(user)
        if self._queued >= self.max_queued or (
                self.max_queued_per_user is not None and len(q or ()) >= self.max_queued_per_user):
            raise QueueFull(self.name)
        t0 = time.monotonic()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if q is None:
            q = self._waiters[user] = deque()
        q.append(fut)
        self._queued += 1
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout=max(0.0, deadline - t0))
        except (TimeoutError, asyncio.CancelledError) as exc:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot arrived as we gave up: pass it on
            else:
                fut.cancel()
                self._forget(user, fut)
            if isinstance(exc, TimeoutError):
                raise QueueTimeout(self.name) from None
            raise
        return time.monotonic() - t0

    def _forget(self, user: str, fut: asyncio.Future[None]) -> None:
        q = self._waiters.get(user)
        if q is None:
            return
        try:
            q.remove(fut)
            self._queued -= 1
        except ValueError:
            return
        if not q:
            del self._waiters[user]

    def set_capacity(self, capacity: int) -> None:
        """A new capacity (a config reload): extra slots go to waiters at once; with fewer, slots in use drain
        down to it before a waiter gets one."""
        self.capacity = capacity
        while self.in_use < self.capacity and self._queued:
            self.in_use += 1
            self.release()

    def release(self) -> None:
        if self.in_use > self.capacity:  # over a lowered capacity: this slot goes away
            self.in_use -= 1
            return
        while self._waiters:
            user, q = next(iter(self._waiters.items()))
            fut = q.popleft()
            self._queued -= 1
            if q:
                self._waiters.move_to_end(user)  # round robin: this user goes to the back
            else:
                del self._waiters[user]
            if not fut.done():
                fut.set_result(None)  # the slot passes to the waiter; in_use is unchanged
                return
        self.in_use -= 1


class Gate(Protocol):
    name: str

    @property
    def in_use(self) -> int: ...

    @property
    def queued(self) -> int: ...

    async def acquire(self, user: str, deadline: float) -> float: ...

    def release(self) -> None: ...

    def set_capacity(self, capacity: int) -> None: ...


class SlotLeases(Protocol):
    async def take(self, gate: str, capacity: int, lease: str, lease_ms: int) -> bool: ...

    async def give_back(self, gate: str, lease: str) -> None: ...


class SharedGate:
    """A ``FairGate`` for the queue order inside this replica, plus leases in shared state (Redis) that cap the
    slots held across all replicas. A request first takes a local slot, then polls for a lease until its deadline.

    When the shared state fails, ``fail_open`` keeps the local limit only; otherwise the error propagates.
    """

    def __init__(self, local: FairGate, leases: SlotLeases, *, key: str, lease_ms: int, fail_open: bool,
                 on_state_error: Callable[[StateUnavailable, bool], None] | None = None,
                 on_state_ok: Callable[[], None] | None = None) -> None:
        self.local = local
        self.name = local.name
        self.leases = leases
        self.key = key
        self.lease_ms = lease_ms
        self.fail_open = fail_open
        self.on_state_error = on_state_error  # (the error, whether fail_open admits the request anyway)
        self.on_state_ok = on_state_ok
        self._held: list[str | None] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_use(self) -> int:
        return self.local.in_use

    @property
    def queued(self) -> int:
        return self.local.queued

    async def acquire(self, user: str, deadline: float) -> float:
        t0 = time.monotonic()
        await self.local.acquire(user, deadline)
        lease: str | None = uuid.uuid4().hex
        delay = 0.005
        try:
            while True:
                try:
                    taken = await self.leases.take(self.key, self.local.capacity, lease or "", self.lease_ms)
                except StateUnavailable as exc:
                    if self.on_state_error is not None:
                        self.on_state_error(exc, self.fail_open)
                    if not self.fail_open:
                        raise
                    lease = None
                    break
                if self.on_state_ok is not None:
                    self.on_state_ok()
                if taken:
                    break
                if time.monotonic() + delay > deadline:
                    raise QueueTimeout(self.name)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)
        except BaseException:
            self.local.release()
            raise
        self._held.append(lease)
        return time.monotonic() - t0

    def set_capacity(self, capacity: int) -> None:
        self.local.set_capacity(capacity)  # the leases in Redis are capped by the local capacity too

    def release(self) -> None:
        lease = self._held.pop() if self._held else None
        if lease is not None:
            task = asyncio.ensure_future(self.leases.give_back(self.key, lease))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.local.release()
