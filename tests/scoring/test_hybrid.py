"""Score fusion: min-max mixing and reciprocal rank fusion."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.hybrid import HybridScorer, min_max, rrf_contribution
from ragtrim.testing import FixedScorer


class TestFusion:
    def test_min_max(self) -> None:
        assert min_max(np.array([1.0, 3.0, 2.0])).tolist() == [0.0, 1.0, 0.5]
        assert min_max(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
        with np.errstate(all="raise"):  # a span wider than a double holds is scaled, not overflowed
            assert min_max(np.array([-1e308, 0.0, 1e308])).tolist() == [0.0, 0.5, 1.0]
            assert min_max(np.array([np.inf, 2.0, 4.0, -np.inf, np.nan])).tolist() == [1.0, 0.0, 1.0, 0.0, 0.0]

    def test_rrf_ties_share_the_better_rank(self) -> None:
        out = rrf_contribution(np.array([5.0, 5.0, 1.0]), 60)
        assert out.tolist() == [1 / 61, 1 / 61, 1 / 63]

    def test_mix_of_fixed_scorers(self) -> None:
        a = FixedScorer(scores=[0.0, 10.0, 5.0])
        b = FixedScorer(scores=[1.0, 0.0, 0.5])
        h = HybridScorer(scorers=(a, b), method="mix", weights=(3.0, 1.0))
        assert h.score("q", ["x", "y", "z"]) == pytest.approx([0.25, 0.75, 0.5])

    def test_rrf_of_fixed_scorers(self) -> None:
        a = FixedScorer(scores=[3.0, 2.0, 1.0])
        b = FixedScorer(scores=[1.0, 2.0, 3.0])
        h = HybridScorer(scorers=(a, b), method="rrf", rrf_k=0)
        assert h.score("q", ["x", "y", "z"]) == pytest.approx([(1 + 1 / 3) / 2, (1 / 2 + 1 / 2) / 2, (1 / 3 + 1) / 2])

    def test_invalid_parameters(self) -> None:
        with pytest.raises(ConfigError, match="method"):
            HybridScorer(method="sum")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="weights must have one entry"):
            HybridScorer(scorers=("bm25",), weights=(1.0, 2.0))
        with pytest.raises(ConfigError, match="scorers must be"):
            HybridScorer(scorers=())
        with pytest.raises(ConfigError, match=r"scorers\[0\] must be one of \['balanced', 'balanced-qa', 'bm25', "
                                                   r"'embedding', 'fast', 'hybrid'\]"):
            HybridScorer(scorers=("tfidf",))  # any named scorer may be a part (it was bm25 and embedding only)
        with pytest.raises(ConfigError, match="weights must not all be 0"):
            HybridScorer(scorers=("bm25",), weights=(0.0,))

    def test_empty_texts(self) -> None:
        assert HybridScorer(scorers=(FixedScorer(scores=[]),)).score("q", []) == []


class TestScriptGate:
    """A model votes only on text it can read: the English MiniLM never votes on a Korean query."""

    KO: ClassVar[list[str]] = ["이 요금제의 월 한도는 5만 원입니다.", "서울은 대한민국의 수도이다.", "회의는 오후 3시에 끝났다."]

    def _parts(self) -> tuple[FixedScorer, FixedScorer]:
        lexical = FixedScorer(scores={t: float(i) for i, t in enumerate(["x", *self.KO, "Paris is in France."])})
        latin_model = FixedScorer(scores={self.KO[0]: 0.0, self.KO[1]: 9.0, self.KO[2]: 5.0,
                                          "Paris is in France.": 1.0, "x": 3.0}, scripts=["latin"])
        return lexical, latin_model

    def test_a_query_the_model_cannot_read_leaves_it_out(self) -> None:
        lexical, latin_model = self._parts()
        h = HybridScorer(scorers=(lexical, latin_model), weights=(0.4, 0.6))
        assert h.score("요금제의 한도는?", self.KO) == pytest.approx([0.0, 0.5, 1.0])  # the lexical part alone
        assert latin_model.calls == []  # not even run

    def test_passages_it_cannot_read_get_the_other_votes(self) -> None:
        lexical, latin_model = self._parts()
        texts = ["x", self.KO[0], "Paris is in France."]
        h = HybridScorer(scorers=(lexical, latin_model), weights=(0.4, 0.6))
        # lexical over the three: 0, 1/4, 1 (scores 0, 1, 4); the model over the two Latin texts: x 1.0, Paris 0.0;
        # the Korean passage gets the lexical vote alone
        assert h.score("Where is Paris?", texts) == pytest.approx([0.6, 1 / 4, 0.4])
        assert latin_model.calls == [["x", "Paris is in France."]]

    def test_without_the_gate_every_part_votes_on_everything(self) -> None:
        lexical, latin_model = self._parts()
        h = HybridScorer(scorers=(lexical, latin_model), weights=(0.4, 0.6), script_gate=False)
        assert h.score("요금제의 한도는?", self.KO) == pytest.approx([0.0, 0.4 * 0.5 + 0.6, 0.4 + 0.6 * 5 / 9])
        assert latin_model.calls == [self.KO]

    def test_a_model_that_reads_every_script_is_not_gated(self) -> None:
        lexical, _ = self._parts()
        model = FixedScorer(scores={self.KO[0]: 0.0, self.KO[1]: 9.0, self.KO[2]: 5.0})
        h = HybridScorer(scorers=(lexical, model), weights=(0.4, 0.6))
        assert h.score("요금제의 한도는?", self.KO) == pytest.approx([0.0, 0.4 * 0.5 + 0.6, 0.4 + 0.6 * 5 / 9])

    def test_no_text_is_left_without_a_vote(self) -> None:
        _, latin_model = self._parts()
        h = HybridScorer(scorers=(latin_model,))
        assert h.score("요금제의 한도는?", self.KO) == pytest.approx([0.0, 1.0, 5 / 9])

    def test_text_without_letters_is_readable(self) -> None:
        lexical, latin_model = self._parts()
        h = HybridScorer(scorers=(lexical, latin_model), weights=(0.5, 0.5))
        h.score("2024?", ["x", "Paris is in France."])
        assert latin_model.calls == [["x", "Paris is in France."]]

    def test_prefetch_is_gated_too(self) -> None:
        seen: list[list[str]] = []

        class Prefetching(FixedScorer):
            def prefetch(self, query: str, texts: list[str]) -> None:
                seen.append(list(texts))

        model = Prefetching(scores={}, scripts=["latin"])
        h = HybridScorer(scorers=("bm25", model), weights=(0.5, 0.5))
        h.prefetch("요금제의 한도는?", self.KO)
        h.prefetch("Where is Paris?", ["Paris is in France.", self.KO[0]])
        assert seen == [["Paris is in France."]]

    def test_invalid_gate(self) -> None:
        with pytest.raises(ConfigError, match="script_gate"):
            HybridScorer(script_gate="yes")  # type: ignore[arg-type]


class TestSureWeights:
    """The first part decides when it is sure: its weight moves toward ``sure_weights`` with its decisiveness."""

    def test_decisiveness(self) -> None:
        from ragtrim.scoring.hybrid import decisiveness

        assert decisiveness(np.array([5.0, 0.0, 0.0, 0.0])) == pytest.approx(4 / 3)  # one alone above 3 equal others
        assert decisiveness(np.array([5.0, 5.0, 0.0])) == 0.0  # a tie at the top
        assert decisiveness(np.array([3.0, 3.0])) == 0.0 and decisiveness(np.array([1.0])) == 0.0
        assert decisiveness(np.array([4.0, 2.0, 0.0])) == pytest.approx(2.0 / 2.0)
        assert decisiveness(np.array([10.0, 8.0, 0.0, 0.0])) == pytest.approx(2.0 / 5.5)

    def test_a_sure_first_part_outvotes_the_model(self) -> None:
        # text 2 alone matches the first part (an identifier); the model prefers text 0
        exact = FixedScorer(scores=[0.0, 0.0, 9.0, 0.0])
        model = FixedScorer(scores=[1.0, 0.5, 0.2, 0.0])
        plain = HybridScorer(scorers=(exact, model), method="mix", weights=(0.1, 0.9))
        sure = HybridScorer(scorers=(exact, model), method="mix", weights=(0.1, 0.9), sure_weights=(0.8, 0.2))
        assert int(np.argmax(plain.score("q", list("abcd")))) == 0
        scores = sure.score("q", list("abcd"))
        assert int(np.argmax(scores)) == 2
        assert scores == pytest.approx([0.8 * 0 + 0.2 * 1.0, 0.2 * 0.5, 0.8 * 1 + 0.2 * 0.2, 0.0])

    def test_an_unsure_first_part_keeps_the_base_weights(self) -> None:
        first = FixedScorer(scores=[3.0, 2.9, 2.8, 0.0])  # decisiveness 0.1 / 0.925: below sure_gap[0]
        model = FixedScorer(scores=[0.0, 1.0, 0.5, 0.2])
        base = HybridScorer(scorers=(first, model), method="mix", weights=(0.1, 0.9))
        sure = HybridScorer(scorers=(first, model), method="mix", weights=(0.1, 0.9), sure_weights=(0.8, 0.2))
        assert sure.score("q", list("abcd")) == pytest.approx(base.score("q", list("abcd")))

    def test_halfway_sure_interpolates(self) -> None:
        first = FixedScorer(scores=[4.0, 1.2, 0.0, 0.0, 0.0])  # mean 1.04: decisiveness 2.8 / 2.96 = 0.946 -> sure
        model = FixedScorer(scores=[0.0, 1.0, 0.0, 0.0, 0.0])
        h = HybridScorer(scorers=(first, model), method="mix", weights=(0.0, 1.0), sure_weights=(1.0, 0.0),
                         sure_gap=(0.0, 1.0))
        t = (4.0 - 1.2) / (4.0 - 1.04)
        assert h.score("q", list("abcde"))[0] == pytest.approx(t)  # weight t on the first part, whose min-max is 1

    def test_a_part_of_weight_0_runs_when_it_may_get_a_weight(self) -> None:
        first = FixedScorer(scores=[9.0, 0.0, 0.0])
        model = FixedScorer(scores=[0.0, 1.0, 0.0])
        h = HybridScorer(scorers=(first, model), method="mix", weights=(0.0, 1.0), sure_weights=(1.0, 0.0))
        assert int(np.argmax(h.score("q", list("abc")))) == 0

    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"method": "rrf", "sure_weights": (1.0, 0.0)}, "sure_weights needs method='mix'"),
        ({"sure_weights": (1.0,)}, "sure_weights must have one entry per scorer"),
        ({"sure_weights": (0.0, 0.0)}, "sure_weights must not all be 0"),
        ({"sure_gap": (0.9, 0.5)}, "sure_gap must be two numbers"),
        ({"sure_gap": (0.5,)}, "sure_gap must be two numbers"),
    ])
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            HybridScorer(scorers=(FixedScorer(scores=[1.0]), FixedScorer(scores=[1.0])), **kwargs)  # type: ignore[arg-type]


def test_the_default_recipe_answers_an_identifier_question() -> None:
    """BM25 sure of an exact identifier outvotes a model that cannot read it (the KV column's shape)."""
    from ragtrim.scoring.auto import BALANCED_BM25_WEIGHT, BALANCED_SURE_BM25_WEIGHT, SURE_GAP
    from ragtrim.scoring.bm25 import BM25Scorer

    records = [f"Record {i}: the value stored under key {k} is {v}." for i, (k, v) in enumerate(
        [("a81f-22c9", "blue"), ("7d03-e5b1", "green"), ("c44a-9f10", "amber"), ("0be7-61d2", "violet")])]
    model = FixedScorer(scores=[0.9, 0.7, 0.1, 0.8])  # a model that reads meanings: the records look alike to it
    h = HybridScorer(scorers=(BM25Scorer(), model), method="mix",
                     weights=(BALANCED_BM25_WEIGHT, 1 - BALANCED_BM25_WEIGHT),
                     sure_weights=(BALANCED_SURE_BM25_WEIGHT, 1 - BALANCED_SURE_BM25_WEIGHT), sure_gap=SURE_GAP)
    assert int(np.argmax(h.score("What is the value stored under key c44a-9f10?", records))) == 2


def test_warm_up_builds_the_script_table_and_the_analyzers_patterns() -> None:
    """Both are built on first use (tens of milliseconds each); a gateway's warm-up builds them, so its first
    request with text that is not plain ASCII does not."""
    from ragtrim.text import analyzer, scripts

    scripts._table.cache_clear()
    analyzer._patterns.cache_clear()
    HybridScorer(scorers=("bm25", FixedScorer(scores=[1.0])), method="mix").warm_up()
    assert scripts._table.cache_info().currsize == 1  # the table that decides which part reads a text
    assert analyzer._patterns.cache_info().currsize == 1  # through its BM25 part's warm-up
