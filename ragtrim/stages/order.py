"""Ordering for the reader: input order, best-first, best-at-both-ends ("lost in the middle"), or a stable
source/id order that lets a serving engine reuse the prompt's cached token prefix across requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, get_args

from ragtrim._util.validate import Constraints, Options, Text
from ragtrim.components import component
from ragtrim.models import Chunk, StageOutput, TrimContext
from ragtrim.stages.base import Stage, register_stage, score_order
from ragtrim.text.tokens import TokenCounter

OrderStrategy = Literal["original", "score", "lost_in_the_middle", "prefix_cache"]


def lost_in_the_middle_order(chunks: Sequence[Chunk]) -> list[int]:
    """Best chunks at the two ends, the weakest in the middle.

    Readers attend most to the start and end of a long context (Liu et al., "Lost in the Middle"), so ranks
    1, 3, 5, ... fill the front and ranks 2, 4, 6, ... fill the back in reverse: [1, 3, 5, ..., 6, 4, 2].
    """
    ranked = score_order(chunks)
    front = ranked[0::2]
    back = ranked[1::2]
    return front + back[::-1]


def prefix_cache_order(chunks: Sequence[Chunk], source_key: str) -> list[int]:
    """Indices sorted by (source, id): a pure function of the chunk set, independent of scores and arrival order."""
    def key(i: int) -> tuple[str, str]:
        source = chunks[i].metadata.get(source_key, "")
        return (str(source) if source is not None else "", chunks[i].id)

    return sorted(range(len(chunks)), key=key)


@register_stage
@component
class Reorder(Stage):
    """Put the kept chunks in the order the reader should see them. Drops nothing, changes no text.

    Strategies:
        ``original``: input order (no-op).
        ``score``: best first (``Chunk.score``; unscored last; ties keep input order).
        ``lost_in_the_middle``: best chunks at both ends, weakest in the middle, because readers use the edges of a
            long context best.
        ``prefix_cache``: sorted by ``metadata[source_key]`` then ``id``. Serving engines (vLLM, SGLang) reuse the
            KV cache only for an exact leading token prefix. Scores shift with every query, so score orders make the
            chunk block differ from the first chunk on; a deterministic order that depends only on *which*
            documents are present gives the same token prefix whenever the same documents come back (follow-up
            turns, repeated or related questions), so the cached prefix is reused. Put the query after the chunks.
    """

    name = "order"
    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "strategy": [Options(get_args(OrderStrategy))],
        "source_key": [Text("a non-empty metadata key")],
    }

    strategy: OrderStrategy = "original"
    source_key: str = "source"

    def order(self, chunks: Sequence[Chunk]) -> list[int]:
        """The permutation of ``range(len(chunks))`` this strategy produces."""
        if self.strategy == "score":
            return score_order(chunks)
        if self.strategy == "lost_in_the_middle":
            return lost_in_the_middle_order(chunks)
        if self.strategy == "prefix_cache":
            return prefix_cache_order(chunks, self.source_key)
        return list(range(len(chunks)))

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        perm = self.order(context.chunks)
        out = tuple(context.chunks[i] for i in perm)
        info: dict[str, Any] = {"strategy": self.strategy, "order": [c.id for c in out]}
        return StageOutput(context.with_chunks(out), info=info)
