"""The text-without-spaces dedup benchmark: its measures on one language and the rule that chose the shingle length."""

from __future__ import annotations

from typing import Any

import pytest

from ragtrim.dedup import shingles
from ragtrim_bench.dedup.script_texts import SPLITS
from ragtrim_bench.dedup.scripts import (
    ScriptDedupConfig,
    change_middle_token,
    closest_to_english,
    distance_to_english,
    measure,
    words_only,
)


def test_change_middle_token() -> None:
    assert change_middle_token("one two three four\n東京タワー") == "one two zzz four\n東京〇ワー"


def test_words_only_restores_the_rule() -> None:
    assert shingles.line_tokens("東京タワー")[1]
    with words_only():
        assert not shingles.line_tokens("東京タワー")[1]
    assert shingles.line_tokens("東京タワー")[1]


def test_closest_to_english_is_the_smallest_distance_ties_to_the_shorter() -> None:
    def row(a: float) -> dict[str, float]:
        return {"long_page_two_sites_jaccard": a, "sibling_same_site_jaccard_max": a,
                "middle_token_changed_jaccard_mean": a}

    rows: dict[str, Any] = {"en_words": row(0.5), "ja_chars4": row(0.4), "zh_chars4": row(0.6),
                            "ja_chars6": row(0.5), "zh_chars6": row(0.5), "ja_chars8": row(0.55), "zh_chars8": row(0.45)}
    assert distance_to_english(rows, 4) == pytest.approx(0.6)
    assert distance_to_english(rows, 6) == 0.0
    assert closest_to_english(rows, (4, 6, 8)) == 6


def test_measure_on_the_held_out_japanese() -> None:
    ja = next(lang for lang in SPLITS["heldout"] if lang.language == "ja")
    got = measure(ja, 6, ScriptDedupConfig())
    assert got["long_page_two_sites_detected"] and not got["long_page_sibling_merged"]
    assert got["long_page_two_sites_jaccard"] == 0.861
    assert (got["batch_recall"], got["batch_false_merges"]) == (1.0, 0)
