"""Every embedding backend gives a text bitwise the same vector whatever other texts share its model call,
measured on the real MiniLM: each target alone, then inside batches of other sizes and neighbours."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

pytestmark = pytest.mark.model

WORDS = ["tower", "river", "bridge", "museum", "engine", "castle", "harbor", "winter", "garden", "forest", "valley", "island", "station", "market", "temple", "canal", "library", "theater", "the", "a", "of", "in", "on", "by", "with"]


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 60))) for _ in range(n)]


def check(make: Callable[[], object]) -> None:
    targets = texts(4, seed=1)
    others = texts(60, seed=2)
    alone = {t: make().embed([t])[0].tobytes() for t in targets}  # type: ignore[attr-defined]
    rng = random.Random(3)
    for size in (2, 7, 23):
        for target in targets:
            batch = rng.sample(others, size - 1) + [target]
            rng.shuffle(batch)
            vectors = make().embed(batch)  # type: ignore[attr-defined]
            assert vectors[batch.index(target)].tobytes() == alone[target], (size, target)


def test_onnx_int8_fast_path_prefix() -> None:
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    check(lambda: OnnxEmbeddingScorer(max_seq_length=10, threads=1, vector_store=None))


def test_onnx_int8_full_length() -> None:
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    check(lambda: OnnxEmbeddingScorer(threads=1, vector_store=None))


@pytest.mark.parametrize("pieces", [10, 128])
def test_onnx_row_model_shares_calls(pieces: int) -> None:
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    check(lambda: OnnxEmbeddingScorer(max_seq_length=pieces, threads=1, vector_store=None, activation_scales="row"))


def test_onnx_int8_same_with_calls_at_once() -> None:
    """The shipped model's one-text calls run side by side (``threads``): every vector is bitwise the one-at-a-time
    vector."""
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    batch = texts(30, seed=5)
    for pieces in (10, 128):
        one = OnnxEmbeddingScorer(max_seq_length=pieces, threads=1, vector_store=None).embed(batch)
        four = OnnxEmbeddingScorer(max_seq_length=pieces, threads=4, vector_store=None).embed(batch)
        assert one.tobytes() == four.tobytes(), pieces


def test_onnx_row_model_same_at_one_and_two_threads() -> None:
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    batch = texts(30, seed=4)
    one = OnnxEmbeddingScorer(max_seq_length=128, threads=1, vector_store=None, activation_scales="row").embed(batch)
    two = OnnxEmbeddingScorer(max_seq_length=128, threads=2, vector_store=None, activation_scales="row").embed(batch)
    assert one.tobytes() == two.tobytes()


@pytest.mark.parametrize("pieces", [10, 256])
def test_sentence_transformers_on_the_cpu(pieces: int) -> None:
    from ragtrim.scoring.embedding import EmbeddingScorer

    check(lambda: EmbeddingScorer(max_seq_length=pieces, threads=1, vector_store=None))


def test_torch_direct_on_the_cpu() -> None:
    from ragtrim.scoring.torch_backend import TorchEmbeddingScorer

    check(lambda: TorchEmbeddingScorer(device="cpu", max_seq_length=32, vector_store=None))


def test_the_vectors_are_still_minilms() -> None:
    # Same-length groups and one text per call change no vector beyond float noise: both against
    # sentence-transformers' own padded batch, fp32.
    from ragtrim.scoring.embedding import (
        DEFAULT_EMBEDDING_MODEL,
        EmbeddingScorer,
        _load_sentence_transformer,
        resolve_model,
    )
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    batch = texts(12, seed=4)
    model = _load_sentence_transformer(resolve_model(DEFAULT_EMBEDDING_MODEL), "cpu")
    reference = model.encode(batch, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                             show_progress_bar=False)
    grouped = EmbeddingScorer(threads=1, vector_store=None).embed(batch)
    single = OnnxEmbeddingScorer(quantized=False, threads=1, vector_store=None).embed(batch)
    assert float(np.max(np.abs(grouped - reference))) < 1e-5
    assert float(np.min(np.sum(single * reference, axis=1))) > 0.9999
