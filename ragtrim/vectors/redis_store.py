"""Passage vectors in Redis, shared by gateway replicas (``[trim] vector_store = "redis://..."``).

A lookup is one ``MGET``. Writes run as one Lua script per batch: ``SET NX`` per vector (the first writer's bytes
stay; a repair of a damaged value is a plain ``SET``), its last use in a sorted set, the stored bytes in a counter, and while the counter exceeds ``max_bytes``
the least recently used entries go (down to 90%). Every key shares one hash tag (``{ragtrim-vectors}``), so the
script also runs on a Redis Cluster. Timeouts are short and there are no retries: a Redis that does not answer
costs a request one failed call, after which ``SharedStore``'s breaker leaves it alone for a while. redis-py's
connection pool opens new connections in a forked child by itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.redact import redact_url, register_url_secrets
from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim.vectors.limits import check_max_bytes

DEFAULT_PREFIX = "{ragtrim-vectors}:"
_KEPT_AFTER_EVICTION = 0.9

_PUT = """
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local max_bytes = tonumber(ARGV[3])
local kept = tonumber(ARGV[4])
local replace = ARGV[5] == '1'
local lru = prefix .. 'lru'
local total_key = prefix .. 'bytes'
local added = 0
local total = tonumber(redis.call('GET', total_key) or '0')
for i = 6, #ARGV, 2 do
  local k = ARGV[i]
  local vk = prefix .. 'v:' .. k
  if replace then
    local old = redis.call('STRLEN', vk)
    if old > 0 then total = total - old - #k end
    redis.call('SET', vk, ARGV[i + 1])
  end
  if replace or redis.call('SET', vk, ARGV[i + 1], 'NX') then
    redis.call('ZADD', lru, now, k)
    total = total + #k + #ARGV[i + 1]
    added = added + 1
  end
end
if total > max_bytes then
  local target = max_bytes * kept
  while total > target do
    local oldest = redis.call('ZPOPMIN', lru, 64)
    if #oldest == 0 then
      total = 0
      break
    end
    for j = 1, #oldest, 2 do
      local vk = prefix .. 'v:' .. oldest[j]
      local n = redis.call('STRLEN', vk)
      if n > 0 then
        redis.call('DEL', vk)
        total = total - n - #oldest[j]
      end
    end
  end
  if total < 0 then total = 0 end
end
redis.call('SET', total_key, total)
return added
"""

_TOUCH = """
local lru = ARGV[1] .. 'lru'
local now = tonumber(ARGV[2])
for i = 3, #ARGV do
  redis.call('ZADD', lru, 'XX', now, ARGV[i])
end
return 0
"""


class RedisVectorStore:
    """Vectors in the Redis at ``url`` under ``prefix``, at most ``max_bytes`` of keys and values (Redis's own
    overhead comes on top). ``timeout_s`` bounds every call, connecting included. Needs the ``redis`` package (the
    ``serve`` extra)."""

    def __init__(self, url: str, *, max_bytes: int, prefix: str = DEFAULT_PREFIX, timeout_s: float = 0.1) -> None:
        check_max_bytes(max_bytes)
        if not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 60:
            raise ConfigError(f"timeout_s must be a number of seconds in (0, 60], got {timeout_s!r}")
        register_url_secrets(url)
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  # parsing the port raises ValueError for one that is not a number
        except ValueError as exc:
            raise ConfigError(f"vector store URL {redact_url(url)} cannot be parsed: {exc}") from None
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ConfigError(f"vector store URL {redact_url(url)} must start with redis://, rediss:// or unix://")
        self.url = url
        self.max_bytes = max_bytes
        self.prefix = prefix
        self.timeout_s = float(timeout_s)
        self._client: Any = None
        self._lock = fork_safe_lock()  # redis-py's pool itself opens new connections in a forked child

    @property
    def location(self) -> str:
        return redact_url(self.url)

    def _redis(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    import redis
                    from redis.backoff import NoBackoff
                    from redis.retry import Retry
                except ImportError as exc:
                    raise MissingDependencyError("redis", "serve", "a Redis vector store") from exc
                self._client = redis.Redis.from_url(
                    self.url, socket_timeout=self.timeout_s, socket_connect_timeout=self.timeout_s,
                    retry=Retry(NoBackoff(), 0), health_check_interval=0)
                self._put = self._client.register_script(_PUT)
                self._touch = self._client.register_script(_TOUCH)
            return self._client

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        client = self._redis()
        head = f"{self.prefix}v:".encode()
        values = client.mget([head + k for k in keys])
        return {k: bytes(v) for k, v in zip(keys, values) if v is not None}

    def put(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        return self._write(items, replace=False)

    def replace(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        return self._write(items, replace=True)

    def _write(self, items: Sequence[tuple[bytes, bytes]], *, replace: bool) -> int:
        self._redis()
        args: list[Any] = [self.prefix, int(time.time() * 1000), self.max_bytes, _KEPT_AFTER_EVICTION,
                           "1" if replace else "0"]
        for key, value in items:
            args += [key, value]
        return int(self._put(keys=[f"{self.prefix}lru"], args=args))

    def touch(self, keys: Sequence[bytes]) -> None:
        self._redis()
        self._touch(keys=[f"{self.prefix}lru"], args=[self.prefix, int(time.time() * 1000), *keys])

    def stored_bytes(self) -> int:
        """The bytes of keys and values the store counts against ``max_bytes``."""
        return int(self._redis().get(f"{self.prefix}bytes") or 0)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
