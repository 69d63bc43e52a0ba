"""The shipped fakes (ragtrim.testing)."""

from __future__ import annotations

import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.base import Scorer
from ragtrim.testing import FixedScorer


class TestFixedScorer:
    def test_by_text_and_by_position(self) -> None:
        assert FixedScorer(scores={"a": 2.0}).score("q", ["a", "b"]) == [2.0, 0.0]
        assert FixedScorer(scores=[1.0], default=-1.0).score("q", ["a", "b"]) == [1.0, -1.0]

    def test_is_a_scorer(self) -> None:
        assert isinstance(FixedScorer(scores=[]), Scorer)

    def test_invalid(self) -> None:
        with pytest.raises(ConfigError, match="scores must be"):
            FixedScorer(scores="abc")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"scores\[0\]"):
            FixedScorer(scores=[float("nan")])
