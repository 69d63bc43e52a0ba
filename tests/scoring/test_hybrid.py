"""Score fusion: min-max mixing and reciprocal rank fusion."""

from __future__ import annotations

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
