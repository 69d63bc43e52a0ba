from __future__ import annotations

from ragtrim import trim
from ragtrim.caches import clear_caches
from ragtrim_bench.pipeline.memory_bounded import cache_sizes_mb


def test_cache_sizes_name_every_per_text_cache_and_grow_with_a_trim() -> None:
    clear_caches()
    empty = cache_sizes_mb()
    assert set(empty) >= {"sentence spans", "BM25 tokens", "dedup lines", "token counts"}
    assert all(v == 0 for v in empty.values())
    trim([f"Passage {i}. " + "The iron tower opened in 1889 for the fair. " * 2000 for i in range(3)],
         query="when did the tower open", budget=50, scorer="bm25")
    after = cache_sizes_mb()
    assert after["BM25 tokens"] > 0 and after["sentence spans"] > 0
