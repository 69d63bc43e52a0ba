"""The byte-bounded caches: SizedLRU, bounded_cache, and the per-text caches built on them."""

from __future__ import annotations

import threading

from ragtrim._util.lru import CACHE_MAX_BYTES, CACHE_MAX_ENTRY_BYTES, SizedLRU, bounded_cache, deep_sizeof


class TestSizedLRU:
    def test_defaults_are_documented_values(self) -> None:
        c: SizedLRU[str, int] = SizedLRU()
        assert (c.max_bytes, c.max_entry_bytes) == (CACHE_MAX_BYTES, CACHE_MAX_ENTRY_BYTES) == (32 * 2**20, 2**20)

    def test_lru_order_and_entry_cap(self) -> None:
        c: SizedLRU[str, int] = SizedLRU(max_entries=2, weigh=lambda k, v: 1)
        c.put("a", 1)
        c.put("b", 2)
        assert c.get("a") == 1  # a is now the most recent
        c.put("c", 3)
        assert c.keys() == ["a", "c"] and c.get("b") is None and len(c) == 2

    def test_byte_cap_evicts_oldest(self) -> None:
        c: SizedLRU[str, int] = SizedLRU(max_bytes=100, weigh=lambda k, v: 40)
        for key in "abcd":
            c.put(key, 0)
        assert c.keys() == ["c", "d"] and c.nbytes == 80

    def test_entry_over_limit_is_not_stored(self) -> None:
        c: SizedLRU[str, int] = SizedLRU(max_entry_bytes=50, weigh=lambda k, v: len(k))
        c.put("x" * 51, 1)
        c.put("y", 2)
        assert "x" * 51 not in c and c.get("y") == 2

    def test_replacing_a_key_keeps_the_byte_count(self) -> None:
        c: SizedLRU[str, int] = SizedLRU(weigh=lambda k, v: v)
        c.put("a", 10)
        c.put("a", 3)
        assert c.nbytes == 3 and len(c) == 1
        c.clear()
        assert c.nbytes == 0 and len(c) == 0

    def test_none_values_are_cached(self) -> None:
        c: SizedLRU[str, None] = SizedLRU()
        c.put("a", None)
        missing = object()
        assert c.get("a", missing) is None and c.get("b", missing) is missing

    def test_thread_safe(self) -> None:
        c: SizedLRU[int, int] = SizedLRU(max_bytes=500, weigh=lambda k, v: 10)

        def work(base: int) -> None:
            for i in range(2000):
                c.put(base * 10_000 + i, i)
                c.get(base * 10_000 + i // 2)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert c.nbytes == 10 * len(c) <= 500

    def test_deep_sizeof_counts_items(self) -> None:
        assert deep_sizeof(("ab" * 1000, "c")) > 2000


def test_bounded_cache_memoizes_within_bytes() -> None:
    calls: list[str] = []

    @bounded_cache(max_bytes=10_000)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert upper("abc") == upper("abc") == "ABC" and calls == ["abc"]
    for i in range(500):
        upper(f"text number {i}")
    assert upper.cache.nbytes <= 10_000 and len(upper.cache) < 500
    upper.cache_clear()
    assert len(upper.cache) == 0


def test_bounded_cache_hit_marks_the_entry_as_just_used() -> None:
    @bounded_cache(max_entries=2)
    def double(n: int) -> int | None:
        return None if n == 0 else 2 * n

    double(1), double(0)
    assert double(1) == 2  # a hit: 1 is now the most recent, so the next entry evicts 0
    double(3)
    assert double.cache.keys() == [(1,), (3,)]
    assert double(0) is None and double.cache.keys() == [(3,), (0,)]  # a None result is cached like any other


def test_per_text_caches_stay_within_their_bytes() -> None:
    """Sentence spans, BM25 tokens and token counts: 4 MB of distinct text leaves each cache within its bound."""
    from ragtrim.scoring import bm25
    from ragtrim.text import sentences as text
    from ragtrim.text.tokens import ApproxCounter

    counter = ApproxCounter()
    caches = [text._sentence_spans.cache, bm25._tokens.cache, counter._cache]
    limits = [(c.max_bytes, c.max_entry_bytes) for c in caches]
    try:
        for c in caches:
            c.max_bytes, c.max_entry_bytes = 2**20, 2**18
        for i in range(12):
            chunk = f"Sentence {i} about the tower. " * 10_000  # 300 kB, distinct: above the per-entry limit
            small = f"Small text {i}. It has two sentences."
            for t in (chunk, small):
                text.sentence_spans(t)
                bm25.tokenize(t)
                counter.count(t)
        for c in caches:
            assert c.nbytes <= 2**20
            assert len(c) >= 1  # the small texts are cached
    finally:
        for c, (max_bytes, max_entry) in zip(caches, limits, strict=True):
            c.max_bytes, c.max_entry_bytes = max_bytes, max_entry
