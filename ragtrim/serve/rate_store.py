"""Where rate windows live: ``MemoryRateStore`` (one process) or ``RedisRateStore`` (shared by replicas).

Both keep per-key request and token counts in fixed windows and decide with ``limits.window_decision``; the Redis
store does the read-check-charge in one Lua script on the server's clock, so replicas never race or drift.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from ragtrim._util.redact import redact, redact_url, register_url_secrets
from ragtrim.serve.limits import RateDecision, StateUnavailable, WindowState, window_decision

try:
    from redis.exceptions import RedisError

    _REDIS_ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError, TimeoutError)
except ImportError:  # pragma: no cover - the memory store needs no redis
    _REDIS_ERRORS = (OSError, TimeoutError)


T = TypeVar("T")
_PING_ERRORS: tuple[type[BaseException], ...] = (*_REDIS_ERRORS, StateUnavailable)


class Breaker:
    """A short circuit breaker: after a failure, calls fail at once for ``open_s`` seconds instead of each waiting
    out the timeout; then one call (the probe) tries again while the others keep failing fast, and its success
    closes the breaker. ``open_s = 0`` turns it off."""

    def __init__(self, open_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.open_s = open_s
        self.clock = clock
        self._open_until = 0.0
        self._tripped = False
        self._probing = False
        self.last_error: BaseException | None = None  # what tripped it: the cause of the fast failures

    @property
    def is_open(self) -> bool:
        return self._tripped and (self._probing or self.clock() < self._open_until)

    async def call(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        if self.open_s > 0 and self._tripped:
            if self._probing or self.clock() < self._open_until:
                raise StateUnavailable(f"{what}: circuit open after a failure (retried every {self.open_s:g} s)"
                                       ) from self.last_error
            self._probing = True
        try:
            result = await fn()
        except BaseException as exc:
            self._probing = False
            if isinstance(exc, _REDIS_ERRORS):
                self._tripped = True
                self._open_until = self.clock() + self.open_s
                self.last_error = exc
            raise
        self._probing = False
        self._tripped = False
        return result


class RateStore(Protocol):
    async def acquire(self, key: str, rpm: int | None, tpm: int | None, tokens: int) -> RateDecision: ...

    async def adjust(self, key: str, requests_delta: int, tokens_delta: int) -> None: ...

    async def ping(self) -> bool: ...

    async def probe(self) -> str | None:
        """None when the limiter can run; else what is wrong (``unreachable``, ``refuses writes``, ...)."""
        ...

    async def close(self) -> None: ...


def _give(w: list[float], previous: int, delta: float) -> None:
    """Add ``delta`` to the current window's count at ``previous + 1``. A refund beyond the current window's count
    takes the rest from the previous window: its charge came before the window turned, and given back to the
    current window it would either vanish (the estimate floors a count at 0) or credit a later request."""
    if delta >= 0:
        w[previous + 1] += delta
        return
    here = min(-delta, max(0.0, w[previous + 1]))
    w[previous + 1] -= here
    w[previous] -= min(-delta - here, max(0.0, w[previous]))


class MemoryRateStore:
    """Windows in a dict; exact for one gateway process."""

    def __init__(self, *, window_s: float = 60.0) -> None:
        self.window_s = window_s
        # key -> [window index, previous requests, current requests, previous tokens, current tokens,
        #         previous first, previous last, current first, current last]: the charges' times as fractions of
        #         their window (first -1: no charge yet)
        self._windows: dict[str, list[float]] = {}

    def _roll(self, key: str, now: float) -> tuple[list[float], float]:
        idx = int(now // self.window_s)
        frac = (now - idx * self.window_s) / self.window_s
        w = self._windows.get(key)
        if w is None:
            w = self._windows[key] = [idx, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 1.0]
        elif w[0] != idx:
            if w[0] == idx - 1:
                w[:] = [idx, w[2], 0.0, w[4], 0.0, max(0.0, w[7]), w[8], -1.0, 1.0]
            else:
                w[:] = [idx, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 1.0]
        return w, frac

    @staticmethod
    def _stamp(w: list[float], frac: float) -> None:
        if w[7] < 0:
            w[7] = frac
        w[8] = frac

    async def acquire(self, key: str, rpm: int | None, tpm: int | None, tokens: int) -> RateDecision:
        w, frac = self._roll(key, time.time())
        times = {"previous_first": w[5], "previous_last": w[6], "current_first": max(0.0, w[7]),
                 "current_last": w[8]}
        decision = window_decision(WindowState(w[1], w[2], frac, **times), WindowState(w[3], w[4], frac, **times),
                                   rpm, tpm, tokens, self.window_s)
        if decision.admitted:
            w[2] += 1
            w[4] += tokens
            self._stamp(w, frac)
        return decision

    async def adjust(self, key: str, requests_delta: int, tokens_delta: int) -> None:
        if requests_delta or tokens_delta:
            w, frac = self._roll(key, time.time())
            _give(w, 1, requests_delta)
            _give(w, 3, tokens_delta)
            if requests_delta > 0 or tokens_delta > 0:  # a late charge stays in the window for a window length
                self._stamp(w, frac)

    async def ping(self) -> bool:
        return True

    async def probe(self) -> str | None:
        return None

    async def close(self) -> None:
        return None


# KEYS[1]: key prefix. ARGV: window ms, rpm (-1: none), tpm (-1: none), tokens.
# Returns {admitted, prev requests, cur requests, prev tokens, cur tokens, fraction * 1e6, prev first, prev last,
# cur first, cur last}: counts before charging, and where each window's first and last charges fell (fractions * 1e6,
# -1 when unknown: a window written before the times were kept).
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local w = tonumber(ARGV[1])
local rpm = tonumber(ARGV[2])
local tpm = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
local idx = math.floor(now / w)
local frac = (now - idx * w) / w
local cur = KEYS[1] .. ':' .. idx
local prev = KEYS[1] .. ':' .. (idx - 1)
local pv = redis.call('HMGET', prev, 'r', 't')
local cv = redis.call('HMGET', cur, 'r', 't')
local pr = math.max(0, tonumber(pv[1] or '0'))
local pt = math.max(0, tonumber(pv[2] or '0'))
local cr = math.max(0, tonumber(cv[1] or '0'))
local ct = math.max(0, tonumber(cv[2] or '0'))
local pf = tonumber(redis.call('HGET', prev, 'f') or '-1')
local pl = tonumber(redis.call('HGET', prev, 'l') or '-1')
local cf = tonumber(redis.call('HGET', cur, 'f') or '-1')
local cl = tonumber(redis.call('HGET', cur, 'l') or '-1')
-- the previous window's weight: its charges spread evenly between its first and last (limits.previous_weight)
local f0 = 0
local l0 = 1
if pf >= 0 and pl >= 0 then f0 = pf / 1000000; l0 = pl / 1000000 end
local weight = 1
if frac >= l0 then weight = 0 elseif frac > f0 then weight = (l0 - frac) / (l0 - f0) end
local ok = 1
if rpm >= 0 and pr * weight + cr + 1 > rpm then ok = 0 end
if tpm >= 0 and (tokens > tpm or pt * weight + ct + tokens > tpm) then ok = 0 end
local at = math.floor(frac * 1000000)
if ok == 1 then
  redis.call('HINCRBY', cur, 'r', 1)
  redis.call('HINCRBY', cur, 't', tokens)
  redis.call('HSETNX', cur, 'f', at)
  redis.call('HSET', cur, 'l', at)
  redis.call('PEXPIRE', cur, 2 * w + 1000)
end
return {ok, pr, cr, pt, ct, at, pf, pl, cf, cl}
"""

