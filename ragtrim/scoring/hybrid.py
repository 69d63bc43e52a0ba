"""Score fusion: ``HybridScorer`` combines several scorers by reciprocal rank fusion or a weighted mix of min-max
normalized scores, each model voting only on the texts it can read; ``hybrid`` is the named BM25 + MiniLM mix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import ClassVar, Literal, get_args

import numpy as np

from ragtrim._util.validate import Boolean, Constraints, Interval, ListOf, Options
from ragtrim.components import Component, component, register
from ragtrim.errors import ConfigError
from ragtrim.scoring.base import Scorer, check_score_inputs, prefetch_scores, warm_up_scorers
from ragtrim.scoring.registry import get_scorer, named_scorer, scorer_param
from ragtrim.scoring.scripts import readable, scripts_read

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

    With ``script_gate`` (the default) a part whose model reads only some scripts (``scripts_read()``: the bundled
    MiniLM reads Latin-script text) votes only where it can read: not at all when the query is mostly in other
    scripts (it is not even run), and not on a passage that is; such a passage's score is the weighted mean of the
    parts that read it, on the same scale. A part that reads nothing of a call keeps its vote when no other part
    is left (the gate never leaves a text unscored).
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "scorers": [ListOf(scorer_param(), "a non-empty list of scorers or scorer names", nonempty=True)],
        "method": [Options(get_args(FusionMethod))],
        "weights": [ListOf(Interval(float, 0.0, None), "a list of numbers >= 0"), None],
        "rrf_k": [Interval(int, 0, None)],
        "script_gate": [Boolean()],
    }

    scorers: Sequence[Scorer | str] = ("bm25", "embedding")
    method: FusionMethod = "mix"
    weights: Sequence[float] | None = None
    rrf_k: int = 60
    script_gate: bool = True
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
        if not isinstance(query, str):
            return
        weights = self.weights or (1.0,) * len(self.scorers)
        for scorer, mask in zip(self.parts(), self._readers(query, texts, weights)):
            if mask is None:
                prefetch_scores([scorer], query, texts)
            elif any(mask):
                prefetch_scores([scorer], query, [t for t, ok in zip(texts, mask) if ok])

    def _readers(self, query: str, texts: Sequence[str], weights: Sequence[float]) -> list[list[bool] | None]:
        """For each part: None when it votes on every text, else which texts it reads (all False: it does not vote,
        and is not run). Parts of weight 0 never vote."""
        parts = self.parts()
        masks: list[list[bool] | None] = [None if w > 0 else [False] * len(texts) for w in weights]
        if not self.script_gate:
            return masks
        voters = [i for i, w in enumerate(weights) if w > 0]
        gated: dict[int, list[bool]] = {}
        for i in voters:
            scripts = scripts_read(parts[i])
            if scripts is None:
                continue
            gated[i] = ([readable(scripts, t) for t in texts] if readable(scripts, query) else [False] * len(texts))
        if not gated:
            return masks
        for i, mask in gated.items():
            masks[i] = mask
        # No text may lose every vote: where no part reads it, the gated parts vote after all.
        for k in range(len(texts)):
            if not any((m := masks[i]) is None or m[k] for i in voters):
                for mask in gated.values():  # the same lists as in masks
                    mask[k] = True
        return [None if m is not None and all(m) else m for m in masks]

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        if not texts:
            return []
        weights = self.weights or (1.0,) * len(self.scorers)
        n = len(texts)
        total = np.zeros(n, dtype=np.float64)
        weight_sum = np.zeros(n, dtype=np.float64)
        for w, scorer, mask in zip(weights, self.parts(), self._readers(query, texts, weights)):
            if w == 0 or (mask is not None and not any(mask)):
                continue
            idx = np.arange(n) if mask is None else np.flatnonzero(mask)
            part = texts if mask is None else [texts[int(i)] for i in idx]
            s = np.asarray(scorer.score(query, part), dtype=np.float64)
            total[idx] += w * (rrf_contribution(s, self.rrf_k) if self.method == "rrf" else min_max(s))
            weight_sum[idx] += w
        # Each text's fused score is the weighted mean over the parts that voted on it: with no gate acting, every
        # text has every vote and this is the plain weighted sum over the sum of the weights.
        return [float(x) for x in total / np.where(weight_sum > 0, weight_sum, 1.0)]


@named_scorer("hybrid")
def _hybrid() -> Scorer:
    return HybridScorer(scorers=("bm25", "embedding"), method="mix", weights=(0.15, 0.85))
