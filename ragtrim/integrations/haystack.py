"""Haystack integration: ``RagtrimTrimmer``, a pipeline component that trims retrieved documents for a query.

Depends on haystack-ai only (``pip install 'ragtrim[haystack]'``). What was removed comes out of two extra output
sockets, as Haystack's own components report what they set aside (``failed_documents``): ``removed_documents``
(each dropped document, its meta saying which stage dropped it and why) and ``trim_report`` (the whole trace).
"""

# No ``from __future__ import annotations``: Haystack 2.x reads ``run``'s annotations as they are, and a string
# 'list[Document]' would not connect to a retriever's list[Document].
import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from ragtrim.errors import InputError, MissingDependencyError

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("haystack-ai", "haystack", "ragtrim.integrations.haystack") from exc

from ragtrim.integrations._common import (
    METADATA_SCORE,
    METADATA_TOKENS,
    METADATA_TOKENS_REMOVED,
    as_score,
    build_pipeline,
    check_options,
    chunk_ids,
    dropped_items,
    kept_items,
    options_config,
    options_from_config,
    trim_report,
)
from ragtrim.models import Chunk, TrimResult
from ragtrim.pipeline import Pipeline

__all__ = [
    "METADATA_DETAIL",
    "METADATA_KEPT_ID",
    "METADATA_REASON",
    "METADATA_SCORE",
    "METADATA_STAGE",
    "METADATA_TOKENS",
    "METADATA_TOKENS_REMOVED",
    "RagtrimTrimmer",
    "chunks_to_documents",
    "document_ids",
    "documents_to_chunks",
    "removed_documents",
]

METADATA_STAGE = "ragtrim_stage"
"""Meta key of a removed document: the stage that dropped it (``dedup``, ``relevance``, ``budget``...)."""
METADATA_REASON = "ragtrim_reason"
"""Meta key of a removed document: why (``exact_duplicate``, ``near_duplicate``, ``over_budget``...)."""
METADATA_DETAIL = "ragtrim_detail"
"""Meta key of a removed document: the stage's human detail (e.g. "jaccard 0.91 with chunk 17")."""
METADATA_KEPT_ID = "ragtrim_kept_id"
"""Meta key of a removed duplicate: the chunk id of the document kept instead (None for other reasons)."""


# -- conversion -----------------------------------------------------------------------------------------------------
def document_ids(documents: Sequence[Document]) -> list[str]:
    """Chunk ids for ``documents``: their ids when all are distinct, else positions "0", "1"... (Haystack derives
    an id from content and meta, so the same document retrieved twice makes them positions)."""
    return chunk_ids([d.id for d in documents])


def documents_to_chunks(documents: Sequence[Document]) -> tuple[Chunk, ...]:
    """One Chunk per Document: its content, a meta copy, the id from ``document_ids`` and the retriever's score (so
    ``scorer="given"`` ranks by it). A document without text content is an InputError: ragtrim trims text."""
    for index, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise InputError(f"document at index {index} must be a haystack Document, got {type(doc).__name__}")
        if not isinstance(doc.content, str):
            raise InputError(f"document at index {index} (id {doc.id!r}) has no text content (content is None); "
                             "ragtrim trims text: convert or route non-text documents before the trimmer")
    return tuple(
        Chunk(text=doc.content or "", id=cid, metadata=dict(doc.meta),
              score=as_score(doc.score, f"document at index {index}", "score"))
        for index, (doc, cid) in enumerate(zip(documents, document_ids(documents)))
    )


def chunks_to_documents(result: TrimResult, documents: Sequence[Document]) -> list[Document]:
    """The kept chunks of ``result`` as copies of their original Documents, in the pipeline's output order: same
    id, meta and score, the (possibly shortened) content, and ``ragtrim_score``, ``ragtrim_tokens`` and
    ``ragtrim_tokens_removed`` added to the meta. The originals are not modified."""
    return [
        dataclasses.replace(doc, content=chunk.text, meta={**doc.meta, **added})
        for doc, chunk, added in kept_items(result, documents, document_ids(documents))
    ]


