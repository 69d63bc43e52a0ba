"""The named scorers and get_scorer."""

from __future__ import annotations

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.scoring.registry import get_scorer
from ragtrim.testing import FixedScorer


class TestGetScorer:
    def test_names_are_shared(self) -> None:
        assert get_scorer("bm25") is get_scorer("bm25")
        assert isinstance(get_scorer("hybrid"), HybridScorer)

    def test_passes_objects_through(self) -> None:
        s = FixedScorer(scores=[])
        assert get_scorer(s) is s

    def test_unknown(self) -> None:
        with pytest.raises(ConfigError, match="unknown scorer 'tfidf'"):
            get_scorer("tfidf")
        with pytest.raises(ConfigError, match="scorer must be"):
            get_scorer(42)  # type: ignore[arg-type]

    def test_primed_embeddings_score_without_a_model(self) -> None:
        e = EmbeddingScorer(model="/nonexistent/model")
        e.prime(["q", "a", "b"], [[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
        assert e.score("q", ["a", "b"]) == pytest.approx([1.0, 0.0])
        with pytest.raises(InputError, match="one row per text"):
            e.prime(["x"], [[1.0], [2.0]])

    def test_embedding_constructor_loads_nothing(self) -> None:
        e = EmbeddingScorer(batch_size=8)
        assert e._cache == {} and e.batch_size == 8
        with pytest.raises(ConfigError, match="batch_size"):
            EmbeddingScorer(batch_size=0)
