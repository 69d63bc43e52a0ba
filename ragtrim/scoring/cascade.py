"""A two-stage scorer: a cheap first stage ranks every text, an expensive second stage rescores only the best few.

What a cold MiniLM pass costs grows with the word pieces it reads; BM25 costs almost nothing. Rescoring only the
candidates that can still matter, on their leading word pieces, keeps most of MiniLM's ranking at a fraction of
its cost (the numbers are in benchmarks/results/tuning/net_latency_dev_cascades.json).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Literal, get_args

from ragtrim._util.validate import Constraints, Interval, Options
from ragtrim.components import Component, component, register
from ragtrim.scoring.base import Scorer, best_first, check_score_inputs, prefetch_scores, warm_up_scorers
from ragtrim.scoring.registry import get_scorer, scorer_param
from ragtrim.scoring.scripts import scripts_read

Rest = Literal["below", "first"]
"""Where ``CascadeScorer`` puts the texts it does not rescore (see its docstring)."""


@register("scorer", "cascade")
@component
class CascadeScorer(Component):
    """Rank all texts with ``first``; rescore the top ``candidates`` with ``second``.

    The number rescored is ``max(candidates, ceil(candidate_share x n))`` (capped at n). Rescored texts keep
    ``second``'s score. The others, with ``rest="below"``, are placed just below the worst rescored one, in
    ``first``'s order, spaced by ``1e-6`` so that min-max scaling downstream still spans the rescored texts' range;
    with ``rest="first"`` they keep ``first``'s own score where it is lower than that: for a ``first`` whose scores
    sit on ``second``'s scale (a smaller model trained to give the larger one's vectors), so how far apart the rest
    are survives.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "first": [scorer_param()],
        "second": [scorer_param()],
        "candidates": [Interval(int, 1, None)],
        "candidate_share": [Interval(float, 0.0, 1.0)],
        "rest": [Options(get_args(Rest))],
    }

    first: Scorer | str = "bm25"
    second: Scorer | str = "embedding"
    candidates: int = 8
    candidate_share: float = 0.0
    rest: Rest = "below"

    @property
    def name(self) -> str:
        rest = "" if self.rest == "below" else f",rest={self.rest}"
        return f"cascade({get_scorer(self.first).name}->{get_scorer(self.second).name}@{self.candidates}{rest})"

    def warm_up(self) -> None:
        warm_up_scorers([get_scorer(self.first), get_scorer(self.second)])

    def scripts_read(self) -> frozenset[str] | None:
        """The scripts both stages' models read (None: every script, when neither is a model that says), so that a
        fused scorer gives the cascade no vote where either stage cannot read the text (``ragtrim.scoring.scripts``)."""
        known = [s for s in (scripts_read(get_scorer(self.first)), scripts_read(get_scorer(self.second)))
                 if s is not None]
        return frozenset.intersection(*known) if known else None

    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        """Start the second stage on the texts it will rescore (all of them when they are few enough; else the
        first stage ranks them now, which a later ``score`` repeats from its caches). A first stage that runs a model
        (one with a ``prefetch``) takes a while to rank, so the second stage starts on the query meanwhile."""
        n = len(texts)
        if n == 0 or not isinstance(query, str):
            return
        top: Sequence[str] = texts
        first, second = get_scorer(self.first), get_scorer(self.second)
        if self.rescored(n) < n:
            if callable(getattr(first, "prefetch", None)):
                prefetch_scores([second], query, [])  # the query, which the second stage needs anyway
            ranked = first.score(query, texts)
            top = [texts[i] for i in best_first(ranked)[: self.rescored(n)]]
        prefetch_scores([second], query, top)

    def rescored(self, n: int) -> int:
        """How many of ``n`` texts the second stage reads."""
        return min(n, max(self.candidates, math.ceil(self.candidate_share * n)))

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        n = len(texts)
        if n == 0:
            return []
        first = get_scorer(self.first).score(query, texts)
        order = best_first(first)
        top = order[: self.rescored(n)]
        second = get_scorer(self.second).score(query, [texts[i] for i in top])
        out: list[float] = [0.0] * n
        for i, s in zip(top, second):
            out[i] = float(s)
        floor = min(second)
        for rank, i in enumerate(order[len(top):], start=1):
            below = floor - 1e-6 * rank
            out[i] = min(float(first[i]), below) if self.rest == "first" else below
        return out
