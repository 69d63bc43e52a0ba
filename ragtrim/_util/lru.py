"""The LRU bookkeeping shared by the per-text caches (token counts, sentence spans, BM25 tokens, embeddings).

The per-text caches are bounded in bytes as well as entries: a cache keyed by text grows with the texts it sees,
and a capped entry count alone let twelve 5 MB requests take a process from 14 MB to 780 MB. ``SizedLRU`` holds
at most ``max_bytes`` (keys plus values, estimated with ``sys.getsizeof``) and never stores one entry larger than
``max_entry_bytes``: such a text is computed again when it recurs, which costs less than the memory it would pin.
Defaults: ``CACHE_MAX_BYTES`` (32 MiB) per cache, ``CACHE_MAX_ENTRY_BYTES`` (1 MiB) per entry.
"""

from __future__ import annotations

import functools
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sized
from typing import Any, Generic, ParamSpec, TypeVar

from ragtrim._util.forks import fork_safe_lock

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")
P = ParamSpec("P")

CACHE_MAX_BYTES = 32 * 2**20
"""Default size of one per-text cache, keys and values together."""

CACHE_MAX_ENTRY_BYTES = 2**20
"""Default size above which an entry is not cached at all (about a million ASCII characters of text)."""


def lru_get(cache: OrderedDict[K, V], keys: Iterable[K]) -> dict[K, V]:
    """The cached entries among ``keys``, each marked as just used."""
    found: dict[K, V] = {}
    for key in keys:
        if key in cache:
            cache.move_to_end(key)
            found[key] = cache[key]
    return found


def lru_put(cache: OrderedDict[K, V], items: Iterable[tuple[K, V]], size: int) -> None:
    """Store ``items`` as the most recently used entries, then drop the oldest beyond ``size``."""
    for key, value in items:
        cache[key] = value
        cache.move_to_end(key)
    while len(cache) > size:
        cache.popitem(last=False)


def deep_sizeof(value: Any) -> int:
    """Bytes of ``value``: ``sys.getsizeof`` of it and, for tuples and lists, of their items (one level down and
    recursively for nested tuples). Strings, numbers and arrays report their own buffers."""
    size = sys.getsizeof(value)
    if isinstance(value, (tuple, list)):
        size += sum(deep_sizeof(v) for v in value)
    return size


class SizedLRU(Generic[K, V]):
    """A thread-safe LRU bounded by entries and by estimated bytes (keys plus values).

    ``weigh(key, value)`` gives an entry's bytes (default: ``deep_sizeof`` of both). An entry above
    ``max_entry_bytes`` is not stored; storing one that overflows ``max_bytes`` evicts the oldest first.
    """

    def __init__(
        self,
        *,
        max_entries: int = 1 << 62,
        max_bytes: int = CACHE_MAX_BYTES,
        max_entry_bytes: int = CACHE_MAX_ENTRY_BYTES,
        weigh: Callable[[K, V], int] | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self._weigh = weigh or (lambda k, v: deep_sizeof(k) + deep_sizeof(v))
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = fork_safe_lock()  # a request thread may be mid-put when a server forks

    @property
    def nbytes(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: K, default: Any = None) -> Any:
        """The cached value (marked as just used), else ``default``.

        Without the lock: a lookup and a move to the end are each one operation on the dict, and an entry another
        thread drops between the two is still the right value (only its recency is lost)."""
        hit = self._data.get(key)
        if hit is None:
            return default
        try:
            self._data.move_to_end(key)
        except KeyError:
            pass
        return hit[0]

    def put(self, key: K, value: V, *, max_entries: int | None = None) -> None:
        """Store ``key`` as the most recently used entry (unless it alone is over ``max_entry_bytes``)."""
        limit = self.max_entries if max_entries is None else max_entries
        if limit <= 0:
            return
        size = self._weigh(key, value)
        if size > self.max_entry_bytes or size > self.max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, size)
            self._bytes += size
            while self._data and (len(self._data) > limit or self._bytes > self.max_bytes):
                _, (_, dropped) = self._data.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0

    def keys(self) -> list[K]:
        with self._lock:
            return list(self._data)


def weigh_text_and_items(item_bytes: int) -> Callable[[tuple[Any, ...], Sized], int]:
    """An O(1) weight for a cache keyed by a text (the first argument) whose result is a sized collection:
    the text's bytes plus ``item_bytes`` per result item."""

    def weigh(args: tuple[Any, ...], result: Sized) -> int:
        return sys.getsizeof(args[0]) + item_bytes * (len(result) + 1)

    return weigh


class CachedFunction(Generic[P, R]):
    """A function with a byte-bounded cache of its results, keyed by its (hashable, positional) arguments."""

    def __init__(self, fn: Callable[P, R], cache: SizedLRU[tuple[Any, ...], R]) -> None:
        self._fn = fn
        self.cache = cache
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            return self._fn(*args, **kwargs)
        data = self.cache._data  # SizedLRU.get inlined: this is every per-text cache's hot path
        hit = data.get(args)
        if hit is not None:
            try:
                data.move_to_end(args)
            except KeyError:
                pass
            return hit[0]
        value = self._fn(*args, **kwargs)
        self.cache.put(args, value)
        return value

    def cache_clear(self) -> None:
        self.cache.clear()


def bounded_cache(
    *,
    max_entries: int = 1 << 62,
    max_bytes: int = CACHE_MAX_BYTES,
    max_entry_bytes: int = CACHE_MAX_ENTRY_BYTES,
    weigh: Callable[[tuple[Any, ...], Any], int] | None = None,
) -> Callable[[Callable[P, R]], CachedFunction[P, R]]:
    """``functools.lru_cache`` for functions of hashable positional arguments, bounded in bytes (arguments plus
    result, estimated by ``weigh(args, result)``; default ``deep_sizeof``). The wrapper has ``cache_clear()``."""

    def decorate(fn: Callable[P, R]) -> CachedFunction[P, R]:
        cache: SizedLRU[tuple[Any, ...], R] = SizedLRU(
            max_entries=max_entries, max_bytes=max_bytes, max_entry_bytes=max_entry_bytes, weigh=weigh
        )
        return CachedFunction(fn, cache)

    return decorate
