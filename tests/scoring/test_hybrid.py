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
        with pytest.raises(ConfigError, match=r"scorers\[0\] must be one of \['bm25', 'embedding', 'fast', 'hybrid'\]"):
            HybridScorer(scorers=("tfidf",))  # any named scorer may be a part (it was bm25 and embedding only)
        with pytest.raises(ConfigError, match="weights must not all be 0"):
            HybridScorer(scorers=("bm25",), weights=(0.0,))

    def test_empty_texts(self) -> None:
        assert HybridScorer(scorers=(FixedScorer(scores=[]),)).score("q", []) == []


class TestScriptGate:
    """A model votes only on text it can read (issue 24): the English MiniLM never votes on a Korean query."""

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
