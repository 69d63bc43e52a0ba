"""Relevance scoring and the top-k cap: score every chunk against the query, keep the best (fixed k or adaptive).

The adaptive modes stop where the score curve drops: below a fraction of the best score, or at the largest gap.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from ragtrim._util.validate import Boolean, Constraints, Interval, Options
from ragtrim.components import AUTO_KEY, component
from ragtrim.errors import InputError
from ragtrim.models import Chunk, Removal, StageOutput, TrimContext
from ragtrim.scoring.auto import choose
from ragtrim.scoring.base import Scorer, best_first, prefetch_scores, warm_up_scorers
from ragtrim.scoring.registry import get_scorer, scorer_param
from ragtrim.stages.base import Stage, register_stage
from ragtrim.text.tokens import TokenCounter

RelevanceMode = Literal["top_k", "relative", "gap"]


def adaptive_keep_count(
    sorted_scores: list[float], *, mode: RelevanceMode, relative_threshold: float, gap_threshold: float
) -> int:
    """How many of the best-first ``sorted_scores`` to keep before the cap and the minimum apply.

    ``relative``: scores are shifted so the worst is 0, then everything >= ``relative_threshold`` x best is kept
    (the shift makes the rule work for negative scores such as cosines). ``gap``: cut before the first drop between
    neighbours that is >= ``gap_threshold`` x (best - worst); no such drop keeps everything.
    """
    n = len(sorted_scores)
    if mode == "top_k" or n == 0:
        return n
    best, worst = sorted_scores[0], sorted_scores[-1]
    spread = best - worst
    if spread <= 0:
        return n
    if mode == "relative":
        return sum(1 for s in sorted_scores if (s - worst) >= relative_threshold * spread)
    for i in range(1, n):
        if sorted_scores[i - 1] - sorted_scores[i] >= gap_threshold * spread:
            return i
    return n


def _given_scores(chunks: tuple[Chunk, ...]) -> list[float]:
    """``scorer="given"``: each chunk's own score; pinned chunks need none (they are kept and not ranked)."""
    missing = [c.id for c in chunks if c.score is None and not c.pinned]
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise InputError(f"scorer='given' ranks chunks by their own score, but chunk {shown} has none: give each "
                         "chunk a 'score' (in the LangChain classes: score_key names the metadata key that holds the "
                         "retriever's score), or pick a scorer that computes one")
    return [c.score if c.score is not None else 0.0 for c in chunks]


