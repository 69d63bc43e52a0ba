"""The direct torch MiniLM scorer (what the fast path runs on CUDA), checked on the CPU against sentence-transformers."""

from __future__ import annotations

import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring import auto as fast
from ragtrim.scoring.torch_backend import TorchEmbeddingScorer


def test_the_fast_path_on_cuda_uses_the_direct_scorer() -> None:
    scorer = fast.prefix_minilm("torch-cuda")
    assert isinstance(scorer, TorchEmbeddingScorer)
    assert (scorer.device, scorer.max_seq_length) == ("cuda", fast.FAST_GPU_PREFIX_TOKENS)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"model": ""}, "model must be a model name"),
    ({"device": ""}, "device must be"),
    ({"max_seq_length": 4}, "max_seq_length"),
    ({"batch_size": 0}, "batch_size"),
])
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TorchEmbeddingScorer(**kwargs)  # type: ignore[arg-type]


@pytest.mark.model
def test_matches_sentence_transformers_on_the_cpu() -> None:
    import numpy as np

    from ragtrim.scoring.embedding import EmbeddingScorer

    texts = ["The Eiffel Tower is in Paris and was built for the 1889 World's Fair by Gustave Eiffel's company.",
             "Cats sleep a lot.", "who built the eiffel tower"]
    direct = TorchEmbeddingScorer(device="cpu", max_seq_length=16)
    reference = EmbeddingScorer(device="cpu", max_seq_length=16)
    assert np.abs(direct.embed(texts) - reference.embed(texts)).max() < 1e-5
    assert direct.score(texts[2], texts[:2]) == pytest.approx(reference.score(texts[2], texts[:2]), abs=1e-5)
