"""The LRU bookkeeping shared by the per-text caches (token counts, embeddings, query likelihoods).

The caches are plain ``OrderedDict``s guarded by their owner's lock; these helpers run under that lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


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
