"""LangChain integration: ``RagtrimRetriever`` wraps any ``BaseRetriever``; ``RagtrimCompressor`` is a document compressor.

Depends on langchain-core only (``pip install 'ragtrim[langchain]'``). Every trim is traced as a child run named
``ragtrim`` whose output lists what was removed and why, and as the custom event ``ragtrim_trim`` (same data), so
LangSmith-style tracers and ``astream_events`` consumers both see it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ragtrim._util.validate import plain_number
from ragtrim.errors import ConfigError, InputError, MissingDependencyError

try:
    from langchain_core.callbacks import (
        AsyncCallbackManager,
        AsyncCallbackManagerForRetrieverRun,
        CallbackManager,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import BaseModel, ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("langchain-core", "langchain", "ragtrim.integrations.langchain") from exc

from ragtrim.integrations._common import (
    METADATA_SCORE,
    METADATA_TOKENS,
    METADATA_TOKENS_REMOVED,
    build_pipeline,
    check_options,
    chunk_ids,
    kept_items,
    trim_report,
)
from ragtrim.models import Chunk, TrimResult
from ragtrim.pipeline import Pipeline

__all__ = [
    "EVENT_NAME",
    "METADATA_SCORE",
    "METADATA_TOKENS",
    "METADATA_TOKENS_REMOVED",
    "RUN_NAME",
    "RagtrimCompressor",
    "RagtrimRetriever",
    "chunks_to_documents",
    "document_ids",
    "documents_to_chunks",
    "trim_event",
]

EVENT_NAME = "ragtrim_trim"
"""Name of the custom callback event dispatched after every trim (``on_custom_event`` / ``astream_events``)."""
RUN_NAME = "ragtrim"
"""Name of the child run that wraps every trim (visible in LangSmith and other tracers)."""


# -- conversion -----------------------------------------------------------------------------------------------------
def document_ids(documents: Sequence[Document]) -> list[str]:
    """Chunk ids for ``documents``: their ``Document.id`` when every one has a distinct id, else positions "0", "1"...

    All-or-nothing, so a position id can never collide with a real id.
    """
    return chunk_ids([d.id for d in documents])


def documents_to_chunks(documents: Sequence[Document], *, score_key: str | None = None) -> tuple[Chunk, ...]:
    """One Chunk per Document (text, metadata copy, id from ``document_ids``; score from ``metadata[score_key]``)."""
    for index, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise InputError(
                f"document at index {index} must be a langchain_core Document, got {type(doc).__name__}"
            )
    out: list[Chunk] = []
    for index, (doc, cid) in enumerate(zip(documents, document_ids(documents))):
        score: float | None = None
        if score_key is not None and score_key in doc.metadata:
            raw = plain_number(doc.metadata[score_key])  # numpy scores (np.float32) from a vector store too
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                raise InputError(
                    f"document at index {index}: metadata[{score_key!r}] must be a number to use as its score, "
                    f"got {raw!r}; pass score_key=None to ignore it"
                )
            try:
                score = float(raw)
            except OverflowError:
                raise InputError(
                    f"document at index {index}: metadata[{score_key!r}] must be within float's range (about "
                    "1.8e308), got an int too large to convert"
                ) from None
        out.append(Chunk(text=doc.page_content, id=cid, metadata=dict(doc.metadata), score=score))
    return tuple(out)


def chunks_to_documents(result: TrimResult, documents: Sequence[Document]) -> list[Document]:
    """The kept chunks of ``result`` as copies of their original Documents, in the pipeline's output order.

    Each copy keeps the original's class, id and metadata, takes the (possibly shortened) text, and adds
    ``ragtrim_score`` (the chunk's score, None when no stage scored it), ``ragtrim_tokens`` and
    ``ragtrim_tokens_removed``. The originals are not modified.
    """
    return [
        doc.model_copy(update={"page_content": chunk.text, "metadata": {**doc.metadata, **added}})
        for doc, chunk, added in kept_items(result, documents, document_ids(documents))
    ]


def trim_event(result: TrimResult, documents: Sequence[Document]) -> dict[str, Any]:
    """The JSON-ready summary sent with the ``ragtrim_trim`` event and as the ``ragtrim`` run's output.

    Each removal carries ``document_index`` (position in the base retriever's list) and ``document_id``.
    """
    return trim_report(result, [d.id for d in documents], noun="document")


# -- configuration --------------------------------------------------------------------------------------------------
def _check_config(pipeline: Any, budget: Any, tokenizer: Any, score_key: Any, scorer: Any) -> None:
    check_options(pipeline, budget, tokenizer, scorer)
    if score_key is not None and (not isinstance(score_key, str) or not score_key):
        raise ConfigError(f"score_key must be a metadata key (non-empty str) or None, got {score_key!r}")
    if scorer == "given" and score_key is None:
        raise ConfigError("scorer='given' ranks documents by the base retriever's own scores: name the metadata key "
                          "that holds them with score_key= (for a vector store, e.g. a retriever that copies "
                          "similarity_search_with_relevance_scores' score into metadata)")


class _Trimmer:
    """The pipeline plus what both LangChain classes share: conversion and tracing (the pipeline warms up once,
    on its first run)."""

    def __init__(self, pipeline: Pipeline, score_key: str | None) -> None:
        self.pipeline = pipeline
        self.score_key = score_key

    def trim(self, documents: Sequence[Document], query: str) -> tuple[list[Document], TrimResult]:
        result = self.pipeline.run(documents_to_chunks(documents, score_key=self.score_key), query=query)
        return chunks_to_documents(result, documents), result

    def traced(self, documents: Sequence[Document], query: str, manager: CallbackManager) -> list[Document]:
        run = manager.on_chain_start(None, {"query": query, "documents": len(documents)}, name=RUN_NAME)
        try:
            out, result = self.trim(documents, query)
        except BaseException as exc:
            run.on_chain_error(exc)
            raise
        event = trim_event(result, documents)
        run.get_child().on_custom_event(EVENT_NAME, event, run_id=run.run_id)
        run.on_chain_end(event)
        return out

    async def atraced(
        self, documents: Sequence[Document], query: str, manager: AsyncCallbackManager
    ) -> list[Document]:
        run = await manager.on_chain_start(None, {"query": query, "documents": len(documents)}, name=RUN_NAME)
        try:
            # Tokenizing, hashing and embedding are CPU work: keep them off the event loop.
            out, result = await asyncio.to_thread(self.trim, documents, query)
        except BaseException as exc:
            await run.on_chain_error(exc)
            raise
        event = trim_event(result, documents)
        await run.get_child().on_custom_event(EVENT_NAME, event, run_id=run.run_id)
        await run.on_chain_end(event)
        return out


def _note_base_error(exc: BaseException, base: BaseRetriever) -> None:
    exc.add_note(f"raised by the base retriever {type(base).__name__} wrapped in RagtrimRetriever")


class _RagtrimFields(BaseModel):
    """The parameters, checks and trimmer both LangChain classes share (checked before pydantic sees them, so a bad
    value is a ragtrim ConfigError naming the parameter)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pipeline: Pipeline | None = None
    budget: int | None = None
    tokenizer: Any = None
    score_key: str | None = None
    scorer: str = "auto"

    _trimmer: _Trimmer = PrivateAttr()

    def __init__(
        self,
        *,
        pipeline: Pipeline | None = None,
        budget: int | None = None,
        tokenizer: Any = None,
        score_key: str | None = None,
        scorer: str = "auto",
        **kwargs: Any,
    ) -> None:
        budget = plain_number(budget)  # np.int64(500) computed by the caller is a budget too
        _check_config(pipeline, budget, tokenizer, score_key, scorer)
        super().__init__(pipeline=pipeline, budget=budget, tokenizer=tokenizer, score_key=score_key, scorer=scorer,
                         **kwargs)
        self._trimmer = _Trimmer(build_pipeline(pipeline, budget, tokenizer, scorer), score_key)

    @property
    def trim_pipeline(self) -> Pipeline:
        """The pipeline actually run (``pipeline`` or the default one built from ``budget``/``tokenizer``)."""
        return self._trimmer.pipeline

    def trim_documents(self, documents: Sequence[Document], query: str) -> tuple[list[Document], TrimResult]:
        """Trim already-retrieved documents: the Documents to return and the full TrimResult (no callbacks)."""
        return self._trimmer.trim(documents, query)


# -- the retriever --------------------------------------------------------------------------------------------------
class RagtrimRetriever(_RagtrimFields, BaseRetriever):
    """A retriever that fetches from ``base_retriever`` and trims the result with a ragtrim pipeline.

    Parameters:
        base_retriever: any LangChain retriever; it is invoked (sync or async) as a child run.
        pipeline: the ragtrim Pipeline to run; by default ``ragtrim.default_pipeline(budget=budget,
            tokenizer=tokenizer)`` (HTML cleanup, duplicates, then the budget when one is given).
        budget: max tokens of all returned page contents together, joined by blank lines (only without
            ``pipeline``). An int >= 0, as in ``trim()``: 0 returns no documents, each recorded as over budget.
        tokenizer: the token counter name or object (only without ``pipeline``; default cl100k_base).
        score_key: a metadata key holding the base retriever's relevance score, used as the chunk score
            (e.g. by the budget's score policy). None ignores metadata scores.
        scorer: how the default pipeline ranks documents (only without ``pipeline``): ``"auto"`` (as ``trim()``),
            a named scorer, or ``"given"``: the base retriever's own scores (``score_key``), reused at no cost. A
            vector store that embedded the passages and the query with MiniLM has already computed what the
            ``embedding`` scorer would.

    Returned Documents are copies of the base retriever's (same class, id and metadata) with the trimmed text and
    ``ragtrim_score``, ``ragtrim_tokens`` and ``ragtrim_tokens_removed`` added to their metadata. What was removed
    and why is reported through callbacks: the child run ``ragtrim`` and the custom event ``ragtrim_trim``.
    ``trim_documents`` returns the full ``TrimResult`` for direct use.
    """

    base_retriever: BaseRetriever

    def __init__(self, *, base_retriever: BaseRetriever, **kwargs: Any) -> None:
        if not isinstance(base_retriever, BaseRetriever):
            raise ConfigError(
                f"base_retriever must be a LangChain BaseRetriever, got {type(base_retriever).__name__}; "
                "wrap a vector store with vectorstore.as_retriever()"
            )
        super().__init__(base_retriever=base_retriever, **kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        try:
            documents = self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()})
        except Exception as exc:
            _note_base_error(exc, self.base_retriever)
            raise
        return self._trimmer.traced(documents, query, run_manager.get_child())

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        try:
            documents = await self.base_retriever.ainvoke(query, config={"callbacks": run_manager.get_child()})
        except Exception as exc:
            _note_base_error(exc, self.base_retriever)
            raise
        return await self._trimmer.atraced(documents, query, run_manager.get_child())


# -- the compressor -------------------------------------------------------------------------------------------------
class RagtrimCompressor(_RagtrimFields, BaseDocumentCompressor):
    """A ``BaseDocumentCompressor`` running a ragtrim pipeline (e.g. inside ``ContextualCompressionRetriever``).

    Parameters are those of ``RagtrimRetriever`` without ``base_retriever``. Output Documents carry the same
    ``ragtrim_*`` metadata; the trace goes to the callbacks passed in (run ``ragtrim``, event ``ragtrim_trim``).
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        manager = CallbackManager.configure(inheritable_callbacks=callbacks)
        return self._trimmer.traced(list(documents), query, manager)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        manager = AsyncCallbackManager.configure(inheritable_callbacks=callbacks)
        return await self._trimmer.atraced(list(documents), query, manager)