@register_stage
@component
class RelevanceFilter(Stage):
    """Score chunks against the query (sets ``Chunk.score``) and keep the best ones, in input order.

    Parameters:
        scorer: ``"auto"`` (decided per host by ``ragtrim.scoring.auto.choose``: ``"balanced"`` when MiniLM can run,
            else ``"bm25"``; the decision and its reason go into ``to_dict()`` under ``"auto"`` and into the trace),
            ``"balanced"`` (BM25 mixed with MiniLM over each passage's first 128 word pieces, BM25 weighing more when
            it is sure), ``"fast"`` (the faster preset: MiniLM over the first 10 pieces only), ``"bm25"``, ``"embedding"`` (MiniLM),
            ``"hybrid"`` (both, mixed), ``"given"`` (each chunk's own ``score``, as the retriever computed it: a
            vector store's similarity reused at no cost; every unpinned chunk must carry one) or any ``Scorer``
            object.
        mode: ``"top_k"`` keeps the ``top_k`` best; ``"relative"`` keeps chunks scoring at least
            ``relative_threshold`` of the way from the worst to the best score; ``"gap"`` cuts at the first drop of
            at least ``gap_threshold`` of the score range. In the adaptive modes ``top_k`` (if set) is a cap.
        top_k: the number kept in ``top_k`` mode, an upper cap otherwise. ``None``: no cap; in ``top_k`` mode the
            stage then only scores, for later stages (``compress``, ``budget`` with ``policy="score"``, ``order``).
        min_keep: never keep fewer than this many (when there are that many).
        relative_threshold, gap_threshold: the adaptive rules' fractions, in [0, 1].
        keep_scores: write the score into ``Chunk.score`` (off: only filter, keep the caller's scores).

    Pinned chunks are always kept and do not count toward ``top_k``. With an empty query, or fewer than two chunks,
    chunks pass unscored and unfiltered: there is nothing to rank (a lone chunk is kept whatever its score), and no
    model is loaded for it (``warm_up_on_first_run`` is off: the scorer warms up when a request first has something
    to rank). Removals: ``below_top_k`` (cut by the cap) or
    ``low_relevance`` (cut by an adaptive rule), with detail like ``"score 0.12 rank 14 of 20"``.
    """

    name = "relevance"
    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "scorer": [scorer_param(allow_auto=True)],
        "mode": [Options(get_args(RelevanceMode))],
        "top_k": [Interval(int, 1, None), None],
        "min_keep": [Interval(int, 0, None)],
        "relative_threshold": [Interval(float, 0.0, 1.0)],
        "gap_threshold": [Interval(float, 0.0, 1.0, closed="right")],
        "keep_scores": [Boolean()],
    }

    scorer: Scorer | str = "bm25"
    mode: RelevanceMode = "top_k"
    top_k: int | None = 5
    min_keep: int = 1
    relative_threshold: float = 0.5
    gap_threshold: float = 0.25
    keep_scores: bool = True

    def _scorer(self) -> Scorer | None:
        """The scorer to run; None for ``"given"`` (the chunks' own scores)."""
        if self.scorer == "given":
            return None
        return get_scorer(choose().scorer if self.scorer == "auto" else self.scorer)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.scorer == "auto":
            out[AUTO_KEY] = choose().to_dict()
        return out

    warm_up_on_first_run: ClassVar[bool] = False

    def warm_up(self) -> None:
        scorer = self._scorer()
        if scorer is not None:
            warm_up_scorers([scorer])

    def prefetch(self, context: TrimContext, *, counter: TokenCounter) -> None:
        """Start the scorer's model pass (if it has one, see ``CachedEmbedder.prefetch``) on the chunks as they
        arrive, when at least two different texts may need ranking; texts with a ``<`` (maybe HTML, which the HTML
        stage would change) are left out."""
        if len({c.text for c in context.chunks}) < 2 or not context.query.strip():
            return
        texts = [c.text for c in context.chunks if "<" not in c.text]
        scorer = self._scorer() if texts else None
        if scorer is not None:
            warm_up_scorers([scorer])
            prefetch_scores([scorer], context.query, texts)

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        if len(chunks) < 2 or not context.query.strip():
            return StageOutput(context, info={"scored": False})
        scorer = self._scorer()
        if scorer is not None:
            warm_up_scorers([scorer])
        scores = (_given_scores(chunks) if scorer is None
                  else [float(x) for x in scorer.score(context.query, [c.text for c in chunks])])
        scored = tuple(c.with_score(s) if self.keep_scores else c for c, s in zip(chunks, scores))
        candidates = [i for i, c in enumerate(chunks) if not c.pinned]
        cand_scores = [scores[i] for i in candidates]
        order = [candidates[j] for j in best_first(cand_scores)]
        sorted_scores = [scores[i] for i in order]
        n_adaptive = adaptive_keep_count(sorted_scores, mode=self.mode, relative_threshold=self.relative_threshold,
                                         gap_threshold=self.gap_threshold)
        n_cap = len(order) if self.top_k is None else min(self.top_k, len(order))
        floor = min(self.min_keep, len(order))
        n_keep = max(floor, min(n_adaptive, n_cap))
        keep = set(order[:n_keep]) | {i for i, c in enumerate(chunks) if c.pinned}
        rank_of = {i: r + 1 for r, i in enumerate(order)}
        removals: list[Removal] = []
        for i in order[n_keep:]:
            by_cap = rank_of[i] <= n_adaptive  # the adaptive rule alone would have kept it
            removals.append(
                Removal(
                    chunks[i].id, self.name, "below_top_k" if by_cap else "low_relevance", 0,
                    f"score {scores[i]:.4g} rank {rank_of[i]} of {len(order)}",
                )
            )
        kept = tuple(c for i, c in enumerate(scored) if i in keep)
        info: dict[str, Any] = {"scorer": "given" if scorer is None else scorer.name, "kept": len(kept),
                                "mode": self.mode}
        if self.scorer == "auto":
            info[AUTO_KEY] = choose().to_dict()
        return StageOutput(context.with_chunks(kept), tuple(removals), info=info)

