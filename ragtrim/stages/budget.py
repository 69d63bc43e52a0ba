"""The hard token budget: what this stage returns always fits ``max_tokens`` under the pipeline's counter.

Chunks are admitted by priority (score or original position); one that does not fit is cut at a sentence boundary
when ``truncate`` is on and enough room is left, else dropped. Output keeps the input order.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ragtrim._validate import check_bool, check_choice, check_int
from ragtrim.errors import BudgetError
from ragtrim.models import Chunk, Removal, StageOutput, TrimContext
from ragtrim.stages.base import Stage, chunk_tokens, register_stage, score_order
from ragtrim.text import sentence_spans
from ragtrim.tokens import TokenCounter

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


@register_stage
class TokenBudget(Stage):
    """Keep chunks until ``max_tokens`` is reached.

    Parameters:
        max_tokens: the budget for all chunk texts together (plus ``per_chunk_overhead_tokens`` each).
        policy: ``"score"`` admits the best-scored chunks first (unscored ones after, in order); ``"position"``
            admits in input order.
        truncate: cut a chunk that does not fit at a sentence boundary instead of dropping it.
        min_truncated_tokens: do not keep a truncated piece shorter than this.
        per_chunk_overhead_tokens: tokens your prompt template adds around each chunk (separators, titles).

    Pinned chunks are always kept; if they alone exceed the budget, ``BudgetError`` is raised.
    """

    name = "budget"

    def __init__(
        self,
        *,
        max_tokens: int,
        policy: BudgetPolicy = "score",
        truncate: bool = True,
        min_truncated_tokens: int = 16,
        per_chunk_overhead_tokens: int = 0,
    ) -> None:
        check_int("max_tokens", max_tokens, minimum=0)
        check_choice("policy", policy, ("score", "position"))
        check_bool("truncate", truncate)
        check_int("min_truncated_tokens", min_truncated_tokens, minimum=1)
        check_int("per_chunk_overhead_tokens", per_chunk_overhead_tokens, minimum=0)
        self.max_tokens = max_tokens
        self.policy = policy
        self.truncate = truncate
        self.min_truncated_tokens = min_truncated_tokens
        self.per_chunk_overhead_tokens = per_chunk_overhead_tokens

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        overhead = self.per_chunk_overhead_tokens

        def cost(c: Chunk) -> int:
            return chunk_tokens(c, counter) + overhead

        pinned_tokens = sum(cost(c) for c in chunks if c.pinned)
        if pinned_tokens > self.max_tokens:
            raise BudgetError(
                f"pinned chunks need {pinned_tokens} tokens but max_tokens is {self.max_tokens}; "
                "raise the budget or unpin some chunks"
            )
        remaining = self.max_tokens - pinned_tokens
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
                        f"needs {need} tokens, {remaining} of {self.max_tokens} left")
            )
        out = tuple(kept[i] for i in sorted(kept))
        return StageOutput(context.with_chunks(out), tuple(removals),
                           info={"max_tokens": self.max_tokens, "tokens_left": remaining})
