"""Score fusion: ``HybridScorer`` combines several scorers by reciprocal rank fusion or a weighted mix of min-max
normalized scores, each model voting only on the texts it can read; ``hybrid`` is the named BM25 + MiniLM mix."""

from __future__ import annotations

import math
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
from ragtrim.text.scripts import warm_up as script_table_warm_up

FusionMethod = Literal["rrf", "mix"]


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; all-equal scores map to 0 (they tell nothing apart); +inf maps to 1, -inf and NaN to 0."""
    if scores.size == 0:
        return scores
    finite = np.isfinite(scores)
    if not finite.all():  # +inf ranks first, -inf and NaN last; the finite ones are scaled between
        out: np.ndarray = np.where(scores == np.inf, 1.0, 0.0)
        if finite.any():
            out[finite] = min_max(scores[finite])
        return out
    lo, hi = float(scores.min()), float(scores.max())
    if not hi > lo:
        return np.zeros_like(scores)
    if math.isfinite(hi - lo):
        return (scores - lo) / (hi - lo)
    half: np.ndarray = scores / 2  # the span overflows a double (scores near +-1e308): scale first
    return (half - lo / 2) / (hi / 2 - lo / 2)


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

    ``sure_weights`` (``mix`` only) lets the first part decide when it is sure: its decisiveness on a call is how far
    its best score stands above the second best, as a share of how far the best stands above the mean
    (``(s1 - s2) / (s1 - mean)``, 0 for a tie at the top, about 1 when one text alone stands out), and the weights move
    linearly from ``weights`` (decisiveness ``sure_gap[0]`` or less) to ``sure_weights`` (``sure_gap[1]`` or more).
    With BM25 first this is what a question about an identifier needs (a key, a version, a ticket number that one
    passage holds word for word): a model that reads meanings, not strings, would outvote it.

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
        "sure_weights": [ListOf(Interval(float, 0.0, None), "a list of numbers >= 0"), None],
        "sure_gap": [ListOf(Interval(float, 0.0, 1.0), "two numbers in [0, 1], the first below the second"),],
    }

    scorers: Sequence[Scorer | str] = ("bm25", "embedding")
    method: FusionMethod = "mix"
    weights: Sequence[float] | None = None
    rrf_k: int = 60
    script_gate: bool = True
    sure_weights: Sequence[float] | None = None
    sure_gap: Sequence[float] = (0.5, 0.9)
    _resolved: tuple[Scorer, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.scorers = tuple(self.scorers)  # the caller's list may change; the fused parts must not
        self.weights = tuple(self.weights) if self.weights is not None else None
        self.sure_weights = tuple(self.sure_weights) if self.sure_weights is not None else None
        self.sure_gap = tuple(self.sure_gap)

    def _check_params(self) -> None:
        weights = self.weights
        if weights is not None:
            if len(weights) != len(self.scorers):
                raise ConfigError(f"weights must have one entry per scorer ({len(self.scorers)}), got {len(weights)}: "
                                  f"{list(weights)!r}")
            if sum(weights) <= 0:
                raise ConfigError(f"weights must not all be 0, got {list(weights)!r}")
        sure = self.sure_weights
        if sure is not None:
            if self.method != "mix":
                raise ConfigError(f"sure_weights needs method='mix', got method={self.method!r}")
            if len(sure) != len(self.scorers):
                raise ConfigError(f"sure_weights must have one entry per scorer ({len(self.scorers)}), got "
                                  f"{len(sure)}: {list(sure)!r}")
            if sum(sure) <= 0:
                raise ConfigError(f"sure_weights must not all be 0, got {list(sure)!r}")
        lo_hi = tuple(self.sure_gap)
        if len(lo_hi) != 2 or not lo_hi[0] < lo_hi[1]:
            raise ConfigError(f"sure_gap must be two numbers in [0, 1], the first below the second, got {list(lo_hi)!r}")

    @property
    def name(self) -> str:
        return f"hybrid-{self.method}(" + ",".join(s.name for s in self.parts()) + ")"

    def parts(self) -> tuple[Scorer, ...]:
        if self._resolved is None:
            self._resolved = tuple(get_scorer(s) for s in self.scorers)
        return self._resolved

    def warm_up(self) -> None:
        script_table_warm_up()  # the table that tells which part reads a text (``_readers``), built once
        warm_up_scorers(self.parts())

    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        if not isinstance(query, str):
            return
        weights = self._reach(self.weights or (1.0,) * len(self.scorers))
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
        voted: list[tuple[int, np.ndarray, np.ndarray]] = []  # (part, indices it voted on, its scores there)
        reach = self._reach(weights)
        for i, (w, scorer, mask) in enumerate(zip(reach, self.parts(), self._readers(query, texts, reach))):
            if w == 0 or (mask is not None and not any(mask)):
                continue
            idx = np.arange(n) if mask is None else np.flatnonzero(mask)
            part = texts if mask is None else [texts[int(k)] for k in idx]
            voted.append((i, idx, np.asarray(scorer.score(query, part), dtype=np.float64)))
        weights = self._call_weights(weights, voted, n)
        total = np.zeros(n, dtype=np.float64)
        weight_sum = np.zeros(n, dtype=np.float64)
        for i, idx, s in voted:
            if weights[i] == 0:
                continue
            total[idx] += weights[i] * (rrf_contribution(s, self.rrf_k) if self.method == "rrf" else min_max(s))
            weight_sum[idx] += weights[i]
        # Each text's fused score is the weighted mean over the parts that voted on it: with no gate acting, every
        # text has every vote and this is the plain weighted sum over the sum of the weights.
        return [float(x) for x in total / np.where(weight_sum > 0, weight_sum, 1.0)]

    def _reach(self, weights: Sequence[float]) -> Sequence[float]:
        """Each part's largest weight on any call: a part of weight 0 that gets a weight when the first is sure
        must run."""
        if self.sure_weights is None:
            return weights
        return [max(w, sw) for w, sw in zip(weights, self.sure_weights)]

    def _call_weights(self, weights: Sequence[float], voted: list[tuple[int, np.ndarray, np.ndarray]],
                      n: int) -> Sequence[float]:
        """``weights``, moved toward ``sure_weights`` as far as the first part is decisive on this call (it must
        have voted on every text)."""
        if self.sure_weights is None or not voted or voted[0][0] != 0 or len(voted[0][1]) != n:
            return weights
        t = decisiveness(voted[0][2])
        lo, hi = self.sure_gap
        share = min(1.0, max(0.0, (t - lo) / (hi - lo)))
        return [w + share * (sw - w) for w, sw in zip(weights, self.sure_weights)]


def decisiveness(scores: np.ndarray) -> float:
    """How far the best score stands above the second best, as a share of how far it stands above the mean: 0 when
    the top is tied (or there are fewer than two scores), n / (n - 1) when the best alone stands above n - 1 equal
    others (about 1 for a retrieval's 20)."""
    if scores.size < 2:
        return 0.0
    top2 = np.partition(scores, -2)[-2:]
    best, second = float(top2[1]), float(top2[0])
    spread = best - float(scores.mean())
    return (best - second) / spread if spread > 0 else 0.0


@named_scorer("hybrid")
def _hybrid() -> Scorer:
    return HybridScorer(scorers=("bm25", "embedding"), method="mix", weights=(0.15, 0.85))
