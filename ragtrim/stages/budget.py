"""The hard token budget: what this stage returns always fits ``max_tokens`` under the pipeline's counter, counted
on the joined text the model receives (chunks joined by ``CHUNK_SEPARATOR``, separators included).

Chunks are admitted by priority (score or original position); one that does not fit is cut at a sentence boundary
when ``truncate`` is on and enough room is left, else dropped. Output keeps the input order. ``fit_joined`` checks
the exact joined count and is also the pipeline's final guard, after any later stage reorders the chunks.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal, get_args

from ragtrim._util.validate import Boolean, Constraints, Interval, Options
from ragtrim.components import component
from ragtrim.errors import BudgetError
from ragtrim.models import CHUNK_SEPARATOR, Chunk, Removal, StageOutput, TrimContext
from ragtrim.stages.base import Stage, chunk_tokens, register_stage, score_order
from ragtrim.text.sentences import sentence_spans
from ragtrim.text.tokens import TokenCounter

BudgetPolicy = Literal["score", "position"]


def priority_order(chunks: tuple[Chunk, ...], policy: BudgetPolicy) -> list[int]:
    """Indices of ``chunks`` best-first: by score (unscored last), ties and ``position`` by original order."""
    if policy == "position":
        return list(range(len(chunks)))
    return score_order(chunks)


def truncate_to_fit(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of whole sentences of ``text`` with at most ``max_tokens`` tokens ('' if none fits)."""
    spans = sentence_spans(text)
    lo, hi = 0, len(spans)  # number of sentences kept; invariant: prefix(lo) fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[: spans[mid - 1][1]].rstrip()) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[: spans[lo - 1][1]].rstrip() if lo else ""


def joined_tokens(chunks: tuple[Chunk, ...], counter: TokenCounter, overhead: int = 0) -> int:
    """Tokens of the chunks joined as the model receives them, plus ``overhead`` per chunk."""
    if not chunks:
        return 0
    return counter.count(CHUNK_SEPARATOR.join(c.text for c in chunks)) + overhead * len(chunks)


def fit_joined(
    chunks: tuple[Chunk, ...],
    counter: TokenCounter,
    *,
    max_tokens: int,
    overhead: int = 0,
    policy: BudgetPolicy = "score",
    stage: str = "budget",
) -> tuple[tuple[Chunk, ...], tuple[Removal, ...]]:
    """Drop the lowest-priority unpinned chunks until the joined text fits ``max_tokens`` exactly.

    Per-chunk counts plus separators are an estimate: BPE merges across a separator (".\n\n" is one token, a
    trailing run of dots is not), so the exact count of the join is what decides. Raises BudgetError when pinned
    chunks alone do not fit."""
    total = joined_tokens(chunks, counter, overhead)
    if total <= max_tokens:
        return chunks, ()
    order = priority_order(chunks, policy)
    alive = dict(enumerate(chunks))
    removals: list[Removal] = []
    for i in reversed(order):
        c = chunks[i]
        if c.pinned:
            continue
        del alive[i]
        removals.append(
            Removal(c.id, stage, "over_budget", c.token_count or 0,
                    f"the joined text was {total} tokens with separators, over max_tokens {max_tokens}")
        )
        kept = tuple(alive[j] for j in sorted(alive))
        total = joined_tokens(kept, counter, overhead)
        if total <= max_tokens:
            return kept, tuple(removals)
    raise BudgetError(
        f"pinned chunks need {total} tokens joined with separators but max_tokens is {max_tokens}; "
        "raise the budget or unpin some chunks"
    )


@register_stage
@component
class TokenBudget(Stage):
    """Keep chunks until ``max_tokens`` is reached.

    Parameters:
        max_tokens: the budget for all chunk texts together (plus ``per_chunk_overhead_tokens`` each).
        policy: ``"score"`` admits the best-scored chunks first (unscored ones after, in order); ``"position"``
            admits in input order.
        truncate: cut a chunk that does not fit at a sentence boundary instead of dropping it.

    The budget covers the joined text: ``counter.count("\n\n".join(kept texts))`` plus the overheads is at most
    ``max_tokens`` (each chunk after the first pays for its separator).
        min_truncated_tokens: do not keep a truncated piece shorter than this.
        per_chunk_overhead_tokens: tokens your prompt template adds around each chunk (separators, titles).

    Pinned chunks are always kept; if they alone exceed the budget, ``BudgetError`` is raised.
    """

    name = "budget"
    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "max_tokens": [Interval(int, 0, None)],
        "policy": [Options(get_args(BudgetPolicy))],
        "truncate": [Boolean()],
        "min_truncated_tokens": [Interval(int, 1, None)],
        "per_chunk_overhead_tokens": [Interval(int, 0, None)],
    }

    max_tokens: int
    policy: BudgetPolicy = "score"
    truncate: bool = True
    min_truncated_tokens: int = 16
    per_chunk_overhead_tokens: int = 0

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        sep = counter.count(CHUNK_SEPARATOR)
        # Every kept chunk pays for one separator and the first one's is refunded: n chunks need n - 1 separators.
        overhead = self.per_chunk_overhead_tokens + sep

        def cost(c: Chunk) -> int:
            return chunk_tokens(c, counter) + overhead

        pinned_tokens = sum(cost(c) for c in chunks if c.pinned)
        if pinned_tokens - sep > self.max_tokens:
            raise BudgetError(
                f"pinned chunks need {pinned_tokens - sep} tokens but max_tokens is {self.max_tokens}; "
                "raise the budget or unpin some chunks"
            )
        remaining = self.max_tokens + sep - pinned_tokens
        kept: dict[int, Chunk] = {i: c for i, c in enumerate(chunks) if c.pinned}
        removals: list[Removal] = []
        for i in priority_order(chunks, self.policy):
            c = chunks[i]
            if c.pinned:
                continue
            need = cost(c)
            if need <= remaining:
                kept[i] = c
                remaining -= need
                continue
            room = remaining - overhead
            if self.truncate and room >= self.min_truncated_tokens:
                cut = truncate_to_fit(c.text, room, counter)
                n = counter.count(cut) if cut else 0
                if cut and n >= self.min_truncated_tokens:
                    kept[i] = dataclasses.replace(c, text=cut, token_count=n)
                    remaining -= n + overhead
                    removals.append(
                        Removal(c.id, self.name, "truncated", need - overhead - n,
                                f"cut at a sentence boundary from {need - overhead} to {n} tokens to fit the budget",
                                action="shortened")
                    )
                    continue
            removals.append(
                Removal(c.id, self.name, "over_budget", need - overhead,
                        f"needs {need - sep} tokens, {max(0, remaining - sep)} of {self.max_tokens} left")
            )
        out = tuple(kept[i] for i in sorted(kept))
        out, extra = fit_joined(out, counter, max_tokens=self.max_tokens, overhead=self.per_chunk_overhead_tokens,
                                policy=self.policy, stage=self.name)
        if extra:
            gone = {r.chunk_id for r in extra}
            removals = [r for r in removals if r.chunk_id not in gone] + list(extra)
        return StageOutput(context.with_chunks(out), tuple(removals),
                           info={"max_tokens": self.max_tokens, "tokens_left": max(0, remaining - sep)})