_ADJUST = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local w = tonumber(ARGV[1])
local idx = math.floor(now / w)
local cur = KEYS[1] .. ':' .. idx
local prev = KEYS[1] .. ':' .. (idx - 1)
-- a refund beyond the current window's count takes the rest from the previous window (charged before it turned)
local function give(field, delta)
  if delta >= 0 then
    redis.call('HINCRBY', cur, field, delta)
    return
  end
  local here = math.min(-delta, math.max(0, tonumber(redis.call('HGET', cur, field) or '0')))
  if here > 0 then redis.call('HINCRBY', cur, field, -here) end
  local rest = -delta - here
  if rest > 0 and redis.call('EXISTS', prev) == 1 then
    local take = math.min(rest, math.max(0, tonumber(redis.call('HGET', prev, field) or '0')))
    if take > 0 then redis.call('HINCRBY', prev, field, -take) end
  end
end
give('r', tonumber(ARGV[2]))
give('t', tonumber(ARGV[3]))
if tonumber(ARGV[2]) > 0 or tonumber(ARGV[3]) > 0 then
  local at = math.floor((now - idx * w) / w * 1000000)
  redis.call('HSETNX', cur, 'f', at)
  redis.call('HSET', cur, 'l', at)
end
redis.call('PEXPIRE', cur, 2 * w + 1000)
return 1
"""


class RedisRateStore:
    """Windows in Redis hashes ``<prefix>:<key>:<window index>``, decided atomically by a Lua script."""

    def __init__(self, *, url: str, window_s: float = 60.0, timeout_s: float = 0.5, breaker_s: float = 2.0,
                 prefix: str = "ragtrim:rl") -> None:
        self.url = url
        register_url_secrets(url)
        self.window_s = window_s
        self.timeout_s = timeout_s
        self.prefix = prefix
        self.breaker = Breaker(breaker_s)
        self._client: Any = None
        self._acquire: Any = None
        self._adjust: Any = None

    @property
    def location(self) -> str:
        """Where the store is, for messages (no password)."""
        return redact_url(self.url)

    def _redis(self) -> Any:
        if self._client is None:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            # No retries: a down Redis must cost one fast failure, then fail_open decides.
            self._client = aioredis.Redis.from_url(
                self.url, socket_timeout=self.timeout_s, socket_connect_timeout=self.timeout_s,
                retry=Retry(NoBackoff(), 0), health_check_interval=0)
            self._acquire = self._client.register_script(_ACQUIRE)
            self._adjust = self._client.register_script(_ADJUST)
        return self._client

    async def acquire(self, key: str, rpm: int | None, tpm: int | None, tokens: int) -> RateDecision:
        self._redis()
        try:
            ok, pr, cr, pt, ct, frac_e6, *times_e6 = await self.call(lambda: self._acquire(
                keys=[f"{self.prefix}:{key}"],
                args=[int(self.window_s * 1000), -1 if rpm is None else rpm, -1 if tpm is None else tpm, tokens]))
        except _REDIS_ERRORS as exc:
            raise StateUnavailable(f"redis at {self.location}: {exc}") from exc
        frac = int(frac_e6) / 1e6
        pf, pl, cf, cl = (int(x) / 1e6 for x in times_e6)
        times = {"previous_first": pf if pf >= 0 and pl >= 0 else 0.0, "previous_last": pl if pf >= 0 and pl >= 0
                 else 1.0, "current_first": cf if cf >= 0 and cl >= 0 else 0.0,
                 "current_last": cl if cf >= 0 and cl >= 0 else 1.0}
        decision = window_decision(WindowState(float(pr), float(cr), frac, **times),
                                   WindowState(float(pt), float(ct), frac, **times), rpm, tpm, tokens, self.window_s)
        admitted = bool(int(ok))
        if decision.admitted != admitted:  # float rounding at the edge: the server's answer is the one charged
            decision = replace(decision, admitted=admitted, reason="" if admitted else decision.reason or "requests")
        return decision

    async def adjust(self, key: str, requests_delta: int, tokens_delta: int) -> None:
        if not (requests_delta or tokens_delta):
            return
        self._redis()
        try:
            await self.call(lambda: self._adjust(keys=[f"{self.prefix}:{key}"],
                                                 args=[int(self.window_s * 1000), requests_delta, tokens_delta]))
        except _REDIS_ERRORS as exc:
            raise StateUnavailable(f"redis at {self.location}: {exc}") from exc

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """One Redis call through the circuit breaker (StateUnavailable at once while it is open)."""
        return await self.breaker.call(f"redis at {self.location}", fn)

    async def ping(self) -> bool:
        return await self.probe() is None

    async def probe(self) -> str | None:
        """A write, as the rate scripts make (a probe key that expires): a Redis that answers PING but refuses
        writes (``maxmemory`` reached under ``noeviction``, a read-only replica) cannot run the limiter."""
        client = self._redis()
        try:
            await self.call(lambda: client.set(f"{self.prefix}:probe", "1", px=10_000))
        except _PING_ERRORS as exc:
            return state_problem(exc)
        return None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def state_problem(exc: BaseException) -> str:
    """What a failure of the state store means, in words a readiness answer starts with: ``unreachable``,
    ``refuses the password``, ``refuses writes``, then the (redacted) error."""
    try:
        from redis.exceptions import AuthenticationError, AuthorizationError, ResponseError
    except ImportError:  # pragma: no cover
        return f"unreachable ({redact(exc)})"
    cause = exc.__cause__ if isinstance(exc, StateUnavailable) and exc.__cause__ is not None else exc
    text = redact(cause) or type(cause).__name__
    if isinstance(cause, (AuthenticationError, AuthorizationError)) or "WRONGPASS" in text or "NOAUTH" in text:
        return f"refuses the password ({text})"
    if isinstance(cause, ResponseError):
        return f"refuses writes ({text})"
    return f"unreachable ({text})"


def make_store(state: str, *, window_s: float, timeout_s: float,
               breaker_s: float = 2.0) -> MemoryRateStore | RedisRateStore:
    if state == "memory":
        return MemoryRateStore(window_s=window_s)
    return RedisRateStore(url=state, window_s=window_s, timeout_s=timeout_s, breaker_s=breaker_s)


# KEYS[1]: the lease set. ARGV: capacity, lease id, lease ms. Expired leases (a crashed replica's) are dropped first.
_TAKE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) + 1000)
  return 1
end
return 0
"""


class RedisSlots:
    """Concurrency slots shared by replicas: a sorted set of leases per gate, scored by expiry time."""

    def __init__(self, store: RedisRateStore, *, prefix: str = "ragtrim:slots") -> None:
        self.store = store
        self.prefix = prefix
        self._take: Any = None

    async def take(self, gate: str, capacity: int, lease: str, lease_ms: int) -> bool:
        client = self.store._redis()
        if self._take is None:
            self._take = client.register_script(_TAKE_SLOT)
        try:
            return bool(int(await self.store.call(
                lambda: self._take(keys=[f"{self.prefix}:{gate}"], args=[capacity, lease, lease_ms]))))
        except _REDIS_ERRORS as exc:
            raise StateUnavailable(f"redis at {self.store.location}: {exc}") from exc

    async def give_back(self, gate: str, lease: str) -> None:
        client = self.store._redis()
        try:
            await self.store.call(lambda: client.zrem(f"{self.prefix}:{gate}", lease))
        except _PING_ERRORS:
            return  # the lease expires on its own
