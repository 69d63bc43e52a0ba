"""LlamaIndex integration: ``RagtrimPostprocessor``, a node postprocessor that trims a query's retrieved nodes.

Depends on llama-index-core only (``pip install 'ragtrim[llamaindex]'``). Every trim is reported as the
instrumentation event ``RagtrimTrimEvent`` (inside the postprocessor's span), as a ``reranking`` event of the legacy
callback manager, and as ``last_result`` on the postprocessor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ragtrim.errors import InputError, MissingDependencyError

try:
    from llama_index.core.bridge.pydantic import PrivateAttr, field_serializer
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]  # re-exported, unlisted
    from llama_index.core.instrumentation.events import BaseEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("llama-index-core", "llamaindex", "ragtrim.integrations.llamaindex") from exc

from ragtrim.integrations._common import (
    METADATA_KEYS,
    METADATA_SCORE,
    METADATA_TOKENS,
    METADATA_TOKENS_REMOVED,
    as_score,
    build_pipeline,
    check_options,
    chunk_ids,
    kept_items,
    options_config,
    options_from_config,
    trim_report,
)
from ragtrim.models import Chunk, TrimResult
from ragtrim.pipeline import Pipeline

__all__ = [
    "METADATA_SCORE",
    "METADATA_TOKENS",
    "METADATA_TOKENS_REMOVED",
    "MODEL_NAME",
    "PAYLOAD_KEY",
    "RagtrimPostprocessor",
    "RagtrimTrimEvent",
    "chunks_to_nodes",
    "node_ids",
    "nodes_to_chunks",
]

MODEL_NAME = "ragtrim"
"""``model_name`` in the payload of the legacy callback manager's ``reranking`` event."""
PAYLOAD_KEY = "ragtrim_trim"
"""Key of the trim report in that event's end payload."""

dispatcher = get_dispatcher(__name__)


class RagtrimTrimEvent(BaseEvent):
    """One trim, sent to LlamaIndex's instrumentation event handlers when the postprocessor returns.

    ``removals`` lists every node removed or shortened: ``Removal.to_dict()`` plus ``node_index`` (the position in
    the retrieved list) and ``node_id``; ``stages`` has each stage's node and token counts and seconds. ``span_id``
    is the postprocessor's span.
    """

    query: str
    tokenizer: str
    nodes_in: int
    nodes_out: int
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    removals: list[dict[str, Any]]
    stages: list[dict[str, Any]]

    @classmethod
    def class_name(cls) -> str:
        return "RagtrimTrimEvent"


# -- conversion -----------------------------------------------------------------------------------------------------
def node_ids(nodes: Sequence[NodeWithScore]) -> list[str]:
    """Chunk ids for ``nodes``: their node ids when all are distinct, else positions "0", "1"... (the same node
    retrieved twice, e.g. by a fusion retriever, makes them positions)."""
    return chunk_ids([n.node.node_id for n in nodes])


def nodes_to_chunks(nodes: Sequence[NodeWithScore]) -> tuple[Chunk, ...]:
    """One Chunk per node: the node's text (``get_content`` without metadata), a metadata copy, the id from
    ``node_ids`` and the retriever's score (so ``scorer="given"`` ranks by it)."""
    for index, item in enumerate(nodes):
        if not isinstance(item, NodeWithScore):
            raise InputError(
                f"node at index {index} must be a llama_index NodeWithScore, got {type(item).__name__}"
            )
    return tuple(
        Chunk(
            text=item.node.get_content(metadata_mode=MetadataMode.NONE),
            id=cid,
            metadata=dict(item.node.metadata),
            score=as_score(item.score, f"node at index {index}", "score"),
        )
        for index, (item, cid) in enumerate(zip(nodes, node_ids(nodes)))
    )


def _hidden(keys: Sequence[str]) -> list[str]:
    return [*keys, *(k for k in METADATA_KEYS if k not in keys)]


