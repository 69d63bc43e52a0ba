"""The embedding scorer: model resolution and a warm-up once per scorer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ragtrim.scoring.embedding import CachedEmbedder, EmbeddingScorer


@pytest.mark.model
class TestEmbeddingScorerModel:
    def test_minilm_ranks_paraphrase_first(self) -> None:
        e = EmbeddingScorer()
        scores = e.score("Who wrote Hamlet?", ["The tragedy Hamlet is by William Shakespeare.",
                                               "Bananas are rich in potassium."])
        assert scores[0] > scores[1]

    def test_cache_makes_repeats_free(self) -> None:
        e = EmbeddingScorer(cache_size=10)
        first = e.embed(["alpha text", "beta text"])
        assert len(e._cache) == 2
        again = e.embed(["beta text", "alpha text"])
        assert np.allclose(first[::-1], again)
        assert first.shape == (2, 384)
        assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)


class TestWarmUpOnce:
    def test_a_model_scorer_runs_its_warm_up_pass_once(self) -> None:
        class Model(CachedEmbedder):
            warms_up = True
            passes = 0

            @property
            def name(self) -> str:
                return "model"

            def _encode(self, texts: Sequence[str]) -> np.ndarray:
                Model.passes += 1
                return np.ones((len(texts), 2), dtype=np.float32)

        scorer = Model()
        for _ in range(3):
            scorer.warm_up()
        assert Model.passes == 1

    def test_a_plain_cached_embedder_does_not_warm_up(self) -> None:
        _Plain().warm_up()

    def test_warm_up_reads_the_query_adapter(self) -> None:
        """The adapter's file is read by the warm-up, not by the first request whose query it maps."""
        from ragtrim.scoring.adapter import BUNDLED_ADAPTER, load_adapter

        load_adapter.cache_clear()
        _Plain(query_adapter=BUNDLED_ADAPTER).warm_up()
        assert load_adapter.cache_info().currsize == 1
        _Plain().warm_up()  # none to read
        assert load_adapter.cache_info().currsize == 1


class _Plain(CachedEmbedder):
    """An embedder without a model of its own: its warm-up must never encode."""

    @property
    def name(self) -> str:
        return "plain"

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        raise AssertionError("warm_up must not encode")


class TestScriptsRead:
    """What the model reads: the bundled MiniLM Latin-script text, a model named by path every script unless told."""

    def test_defaults(self) -> None:
        from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer
        from ragtrim.scoring.torch_backend import TorchEmbeddingScorer

        assert EmbeddingScorer().scripts_read() == frozenset({"latin"})
        assert EmbeddingScorer(model="sentence-transformers/all-MiniLM-L6-v2").scripts_read() == frozenset({"latin"})
        assert OnnxEmbeddingScorer().scripts_read() == TorchEmbeddingScorer().scripts_read() == frozenset({"latin"})
        assert EmbeddingScorer(model="/models/multilingual-e5").scripts_read() is None

    def test_told(self) -> None:
        scorer = EmbeddingScorer(model="/models/ko-sbert", scripts=["hangul", "latin"])
        assert scorer.scripts_read() == frozenset({"hangul", "latin"})
        assert scorer.to_dict()["scripts"] == ["hangul", "latin"]

    def test_invalid(self) -> None:
        from ragtrim.errors import ConfigError

        with pytest.raises(ConfigError, match=r"scripts\[0\]"):
            EmbeddingScorer(scripts=["korean"])
        with pytest.raises(ConfigError, match="scripts"):
            EmbeddingScorer(scripts="latin")
