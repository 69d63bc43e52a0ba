"""Fitting the query adapter on small synthetic requests: the gradient is the loss's, training moves a gold chunk
that the raw query misses to the top, and the same input gives the same matrix."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from ragtrim.scoring.adapter import load_adapter
from ragtrim_bench.relevance.adapter import choose_l2, write_adapter
from ragtrim_bench.relevance.adapter_fit import (
    Features,
    FitConfig,
    column_weights,
    fit,
    folds_of,
    fused,
    gold_ranks,
    loss_and_gradient,
)


def synthetic(n: int = 60, k: int = 6, d: int = 8, seed: int = 0) -> Features:
    """Requests whose gold chunk lies along a rotation of the query (so the raw cosine misses it) and whose
    distractors lie near the raw query: separable by a linear map, not by the identity."""
    rng = np.random.default_rng(seed)
    rotation = np.linalg.qr(rng.standard_normal((d, d)))[0]
    qs, ps, gold = [], [], []
    for i in range(n):
        q = rng.standard_normal(d)
        q /= np.linalg.norm(q)
        g = rotation @ q
        chunks = [q + 0.3 * rng.standard_normal(d) for _ in range(k - 1)]
        slot = i % k
        chunks.insert(slot, g + 0.05 * rng.standard_normal(d))
        ps.append([c / np.linalg.norm(c) for c in chunks])
        qs.append(q)
        gold.append(slot)
    columns = tuple("a" if i % 2 else "b" for i in range(n))
    return Features(np.array(qs), np.array(ps), np.zeros((n, k)), np.array(gold), columns,
                    tuple(f"doc{i // 3}" for i in range(n)))


def test_gradient_matches_finite_differences() -> None:
    f = synthetic(n=10, k=4, d=5)
    config = FitConfig(l2=0.1, temperature=0.2)
    w = column_weights(f.columns)
    delta = np.random.default_rng(1).standard_normal((5, 5)) * 0.1
    _, grad = loss_and_gradient(delta, f, w, config)
    eps = 1e-6
    for i, j in [(0, 0), (1, 3), (4, 2)]:
        up, down = delta.copy(), delta.copy()
        up[i, j] += eps
        down[i, j] -= eps
        numeric = (loss_and_gradient(up, f, w, config)[0] - loss_and_gradient(down, f, w, config)[0]) / (2 * eps)
        assert grad[i, j] == pytest.approx(numeric, rel=1e-4, abs=1e-7)


def test_training_lowers_the_loss_and_lifts_the_gold() -> None:
    f = synthetic()
    before = gold_ranks(fused(None, f), f.gold)
    delta, losses = fit(f, FitConfig(l2=0.001, temperature=0.1, steps=300, learning_rate=0.02))
    after = gold_ranks(fused(delta, f), f.gold)
    assert losses[-1] < 0.5 * losses[0]
    assert (before == 1).mean() < 0.2  # the raw query misses most golds
    assert (after == 1).mean() > 0.9


def test_a_strong_pull_keeps_the_identity() -> None:
    delta, _ = fit(synthetic(), FitConfig(l2=100.0, steps=100, learning_rate=0.02))
    assert np.abs(delta).max() < 0.01


def test_same_input_same_matrix(tmp_path: Path) -> None:
    config = FitConfig(l2=0.01, steps=50, learning_rate=0.01)
    a, _ = fit(synthetic(seed=3), config)
    b, _ = fit(synthetic(seed=3), config)
    assert a.tobytes() == b.tobytes()
    write_adapter(tmp_path / "a.npz", a, "test")
    time.sleep(2.1)  # a zip entry stamped with the time of writing would differ now (2 s resolution)
    write_adapter(tmp_path / "b.npz", b, "test")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    # stored in half precision: the map read back is the fitted one to float16's rounding
    assert load_adapter(str(tmp_path / "a.npz")) == pytest.approx(np.eye(8) + a, abs=1e-3)


def test_column_weights_sum_to_one_per_column_equally() -> None:
    w = column_weights(["a", "a", "a", "b"])
    assert w.tolist() == pytest.approx([1 / 6, 1 / 6, 1 / 6, 1 / 2])


def test_folds_keep_a_document_together() -> None:
    groups = [f"doc{i % 7}" for i in range(70)]
    folds = folds_of(groups, 5)
    for doc in set(groups):
        assert len({int(folds[i]) for i, g in enumerate(groups) if g == doc}) == 1
    assert len(set(folds.tolist())) > 1


def test_choose_l2_prefers_the_larger_pull_on_a_tie() -> None:
    cols = {"a": {"top3": 0.5}, "b": {"top3": 0.7}}
    better = {"a": {"top3": 0.6}, "b": {"top3": 0.7}}
    assert choose_l2({0.001: cols, 0.01: cols}) == 0.01
    assert choose_l2({0.001: better, 0.01: cols}) == 0.001


def test_features_must_agree_in_length() -> None:
    f = synthetic(n=4)
    with pytest.raises(Exception, match="one row per request"):
        Features(f.queries, f.passages[:3], f.bm25, f.gold, f.columns, f.groups)


@pytest.mark.model
def test_the_rebuild_script_reads_the_shared_data(shared_data: Path) -> None:
    from ragtrim_bench.relevance.adapter import collect

    f = collect({"cuad": 2, "kv": 1})
    assert f.columns == ("cuad", "cuad", "kv")
    assert f.passages.shape == (3, 20, 384) and f.queries.shape == (3, 384)
    assert np.allclose(np.linalg.norm(f.passages, axis=2), 1.0, atol=1e-3)
    assert f.bm25[2, 19] == f.bm25[2, 0 if f.gold[2] != 0 else 1]  # KV's 19 chunks padded with a distractor's copy
    assert not f.groups[0].startswith("cuad/") and f.groups[2].startswith("kv/")  # a contract; a request
