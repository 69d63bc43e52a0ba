"""Score fusion: ``HybridScorer`` combines several scorers by reciprocal rank fusion or a weighted mix of min-max
normalized scores; ``hybrid`` is the named BM25 + MiniLM mix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import ClassVar, Literal, get_args

import numpy as np

from ragtrim._util.validate import Constraints, Interval, ListOf, Options
from ragtrim.components import Component, component, register
from ragtrim.errors import ConfigError
from ragtrim.scoring.base import Scorer, check_score_inputs, prefetch_scores, warm_up_scorers
from ragtrim.scoring.registry import get_scorer, named_scorer, scorer_param

FusionMethod = Literal["rrf", "mix"]


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; all-equal scores map to 0 (they tell nothing apart)."""
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    return (scores - lo) / (hi - lo) if hi > lo else np.zeros_like(scores)


def rrf_contribution(scores: np.ndarray, k: int) -> np.ndarray:
    """``1 / (k + rank)`` with rank 1 for the best score; tied scores share the better rank."""
    # rank = 1 + number of strictly better scores
    ranks = 1 + (scores[None, :] > scores[:, None]).sum(axis=1)
    out: np.ndarray = 1.0 / (k + ranks.astype(np.float64))
    return out


@register("scorer", "hybrid")
@component
class HybridScorer(Component):
    """Fuses several scorers: reciprocal rank fusion (``rrf``) or a weighted sum of min-max normalized scores
    (``mix``).

    RRF gives each text ``sum_i w_i / (rrf_k + rank_i)`` (rank from 1; ties share the better rank) and ignores score
    scales entirely; ``mix`` keeps how far apart the scores are, which the adaptive cut-offs can use.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "scorers": [ListOf(scorer_param(), "a non-empty list of scorers or scorer names", nonempty=True)],
        "method": [Options(get_args(FusionMethod))],
        "weights": [ListOf(Interval(float, 0.0, None), "a list of numbers >= 0"), None],
        "rrf_k": [Interval(int, 0, None)],
    }

    scorers: Sequence[Scorer | str] = ("bm25", "embedding")
    method: FusionMethod = "mix"
    weights: Sequence[float] | None = None
    rrf_k: int = 60
    _resolved: tuple[Scorer, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.scorers = tuple(self.scorers)  # the caller's list may change; the fused parts must not
        self.weights = tuple(self.weights) if self.weights is not None else None

    def _check_params(self) -> None:
        weights = self.weights
        if weights is not None:
            if len(weights) != len(self.scorers):
                raise ConfigError(f"weights must have one entry per scorer ({len(self.scorers)}), got {len(weights)}: "
                                  f"{list(weights)!r}")
            if sum(weights) <= 0:
                raise ConfigError(f"weights must not all be 0, got {list(weights)!r}")

    @property
    def name(self) -> str:
        return f"hybrid-{self.method}(" + ",".join(s.name for s in self.parts()) + ")"

    def parts(self) -> tuple[Scorer, ...]:
        if self._resolved is None:
            self._resolved = tuple(get_scorer(s) for s in self.scorers)
        return self._resolved

    def warm_up(self) -> None:
        warm_up_scorers(self.parts())

    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        prefetch_scores(self.parts(), query, texts)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        if not texts:
            return []
        weights = self.weights or (1.0,) * len(self.scorers)
        total = np.zeros(len(texts), dtype=np.float64)
        for w, scorer in zip(weights, self.parts()):
            if w == 0:
                continue
            s = np.asarray(scorer.score(query, texts), dtype=np.float64)
            total += w * (rrf_contribution(s, self.rrf_k) if self.method == "rrf" else min_max(s))
        return [float(x) / sum(weights) for x in total]


@named_scorer("hybrid")
def _hybrid() -> Scorer:
    return HybridScorer(scorers=("bm25", "embedding"), method="mix", weights=(0.15, 0.85))
