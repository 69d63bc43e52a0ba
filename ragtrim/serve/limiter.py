"""The limiter's shared state, watched: when Redis cannot run the rate-limit scripts, requests are admitted or refused
as ``limits.fail_open`` says, and never silently: a counter, a gauge, a log line (at most one per interval, however
many requests fail) and the readiness and health answers say so (``LimiterWatch``).

Rate-limit state must not share a Redis with anything that can fill it: vectors (or any other data) that reach
``maxmemory`` make every write fail, and a Redis that evicts keys to make room silently drops rate windows.
``shared_redis_problem`` refuses a config whose ``limits.state`` and vector store are one Redis server;
``check_state_servers`` asks the servers themselves at start-up (one server under two names, an evicting policy).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ragtrim._util.redact import get_logger, redact, redact_url
from ragtrim.errors import ConfigError

if TYPE_CHECKING:  # the config imports this module, and must not need the serve extra
    from ragtrim.serve.metrics import GatewayMetrics

logger = get_logger(__package__)  # the package logger, which `ragtrim serve` sends to stderr

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "ip6-localhost", "0.0.0.0", "::"})
LOG_EVERY_S = 30.0
"""At most one log line per this many seconds while the limiter fails (a down Redis must not flood the log)."""


class LimiterWatch:
    """What this gateway knows about its limiter's state store. ``failed`` is called for every request the limiter
    could not decide (``decided``: ``"admitted"`` by ``fail_open``, ``"refused"`` otherwise) and for every failed
    probe or correction (``decided=None``); ``worked`` whenever the store answers. Log lines about it (the failure,
    and the recovery) come at most once per ``log_every_s``, so a store that flaps or stays down cannot flood the log;
    the counts in each line cover the time since the previous one."""

    def __init__(self, metrics: GatewayMetrics, *, fail_open: Callable[[], bool], log_every_s: float = LOG_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.fail_open = fail_open  # the running config's limits.fail_open (a reload may change it)
        self.log_every_s = log_every_s
        self.clock = clock
        self.failing_since: float | None = None
        self.error = ""
        self._next_line = 0.0
        self._admitted = self._refused = 0  # since the last line

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    def _line_due(self, now: float) -> bool:
        if now < self._next_line:
            return False
        self._next_line = now + self.log_every_s
        return True

    def failed(self, error: BaseException | str, *, limit: str, decided: str | None) -> None:
        """``limit``: ``"rate"`` or ``"slots"``; ``decided``: what happened to the request (None: no request)."""
        now = self.clock()
        self.error = redact(error)
        if self.failing_since is None:
            self.failing_since = now
            self.metrics.limiter_failing.set(1)
        if decided is not None:
            self.metrics.limiter_unavailable.labels(limit, decided).inc()
            if decided == "admitted":
                self._admitted += 1
            else:
                self._refused += 1
        if self._line_due(now):
            logger.error("ragtrim serve: the limiter's state store fails (%s); %s (%d requests admitted without "
                         "limits, %d refused since the last line; this line repeats at most every %.0f s)",
                         self.error, "limits.fail_open = true admits requests WITHOUT their rate and concurrency "
                         "limits" if self.fail_open() else "limits.fail_open = false refuses requests with a 503",
                         self._admitted, self._refused, self.log_every_s)
            self._admitted = self._refused = 0

    def worked(self) -> None:
        if self.failing_since is None:
            return
        now = self.clock()
        if self._line_due(now):
            logger.warning("ragtrim serve: the limiter's state store answers again after %.1f s (%d requests "
                           "admitted without limits, %d refused since the last line)", now - self.failing_since,
                           self._admitted, self._refused)
            self._admitted = self._refused = 0
        self.failing_since = None
        self.error = ""
        self.metrics.limiter_failing.set(0)


def _server(url: str) -> tuple[str, ...] | None:
    """Which Redis server ``url`` names: ``("unix", path)`` or ``("tcp", host, port)``, loopback names as one."""
    if not url.startswith(REDIS_SCHEMES):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme == "unix":
        return ("unix", parts.path)
    host = (parts.hostname or "localhost").lower()
    return ("tcp", "loopback" if host in _LOOPBACK else host, str(port or 6379))


def shared_redis_problem(state: str, vector_store: str) -> str | None:
    """Why ``limits.state`` and the vector store may not be this pair (None: they may): one Redis server for both,
    whatever the database number (a database has no memory of its own: ``maxmemory`` is the server's)."""
    a, b = _server(state), _server(vector_store)
    if a is None or a != b:
        return None
    return _shared_message(state, vector_store, "")


def _shared_message(state: str, vector_store: str, how: str) -> str:
    return (f"limits.state ({redact_url(state)}) and the vector store ({redact_url(vector_store)}) are one Redis "
            f"server{how}: passage vectors would fill its maxmemory, then the rate-limit scripts fail and every "
            "request is admitted without limits (fail_open = true) or refused (false). Give the vector store a Redis "
            "server of its own, or keep vectors in SQLite (trim.vector_store = \"default\" or a file path)")


def check_state_servers(state: str, vector_store: str, *, timeout_s: float = 2.0) -> list[str]:
    """Ask the Redis servers (start-up): a ConfigError when ``state`` and ``vector_store`` reach one server under
    two names (the same ``run_id``); a warning (returned) when the limiter's Redis evicts keys at ``maxmemory``,
    which drops rate windows. A server that does not answer (or hides INFO) is not checked."""
    if not state.startswith(REDIS_SCHEMES):
        return []
    try:
        import redis
    except ImportError:  # pragma: no cover - the serve extra brings it
        return []
    warnings: list[str] = []
    infos: dict[str, dict[str, object]] = {}
    for url in (state, vector_store) if vector_store.startswith(REDIS_SCHEMES) else (state,):
        try:
            client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
            try:
                infos[url] = {**client.info("server"), **client.info("memory")}
            finally:
                client.close()
        except (redis.RedisError, OSError, ValueError):
            continue
    mine = infos.get(state)
    other = infos.get(vector_store) if vector_store != state else None
    if mine is not None and other is not None and mine.get("run_id") and mine.get("run_id") == other.get("run_id"):
        raise ConfigError(_shared_message(state, vector_store, " (one server under two names: the same run_id)"))
    if mine is not None:
        maxmemory = int(str(mine.get("maxmemory", 0)) or 0)
        policy = str(mine.get("maxmemory_policy", "noeviction"))
        if maxmemory > 0 and policy != "noeviction":
            warnings.append(
                f"limits.state's Redis ({redact_url(state)}) has maxmemory {maxmemory} bytes with maxmemory-policy "
                f"{policy}: once full it evicts keys, rate windows among them, and limits reset without an error. "
                "Give the limiter a Redis with maxmemory-policy noeviction (then a full Redis is a failure the "
                "gateway reports) and room to spare")
    return warnings
