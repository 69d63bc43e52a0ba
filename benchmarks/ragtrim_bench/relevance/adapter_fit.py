"""Fitting a query adapter (``ragtrim.scoring.adapter``) with numpy alone: the loss and its gradient, Adam from the
identity, the default recipe's fused ranking to judge it by, and folds by document for cross-validation.

The model: a request's query vector ``q`` becomes ``z = normalize((I + D) q)``; its passages' cosines ``z . p_k``
over a temperature are the logits of a softmax over the request's chunks, the gold chunk the target (the others are
hard negatives by construction). The loss is the weighted mean cross-entropy plus ``l2 * |D|^2``, the pull toward
the identity that keeps general ranking. Full-batch and started at ``D = 0``: no randomness anywhere, so the same
features give the same matrix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragtrim.errors import ConfigError
from ragtrim.scoring.auto import BALANCED_BM25_WEIGHT, BALANCED_SURE_BM25_WEIGHT, SURE_GAP
from ragtrim.scoring.hybrid import decisiveness, min_max


@dataclass(frozen=True, slots=True)
class Features:
    """Requests as vectors: ``queries`` (n, d) and ``passages`` (n, k, d) unit vectors, ``bm25`` (n, k) BM25 scores
    over each request's chunks, ``gold`` (n,) the gold chunk's index, ``columns`` and ``groups`` (n,) each request's
    column and source document (the unit of a fold)."""

    queries: np.ndarray
    passages: np.ndarray
    bm25: np.ndarray
    gold: np.ndarray
    columns: tuple[str, ...]
    groups: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.gold)
        if not (self.queries.shape[0] == self.passages.shape[0] == self.bm25.shape[0] == len(self.columns)
                == len(self.groups) == n):
            raise ConfigError(f"features must hold one row per request ({n}) in every field")

    def subset(self, mask: np.ndarray) -> Features:
        idx = np.flatnonzero(mask)
        return Features(self.queries[idx], self.passages[idx], self.bm25[idx], self.gold[idx],
                        tuple(self.columns[i] for i in idx), tuple(self.groups[i] for i in idx))


@dataclass(frozen=True, slots=True)
class FitConfig:
    """``l2``: the pull toward the identity; ``temperature``: the softmax's; ``steps`` of full-batch Adam at
    ``learning_rate``."""

    l2: float = 0.01
    temperature: float = 0.1
    steps: int = 200
    learning_rate: float = 1e-3


def column_weights(columns: Sequence[str]) -> np.ndarray:
    """Each column weighs the same in the loss, whatever its number of requests; the weights sum to 1."""
    names = np.asarray(columns)
    out = np.zeros(len(names))
    kinds = list(dict.fromkeys(columns))
    for c in kinds:
        m = names == c
        out[m] = 1.0 / (m.sum() * len(kinds))
    return out


def loss_and_gradient(delta: np.ndarray, f: Features, weights: np.ndarray, config: FitConfig) -> tuple[float,
                                                                                                          np.ndarray]:
    """The weighted cross-entropy plus ``l2 * |delta|^2``, and its gradient with respect to ``delta``."""
    full = np.eye(delta.shape[0]) + delta
    mapped = f.queries @ full.T
    norm = np.linalg.norm(mapped, axis=1, keepdims=True)
    z = mapped / norm
    logits = np.einsum("nd,nkd->nk", z, f.passages) / config.temperature
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(f.gold))
    loss = float((weights * -np.log(p[rows, f.gold] + 1e-300)).sum() + config.l2 * (delta * delta).sum())
    d_logits = p
    d_logits[rows, f.gold] -= 1.0
    d_logits *= weights[:, None] / config.temperature
    d_z = np.einsum("nk,nkd->nd", d_logits, f.passages)
    d_mapped = (d_z - z * (d_z * z).sum(axis=1, keepdims=True)) / norm
    return loss, d_mapped.T @ f.queries + 2 * config.l2 * delta


def fit(f: Features, config: FitConfig, weights: np.ndarray | None = None) -> tuple[np.ndarray, list[float]]:
    """``delta`` after ``config.steps`` of Adam from zero, and the loss before each step."""
    w = column_weights(f.columns) if weights is None else weights
    d = f.queries.shape[1]
    delta = np.zeros((d, d))
    m = np.zeros_like(delta)
    v = np.zeros_like(delta)
    losses = []
    for t in range(1, config.steps + 1):
        loss, g = loss_and_gradient(delta, f, w, config)
        losses.append(loss)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        delta -= config.learning_rate * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return delta, losses


def cosines(delta: np.ndarray | None, f: Features) -> np.ndarray:
    """Each chunk's cosine with the (mapped) query, (n, k)."""
    q = f.queries if delta is None else f.queries @ (np.eye(delta.shape[0]) + delta).T
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    out: np.ndarray = np.einsum("nd,nkd->nk", q, f.passages)
    return out


def fused(delta: np.ndarray | None, f: Features) -> np.ndarray:
    """The default recipe's mixed score (``ragtrim.scoring.auto.balanced_scorer``): min-max BM25 and MiniLM, BM25's
    weight rising from ``BALANCED_BM25_WEIGHT`` to ``BALANCED_SURE_BM25_WEIGHT`` with its decisiveness."""
    cos = cosines(delta, f)
    lo, hi = SURE_GAP
    out = np.empty_like(cos)
    for i in range(len(f.gold)):
        share = min(1.0, max(0.0, (decisiveness(f.bm25[i]) - lo) / (hi - lo)))
        w = BALANCED_BM25_WEIGHT + share * (BALANCED_SURE_BM25_WEIGHT - BALANCED_BM25_WEIGHT)
        out[i] = w * min_max(f.bm25[i]) + (1 - w) * min_max(cos[i])
    return out


def gold_ranks(scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """The gold chunk's rank (1 = best; a tie counts in the gold's favour)."""
    g = scores[np.arange(len(gold)), gold]
    ranks: np.ndarray = 1 + (scores > g[:, None]).sum(axis=1)
    return ranks


def folds_of(groups: Sequence[str], n_folds: int) -> np.ndarray:
    """Each request's fold: a hash of its document, so no document is on both sides of a fold."""
    return np.array([hashlib.sha256(g.encode("utf-8")).digest()[1] % n_folds for g in groups])


def cross_validated_ranks(f: Features, config: FitConfig, n_folds: int) -> np.ndarray:
    """Each request's gold rank under the fused score with an adapter fitted on the other folds."""
    fold = folds_of(f.groups, n_folds)
    ranks = np.zeros(len(f.gold), dtype=int)
    for k in range(n_folds):
        test = fold == k
        if not test.any():
            continue
        delta, _ = fit(f.subset(~test), config)
        ranks[test] = gold_ranks(fused(delta, f.subset(test)), f.gold[test])
    return ranks


def rank_summary(ranks: np.ndarray, columns: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per column: the share of requests with the gold at rank 1, within the top 3 and the top 5, and the mean rank."""
    names = np.asarray(columns)
    return {c: {"n": int((names == c).sum()),
                "top1": round(float((ranks[names == c] <= 1).mean()), 4),
                "top3": round(float((ranks[names == c] <= 3).mean()), 4),
                "top5": round(float((ranks[names == c] <= 5).mean()), 4),
                "mean_rank": round(float(ranks[names == c].mean()), 3)}
            for c in dict.fromkeys(columns)}