def chunks_to_nodes(result: TrimResult, nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """The kept chunks of ``result`` as copies of their original nodes, in the pipeline's output order.

    Each copy keeps the node's class, id, relationships and metadata and the retriever's score, takes the (possibly
    shortened) text, and adds ``ragtrim_score``, ``ragtrim_tokens`` and ``ragtrim_tokens_removed`` to the metadata,
    excluded from what the LLM and the embedding model see. The originals are not modified.
    """
    out: list[NodeWithScore] = []
    for item, chunk, added in kept_items(result, nodes, node_ids(nodes)):
        node: BaseNode = item.node
        copy = node.model_copy(update={
            "metadata": {**node.metadata, **added},
            "excluded_llm_metadata_keys": _hidden(node.excluded_llm_metadata_keys),
            "excluded_embed_metadata_keys": _hidden(node.excluded_embed_metadata_keys),
        })
        if chunk.text != node.get_content(metadata_mode=MetadataMode.NONE):
            copy.set_content(chunk.text)  # assigns a new value on the copy; the original's text is untouched
        out.append(item.model_copy(update={"node": copy}))
    return out


def _query(query_bundle: QueryBundle | None) -> str:
    return "" if query_bundle is None else query_bundle.query_str


# -- the postprocessor ----------------------------------------------------------------------------------------------
class RagtrimPostprocessor(BaseNodePostprocessor):
    """A node postprocessor that trims retrieved nodes with a ragtrim pipeline (``node_postprocessors=[...]``).

    Parameters (those of ``trim()``):
        pipeline: the ragtrim Pipeline to run; by default ``ragtrim.default_pipeline(budget=budget,
            tokenizer=tokenizer, scorer=scorer)``. Give either ``pipeline`` or the other three.
        budget: max tokens of all returned node texts together, joined by blank lines; an int >= 0 or None.
        tokenizer: the token counter name or object (default cl100k_base).
        scorer: how the default pipeline ranks nodes: ``"auto"`` (as ``trim()``), a named scorer, or ``"given"``:
            the retriever's own scores (``NodeWithScore.score``), reused at no cost.

    Returned nodes are copies (same class, id, relationships and metadata, the retriever's score) with the trimmed
    text and ``ragtrim_score``, ``ragtrim_tokens`` and ``ragtrim_tokens_removed`` in their metadata, hidden from the
    LLM and the embedding model. What was removed and why goes to the instrumentation event ``RagtrimTrimEvent``,
    to the legacy callback manager (a ``reranking`` event whose end payload holds it under ``"ragtrim_trim"``) and
    to ``last_result``. ``trim_nodes`` returns the full ``TrimResult`` for direct use.
    """

    pipeline: Pipeline | None = None
    budget: int | None = None
    tokenizer: Any = None
    scorer: str = "auto"

    _pipeline: Pipeline = PrivateAttr()
    _last_result: TrimResult | None = PrivateAttr(default=None)

    def __init__(
        self,
        *,
        pipeline: Pipeline | None = None,
        budget: int | None = None,
        tokenizer: Any = None,
        scorer: str = "auto",
        **kwargs: Any,
    ) -> None:
        check_options(pipeline, budget, tokenizer, scorer)  # before pydantic: a ConfigError naming the parameter
        fields: dict[str, Any] = {"pipeline": pipeline, "budget": budget, "tokenizer": tokenizer, "scorer": scorer}
        super().__init__(**fields, **kwargs)
        self._pipeline = build_pipeline(pipeline, budget, tokenizer, scorer)

    @classmethod
    def class_name(cls) -> str:
        return "RagtrimPostprocessor"

    # -- serialisation: to_dict()/to_json() write the options as data, from_dict() rebuilds them --------------------
    @field_serializer("pipeline")
    def _pipeline_config(self, pipeline: Pipeline | None) -> Any:
        return None if pipeline is None else pipeline.to_dict()

    @field_serializer("tokenizer")
    def _tokenizer_config(self, tokenizer: Any) -> Any:
        return options_config(None, None, tokenizer, "auto")["tokenizer"]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **kwargs: Any) -> RagtrimPostprocessor:
        """Rebuild from ``to_dict()`` output; a pipeline config is data (``Pipeline.from_dict``'s rules)."""
        config = {k: v for k, v in {**data, **kwargs}.items() if k != "class_name"}
        return cls(**options_from_config(config))

    # -- trimming ---------------------------------------------------------------------------------------------------
    @property
    def trim_pipeline(self) -> Pipeline:
        """The pipeline actually run (``pipeline`` or the default one built from the other options)."""
        return self._pipeline

    @property
    def last_result(self) -> TrimResult | None:
        """The ``TrimResult`` of the latest trim through ``postprocess_nodes`` / ``apostprocess_nodes`` (None before
        the first). One attribute for all callers: under concurrent queries read the events instead."""
        return self._last_result

    def trim_nodes(self, nodes: Sequence[NodeWithScore], query: str = "") -> tuple[list[NodeWithScore], TrimResult]:
        """Trim already-retrieved nodes: the nodes to return and the full TrimResult (no events)."""
        result = self._pipeline.run(nodes_to_chunks(nodes), query=query)
        return chunks_to_nodes(result, nodes), result

    def _reranking_event(self, nodes: Sequence[NodeWithScore], query: str) -> Any:
        payload: dict[str, Any] = {EventPayload.NODES: list(nodes), EventPayload.MODEL_NAME: MODEL_NAME, EventPayload.QUERY_STR: query}
        return self.callback_manager.event(CBEventType.RERANKING, payload=payload)

    def _report(self, event: Any, nodes: Sequence[NodeWithScore], out: list[NodeWithScore], result: TrimResult) -> None:
        self._last_result = result
        report = trim_report(result, [n.node.node_id for n in nodes], noun="node")
        event.on_end(payload={EventPayload.NODES: out, PAYLOAD_KEY: report})
        dispatcher.event(RagtrimTrimEvent(**report))

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        with self._reranking_event(nodes, query) as event:
            out, result = self.trim_nodes(nodes, query)
            self._report(event, nodes, out, result)
        return out

    @dispatcher.span  # the mixin spans only the abstract sync method; the async one gets its span here
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        with self._reranking_event(nodes, query) as event:
            # Tokenizing, hashing and embedding are CPU work: keep them off the event loop.
            out, result = await asyncio.to_thread(self.trim_nodes, nodes, query)
            self._report(event, nodes, out, result)
        return out
