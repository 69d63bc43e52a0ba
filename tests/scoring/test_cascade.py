"""CascadeScorer: the first stage ranks everything, the second rescores only the best few."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.cascade import CascadeScorer
from ragtrim.testing import FakeEmbedder, FixedScorer


class Recording:
    """A scorer that returns given scores by text and remembers which texts it was asked about."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.seen: list[list[str]] = []

    @property
    def name(self) -> str:
        return "recording"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.seen.append(list(texts))
        return [self.scores[t] for t in texts]


TEXTS = ["a", "b", "c", "d", "e"]


class TestCascadeScorer:
    def test_second_stage_reads_only_the_first_stages_best(self) -> None:
        first = FixedScorer(scores={"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.7, "e": 0.0})
        second = Recording({"b": 0.2, "d": 0.8})
        scores = CascadeScorer(first=first, second=second, candidates=2).score("q", TEXTS)
        assert second.seen == [["b", "d"]]
        assert scores[1] == 0.2 and scores[3] == 0.8
        # the rest sit just below the worst rescored score, in the first stage's order (c, a, e)
        assert scores[1] > scores[2] > scores[0] > scores[4]
        assert scores[1] - scores[4] < 1e-5

    def test_rest_first_keeps_the_first_stages_scores_below_the_rescored(self) -> None:
        first = FixedScorer(scores={"a": 0.1, "b": 0.9, "c": 0.65, "d": 0.7, "e": 0.0})
        second = Recording({"b": 0.6, "d": 0.8})
        scores = CascadeScorer(first=first, second=second, candidates=2, rest="first").score("q", TEXTS)
        assert scores[1] == 0.6 and scores[3] == 0.8
        # c (0.65 from the first stage) is held just below the worst rescored (0.6); a and e keep their own scores
        assert 0.6 - 2e-6 < scores[2] < 0.6
        assert (scores[0], scores[4]) == (0.1, 0.0)

    def test_reads_the_scripts_both_stages_read(self) -> None:
        """A fused scorer's script gate sees what the cascade's models read: a stage that says nothing reads all."""
        latin = FakeEmbedder(scripts=("latin",))
        both = FakeEmbedder(scripts=("latin", "hangul"))
        assert CascadeScorer(first=latin, second=both).scripts_read() == frozenset({"latin"})
        assert CascadeScorer(first="bm25", second=both).scripts_read() == frozenset({"latin", "hangul"})
        assert CascadeScorer(first="bm25", second="bm25").scripts_read() is None

    def test_a_fused_scorer_gives_a_latin_cascade_no_vote_on_korean(self) -> None:
        from ragtrim.scoring.hybrid import HybridScorer

        first, second = FakeEmbedder(scripts=("latin",)), FakeEmbedder(scripts=("latin",))
        fused = HybridScorer(scorers=("bm25", CascadeScorer(first=first, second=second, candidates=1)), method="mix")
        fused.score("서울의 인구는 얼마인가", ["서울의 인구는 약 천만 명이다.", "부산은 항구 도시이다."])
        assert first.calls == [] and second.calls == []  # neither model ran
        fused.score("How many people live in Seoul?", ["Seoul has about ten million people.", "Busan is a port."])
        assert first.calls and second.calls

    def test_candidate_share_raises_the_count(self) -> None:
        cascade = CascadeScorer(first=FixedScorer(scores=[1.0] * 5), second=Recording(dict.fromkeys(TEXTS, 1.0)),
                                candidates=1, candidate_share=0.6)
        assert cascade.rescored(5) == 3
        assert cascade.rescored(1) == 1

    def test_ties_keep_input_order(self) -> None:
        second = Recording(dict.fromkeys(TEXTS, 0.5))
        CascadeScorer(first=FixedScorer(scores=[1.0] * 5), second=second, candidates=3).score("q", TEXTS)
        assert second.seen == [["a", "b", "c"]]

    def test_empty(self) -> None:
        assert CascadeScorer(first="bm25", second="bm25").score("q", []) == []

    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"candidates": 0}, "candidates must be >= 1"),
        ({"candidate_share": 1.5}, "candidate_share must be <= 1"),
        ({"rest": "drop"}, r"rest must be one of \['below', 'first'\]"),
        ({"first": 3}, r"first must be one of \[.*\] or an object with name and score"),
    ])
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            CascadeScorer(**kwargs)  # type: ignore[arg-type]

    def test_name_names_both_stages(self) -> None:
        assert CascadeScorer(first="bm25", second="bm25", candidates=4).name == "cascade(bm25->bm25@4)"
        assert CascadeScorer(first="bm25", second="bm25", candidates=4, rest="first").name == \
            "cascade(bm25->bm25@4,rest=first)"
