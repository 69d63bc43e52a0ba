"""The plain baseline: script-aware tokens, a hand-checked BM25, and the whole-passage fill."""

from __future__ import annotations

import math

import pytest

from ragtrim import WhitespaceCounter
from ragtrim.models import CHUNK_SEPARATOR
from ragtrim_bench.relevance.baseline import bm25_scores, plain_fill, script_tokens


class TestScriptTokens:
    def test_words_lower_cased(self) -> None:
        assert script_tokens("The Rollback window, 18:00 UTC!") == ["the", "rollback", "window", "18", "00", "utc"]

    def test_hangul_bigrams_and_mixed_runs(self) -> None:
        assert script_tokens("요금제의 한도") == ["요금", "금제", "제의", "한도"]
        assert script_tokens("2010년 서울") == ["2010", "년", "서울"]
        assert script_tokens("東京は大阪") == ["東京", "京は", "は大", "大阪"]

    def test_empty(self) -> None:
        assert script_tokens("") == [] and script_tokens(" .,") == []


class TestBM25:
    def test_hand_computed(self) -> None:
        # N=2, avgdl=2; "rome" is in doc 0 only: idf = ln(1 + 1.5/1.5) = ln 2, tf 1, |d| = avgdl
        scores = bm25_scores("rome", ["rome city", "paris city"])
        assert scores[0] == pytest.approx(math.log(2) * 1 * 2.2 / (1 + 1.2)) and scores[1] == 0.0

    def test_ranks_the_matching_passage_first_and_handles_empty_input(self) -> None:
        scores = bm25_scores("한도는 얼마인가", ["요금제의 한도는 100이다", "날씨가 맑다", "점심은 본관"])
        assert scores[0] > 0 and scores[1] == scores[2] == 0
        assert bm25_scores("q", []) == []
        assert bm25_scores("", ["a b"]) == [0.0]


class TestPlainFill:
    COUNTER = WhitespaceCounter()

    def test_rank_order_whole_passages_within_budget(self) -> None:
        texts = ["alpha beta gamma", "rome rome founded", "rome city walls stand tall today"]
        out = plain_fill(texts, "rome founded", 8, self.COUNTER)
        # rank: 1, 2, 0; 1 fits (3), 2 would make 3 + 6 = 9 > 8 so it is skipped, 0 fits (3 + 3 = 6)
        assert out == CHUNK_SEPARATOR.join([texts[1], texts[0]])
        assert self.COUNTER.count(out) <= 8

    def test_nothing_fits(self) -> None:
        assert plain_fill(["a b c"], "a", 2, self.COUNTER) == ""
        assert plain_fill([], "a", 10, self.COUNTER) == ""

    def test_everything_fits_in_rank_order(self) -> None:
        assert plain_fill(["x", "q q", "q"], "q", 100, self.COUNTER).split(CHUNK_SEPARATOR) == ["q q", "q", "x"]