def removed_documents(result: TrimResult, documents: Sequence[Document]) -> list[Document]:
    """Copies of the Documents that ``result`` dropped, in input order, unchanged but for their meta: the stage, the
    reason, the detail, the kept duplicate's chunk id and ``ragtrim_tokens_removed`` (all the tokens it had)."""
    return [
        dataclasses.replace(doc, meta={
            **doc.meta,
            METADATA_STAGE: removal.stage,
            METADATA_REASON: removal.reason,
            METADATA_DETAIL: removal.detail,
            METADATA_KEPT_ID: removal.kept_id,
            METADATA_TOKENS_REMOVED: tokens,
        })
        for doc, removal, tokens in dropped_items(result, documents, document_ids(documents))
    ]


# -- the component --------------------------------------------------------------------------------------------------
@component
class RagtrimTrimmer:
    """Trims retrieved documents for the query with a ragtrim pipeline; put it after a retriever or a ranker.

    ``__init__`` only checks and stores the options (those of ``trim()``); models load in ``warm_up``, which a
    Haystack pipeline calls before its first run.

    :param pipeline: the ragtrim Pipeline to run; by default ``ragtrim.default_pipeline(budget=budget,
        tokenizer=tokenizer, scorer=scorer)``. Give either ``pipeline`` or the other three.
    :param budget: max tokens of all returned contents together, joined by blank lines; an int >= 0 or None.
    :param tokenizer: the token counter name or object (default cl100k_base).
    :param scorer: how the default pipeline ranks documents: ``"auto"`` (as ``trim()``), a named scorer, or
        ``"given"``: the retriever's own scores (``Document.score``), reused at no cost.
    """

    def __init__(
        self,
        *,
        pipeline: Pipeline | None = None,
        budget: int | None = None,
        tokenizer: Any = None,
        scorer: str = "auto",
    ) -> None:
        check_options(pipeline, budget, tokenizer, scorer)
        self.pipeline = pipeline
        self.budget = budget
        self.tokenizer = tokenizer
        self.scorer = scorer
        self.trim_pipeline = build_pipeline(pipeline, budget, tokenizer, scorer)

    def warm_up(self) -> None:
        """Load the pipeline's models (the relevance stage's MiniLM, when it uses one), once."""
        self.trim_pipeline.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """The options as data (a pipeline as ``Pipeline.to_dict()``), in Haystack's component envelope."""
        return default_to_dict(self, **options_config(self.pipeline, self.budget, self.tokenizer, self.scorer))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RagtrimTrimmer":
        """Rebuild from ``to_dict()`` output; a pipeline config is data (``Pipeline.from_dict``'s rules)."""
        init = options_from_config(data.get("init_parameters", {}))
        built: RagtrimTrimmer = default_from_dict(cls, {**data, "init_parameters": init})
        return built

    def trim_documents(self, documents: Sequence[Document], query: str) -> tuple[dict[str, Any], TrimResult]:
        """What ``run`` returns, and the full TrimResult."""
        result = self.trim_pipeline.run(documents_to_chunks(documents), query=query)
        outputs = {
            "documents": chunks_to_documents(result, documents),
            "removed_documents": removed_documents(result, documents),
            "trim_report": trim_report(result, [d.id for d in documents], noun="document"),
        }
        return outputs, result

    @component.output_types(documents=list[Document], removed_documents=list[Document], trim_report=dict[str, Any])
    def run(self, documents: list[Document], query: str) -> dict[str, Any]:
        """Trim ``documents`` for ``query``.

        :param documents: the retrieved Documents, best first or in any order (the pipeline ranks them).
        :param query: the user's question.
        :returns: ``documents``: the kept Documents (copies with the trimmed content and ``ragtrim_*`` meta);
            ``removed_documents``: the dropped ones, their meta saying which stage and why; ``trim_report``: the
            JSON-ready trace (token counts, every removal with ``document_index`` and ``document_id``, per-stage
            counts).
        """
        return self.trim_documents(documents, query)[0]

    @component.output_types(documents=list[Document], removed_documents=list[Document], trim_report=dict[str, Any])
    async def run_async(self, documents: list[Document], query: str) -> dict[str, Any]:
        """``run`` for ``AsyncPipeline``: the trim (tokenizing, hashing, embedding: CPU work) runs in a worker
        thread, so the event loop stays free."""
        outputs, _ = await asyncio.to_thread(self.trim_documents, documents, query)
        return outputs
