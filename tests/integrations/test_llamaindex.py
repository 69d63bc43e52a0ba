"""RagtrimPostprocessor against the real llama-index-core: direct calls, a query engine over an in-memory
VectorStoreIndex with llama-index-core's own MockLLM and MockEmbedding, its events and callbacks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import VectorStoreIndex
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import (
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from ragtrim.errors import ConfigError, InputError, StageError
from ragtrim.integrations.llamaindex import (
    PAYLOAD_KEY,
    RagtrimPostprocessor,
    RagtrimTrimEvent,
    chunks_to_nodes,
    node_ids,
    nodes_to_chunks,
)
from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.stages.relevance import RelevanceFilter
from tests.integrations.conftest import (
    CORPUS,
    SCORES,
    Exploding,
    ThreadProbe,
    dedup_budget,
    load_example,
    truncating_budget,
)


def corpus_nodes(with_ids: bool = True) -> list[NodeWithScore]:
    """The corpus as a retriever returns it: best first, with scores."""
    out = []
    for i, ((text, meta), score) in enumerate(zip(CORPUS, SCORES)):
        node = TextNode(text=text, metadata=dict(meta), **({"id_": f"doc-{i}"} if with_ids else {}))
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"file-{meta['source']}")
        out.append(NodeWithScore(node=node, score=score))
    return out


def summary(nodes: list[NodeWithScore]) -> list[tuple[str, str, float | None, dict[str, Any]]]:
    return [(n.node.node_id, n.node.get_content(metadata_mode=MetadataMode.NONE), n.score, dict(n.node.metadata))
            for n in nodes]


def snapshot(nodes: list[NodeWithScore]) -> list[dict[str, Any]]:
    return [n.model_dump() for n in nodes]


class TrimEvents(BaseEventHandler):
    """Collects the RagtrimTrimEvents that reach the root dispatcher."""

    events: list[RagtrimTrimEvent] = []  # noqa: RUF012 - a pydantic field: each instance gets its own list

    @classmethod
    def class_name(cls) -> str:
        return "TrimEvents"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, RagtrimTrimEvent):
            self.events.append(event)


@pytest.fixture
def trim_events() -> Iterator[TrimEvents]:
    handler = TrimEvents()
    root = get_dispatcher()
    root.add_event_handler(handler)
    yield handler
    root.event_handlers.remove(handler)


class TestConfig:
    """Defaults and invalid options common to all adapters: tests/integrations/test_common.py."""

    def test_defaults(self) -> None:
        p = RagtrimPostprocessor()
        assert (p.last_result, p.class_name()) == (None, "RagtrimPostprocessor")

    def test_zero_budget_is_valid_as_in_trim(self) -> None:
        p = RagtrimPostprocessor(budget=0, tokenizer="whitespace")
        assert p.postprocess_nodes(corpus_nodes()[:2], query_str="lifecycle") == []
        assert p.last_result is not None
        assert [r.reason for r in p.last_result.removals] == ["exact_duplicate", "over_budget"]

    def test_serialisation_round_trip(self) -> None:
        p = RagtrimPostprocessor(pipeline=dedup_budget(9))
        data = p.to_dict()
        assert data["class_name"] == "RagtrimPostprocessor" and data["pipeline"] == dedup_budget(9).to_dict()
        assert "callback_manager" not in data
        q = RagtrimPostprocessor.from_dict(data)
        assert q.trim_pipeline.to_dict() == p.trim_pipeline.to_dict()
        assert summary(q.postprocess_nodes(corpus_nodes(), query_str="q")) == summary(
            p.postprocess_nodes(corpus_nodes(), query_str="q"))
        r = RagtrimPostprocessor.from_json(RagtrimPostprocessor(budget=30, tokenizer="whitespace").to_json())
        assert (r.budget, r.trim_pipeline.counter.name, r.scorer) == (30, "whitespace", "auto")

    def test_a_config_tokenizer_file_must_be_in_an_allowed_dir(self) -> None:
        with pytest.raises(ConfigError, match="RAGTRIM_TOKENIZER_DIRS"):
            RagtrimPostprocessor.from_dict({"tokenizer": "hf:/etc/hostname", "budget": 10})

class TestConversion:
    def test_ids_from_nodes(self) -> None:
        assert node_ids(corpus_nodes()) == ["doc-0", "doc-1", "doc-2", "doc-3", "doc-4"]

    def test_ids_fall_back_to_positions_when_repeated(self) -> None:
        nodes = corpus_nodes()
        assert node_ids([nodes[0], nodes[1], nodes[0]]) == ["0", "1", "2"]

    def test_chunks_carry_text_metadata_and_score(self) -> None:
        node = TextNode(text="x y", metadata={"src": "a"}, id_="n1")
        (chunk,) = nodes_to_chunks([NodeWithScore(node=node, score=np.float32(0.5))])
        assert (chunk.text, chunk.id, chunk.score, dict(chunk.metadata)) == ("x y", "n1", 0.5, {"src": "a"})
        assert type(chunk.score) is float
        assert nodes_to_chunks([NodeWithScore(node=node)])[0].score is None

    def test_text_excludes_metadata(self) -> None:
        node = TextNode(text="body text", metadata={"title": "A title"})
        assert node.get_content(metadata_mode=MetadataMode.LLM) != "body text"
        assert nodes_to_chunks([NodeWithScore(node=node)])[0].text == "body text"

    def test_non_node_is_an_input_error(self) -> None:
        with pytest.raises(InputError, match="node at index 0 must be a llama_index NodeWithScore, got TextNode"):
            nodes_to_chunks([TextNode(text="x")])  # type: ignore[list-item]

    def test_non_numeric_score_is_an_input_error(self) -> None:
        node = NodeWithScore.model_construct(node=TextNode(text="x"), score="high")
        with pytest.raises(InputError, match="node at index 0: score must be a number or None, got 'high'"):
            nodes_to_chunks([node])

    def test_round_trip_keeps_class_id_relationships_and_score(self) -> None:
        nodes = corpus_nodes()
        out = chunks_to_nodes(dedup_budget(100).run(nodes_to_chunks(nodes)), nodes)
        assert [(n.node.node_id, n.score) for n in out] == [("doc-0", 0.9), ("doc-2", 0.7), ("doc-3", 0.6),
                                                               ("doc-4", 0.5)]
        assert out[0].node.metadata == {"source": "lifecycle", "page": 1, "ragtrim_score": 0.9, "ragtrim_tokens": 7,
                                        "ragtrim_tokens_removed": 0}
        assert out[0].node.relationships == nodes[0].node.relationships
        assert all(type(n.node) is TextNode for n in out)

    def test_added_metadata_never_reaches_the_llm_or_the_embedder(self) -> None:
        node = TextNode(text="body", metadata={"title": "T"}, excluded_llm_metadata_keys=["x"])
        (out,) = chunks_to_nodes(dedup_budget(10).run(nodes_to_chunks([NodeWithScore(node=node)])),
                                 [NodeWithScore(node=node)])
        for mode in (MetadataMode.LLM, MetadataMode.EMBED):
            assert out.node.get_content(metadata_mode=mode) == node.get_content(metadata_mode=mode)
        assert out.node.excluded_llm_metadata_keys == ["x", "ragtrim_score", "ragtrim_tokens", "ragtrim_tokens_removed"]


class TestPostprocess:
    def test_empty_input(self, trim_events: TrimEvents) -> None:
        p = RagtrimPostprocessor(pipeline=dedup_budget(20))
        assert p.postprocess_nodes([], query_str="q") == []
        (event,) = trim_events.events
        assert (event.nodes_in, event.nodes_out, event.removals) == (0, 0, [])

    def test_single_node(self) -> None:
        (node,) = corpus_nodes()[:1]
        (out,) = RagtrimPostprocessor(pipeline=dedup_budget(20)).postprocess_nodes([node], query_str="q")
        assert summary([out]) == [("doc-0", CORPUS[0][0], 0.9, {
            "source": "lifecycle", "page": 1, "ragtrim_score": 0.9, "ragtrim_tokens": 7, "ragtrim_tokens_removed": 0})]

    def test_trims_to_budget_and_keeps_ids_metadata_and_scores(self) -> None:
        # doc-0 (7 words), doc-1 (its copy), doc-2 (10 words), doc-3 (11): budget 20 keeps 7 + 10 (+ 2 separator)
        out = RagtrimPostprocessor(pipeline=dedup_budget(20)).postprocess_nodes(corpus_nodes(), query_str="q")
        assert summary(out) == [
            ("doc-0", CORPUS[0][0], 0.9, {"source": "lifecycle", "page": 1, "ragtrim_score": 0.9,
                                          "ragtrim_tokens": 7, "ragtrim_tokens_removed": 0}),
            ("doc-2", CORPUS[2][0], 0.7, {"source": "lifecycle", "page": 2, "ragtrim_score": 0.7,
                                          "ragtrim_tokens": 10, "ragtrim_tokens_removed": 0}),
        ]

    def test_truncated_node_reports_tokens_removed(self) -> None:
        node = NodeWithScore(node=TextNode(text="One two three. Four five six seven.", id_="a"), score=1.0)
        (out,) = RagtrimPostprocessor(pipeline=truncating_budget(5)).postprocess_nodes([node], query_str="one")
        assert out.node.get_content() == "One two three."
        assert (out.node.metadata["ragtrim_tokens"], out.node.metadata["ragtrim_tokens_removed"]) == (3, 4)
        assert (out.node.node_id, out.score) == ("a", 1.0)

    def test_query_str_and_query_bundle_both_reach_the_pipeline(self) -> None:
        p = RagtrimPostprocessor(pipeline=dedup_budget(20))
        p.postprocess_nodes(corpus_nodes(), query_str="by string")
        assert p.last_result is not None and p.last_result.context.query == "by string"
        p.postprocess_nodes(corpus_nodes(), query_bundle=QueryBundle("by bundle"))
        assert p.last_result.context.query == "by bundle"
        p.postprocess_nodes(corpus_nodes())  # no query: trimmed as trim(query="") would
        assert p.last_result.context.query == ""

    def test_given_scores_rank_the_nodes(self) -> None:
        nodes = corpus_nodes()[2:]  # scores 0.7, 0.6, 0.5 with 10, 11, 13 words
        reordered = [nodes[2], nodes[0], nodes[1]]
        p = RagtrimPostprocessor(scorer="given", budget=24, tokenizer="whitespace")
        out = p.postprocess_nodes(reordered, query_str="storage duration queue")
        assert [(n.node.node_id, n.score) for n in out] == [("doc-2", 0.7), ("doc-3", 0.6)]
        assert p.last_result is not None
        assert next(r for r in p.last_result.trace if r.stage == "relevance").info["scorer"] == "given"

    def test_given_scores_need_every_node_scored(self) -> None:
        nodes = [*corpus_nodes()[:1], NodeWithScore(node=TextNode(text="unscored passage"))]
        with pytest.raises(InputError, match="scorer='given'.*has none"):
            RagtrimPostprocessor(scorer="given", budget=100).postprocess_nodes(nodes, query_str="passage")

    def test_stage_error_names_the_stage_and_keeps_the_cause(self) -> None:
        p = RagtrimPostprocessor(pipeline=Pipeline([Exploding()], tokenizer="whitespace"))
        with pytest.raises(StageError, match="stage 'exploding' failed") as info:
            p.postprocess_nodes(corpus_nodes(), query_str="q")
        assert isinstance(info.value.__cause__, ZeroDivisionError)

    def test_no_input_mutation(self) -> None:
        nodes = corpus_nodes()
        nodes.append(NodeWithScore(node=TextNode(text="One two three. Four five six seven.", id_="long"), score=0.1))
        before = snapshot(nodes)
        pipe = Pipeline([DuplicateFilter(near=False), TokenBudget(max_tokens=45, truncate=True,
                                                                  min_truncated_tokens=1)], tokenizer="whitespace")
        out = RagtrimPostprocessor(pipeline=pipe).postprocess_nodes(nodes, query_str="q")
        assert out[-1].node.get_content() == "One two three."  # shortened in the copy...
        assert snapshot(nodes) == before  # ...and nowhere else

    def test_trace_in_the_event_and_last_result(self, trim_events: TrimEvents) -> None:
        p = RagtrimPostprocessor(pipeline=dedup_budget(9))
        p.postprocess_nodes(corpus_nodes()[:3], query_str="lifecycle")
        (event,) = trim_events.events
        assert (event.query, event.tokenizer, event.nodes_in, event.nodes_out) == ("lifecycle", "whitespace", 3, 1)
        assert (event.tokens_before, event.tokens_after, event.tokens_saved) == (24, 7, 17)
        removed = [(r["node_id"], r["node_index"], r["stage"], r["reason"], r["tokens_removed"], r["kept_id"])
                   for r in event.removals]
        assert removed == [("doc-1", 1, "dedup", "exact_duplicate", 7, "doc-0"),
                           ("doc-2", 2, "budget", "over_budget", 10, None)]
        assert [s["stage"] for s in event.stages] == ["dedup", "budget"]
        assert event.span_id.startswith("RagtrimPostprocessor._postprocess_nodes")
        assert p.last_result is not None
        assert [r.chunk_id for r in p.last_result.removals] == ["doc-1", "doc-2"]

    def test_trim_nodes_returns_the_result_without_events(self, trim_events: TrimEvents) -> None:
        nodes, result = RagtrimPostprocessor(pipeline=dedup_budget(9)).trim_nodes(corpus_nodes()[:3], "q")
        assert [n.node.node_id for n in nodes] == ["doc-0"] and result.tokens_after == 7
        assert trim_events.events == []


class TestAsync:
    def test_apostprocess_equals_postprocess(self, trim_events: TrimEvents) -> None:
        p = RagtrimPostprocessor(pipeline=dedup_budget(20))
        got = asyncio.run(p.apostprocess_nodes(corpus_nodes(), query_str="lifecycle"))
        assert summary(got) == summary(p.postprocess_nodes(corpus_nodes(), query_str="lifecycle"))
        first, second = trim_events.events
        assert first.span_id.startswith("RagtrimPostprocessor._apostprocess_nodes")
        assert first.removals == second.removals

    def test_pipeline_runs_off_the_event_loop(self) -> None:
        probe = ThreadProbe()
        p = RagtrimPostprocessor(pipeline=Pipeline([probe], tokenizer="whitespace"))

        async def main() -> int:
            await p.apostprocess_nodes(corpus_nodes(), query_str="q")
            return threading.get_ident()

        loop_thread = asyncio.run(main())
        assert probe.threads and probe.threads[0] != loop_thread

    def test_async_empty_input_and_errors(self) -> None:
        assert asyncio.run(RagtrimPostprocessor(pipeline=dedup_budget(5)).apostprocess_nodes([], query_str="q")) == []
        p = RagtrimPostprocessor(pipeline=Pipeline([Exploding()], tokenizer="whitespace"))
        with pytest.raises(StageError, match="exploding"):
            asyncio.run(p.apostprocess_nodes(corpus_nodes(), query_str="q"))

    def test_concurrent_calls_match_sequential(self) -> None:
        # The default pipeline with the real cl100k counter, shared by all calls.
        p = RagtrimPostprocessor(budget=25, scorer="bm25")
        queries = [f"{word} rules queue keys {i}" for i, word in enumerate(["lifecycle", "archive", "access"] * 20)]
        sequential = [summary(p.postprocess_nodes(corpus_nodes(), query_str=q)) for q in queries]

        async def main() -> list[list[NodeWithScore]]:
            return await asyncio.gather(*(p.apostprocess_nodes(corpus_nodes(), query_str=q) for q in queries))

        assert [summary(nodes) for nodes in asyncio.run(main())] == sequential
        assert any(len(s) >= 2 for s in sequential)


class TestQueryEngine:
    """Inside a real query engine: VectorStoreIndex (in memory) -> RagtrimPostprocessor -> response synthesizer ->
    MockLLM, which answers with the prompt it was given, so the test sees exactly what an LLM would read."""

    QUERY = "how often do lifecycle rules run"

    @staticmethod
    def index() -> VectorStoreIndex:
        nodes = [TextNode(text=text, metadata=dict(meta), id_=f"doc-{i}", excluded_llm_metadata_keys=["page"])
                 for i, (text, meta) in enumerate(CORPUS)]
        return VectorStoreIndex(nodes=nodes, embed_model=MockEmbedding(embed_dim=8))

    @staticmethod
    def context(prompt: str) -> str:
        return prompt.split("---------------------\n")[1].strip()

    def test_untrimmed_baseline(self) -> None:
        engine = self.index().as_query_engine(llm=MockLLM(), similarity_top_k=5)
        response = engine.query(self.QUERY)
        assert len(response.source_nodes) == 5
        assert all(text in self.context(str(response)) for text, _ in CORPUS)

    def test_the_llm_sees_only_the_trimmed_context(self, trim_events: TrimEvents) -> None:
        # MockEmbedding ties every node, so retrieval order is arbitrary; BM25 then ranks, and the budget fits one
        pipeline = Pipeline([DuplicateFilter(near=False), RelevanceFilter(scorer="bm25", top_k=None),
                             TokenBudget(max_tokens=9, truncate=False)], tokenizer="whitespace")
        debug = LlamaDebugHandler()
        engine = RetrieverQueryEngine.from_args(
            self.index().as_retriever(similarity_top_k=5), llm=MockLLM(),
            node_postprocessors=[RagtrimPostprocessor(pipeline=pipeline)], callback_manager=CallbackManager([debug]))
        response = engine.query(self.QUERY)
        (node,) = response.source_nodes
        source = node.node.metadata["source"]
        assert self.context(str(response)) == f"source: {source}\n\n{CORPUS[0][0]}"
        assert "ragtrim" not in str(response)
        assert node.node.metadata["ragtrim_tokens"] == 7 and node.score == pytest.approx(1.0)
        (event,) = trim_events.events
        assert (event.nodes_in, event.nodes_out, event.tokens_before, event.tokens_after) == (5, 1, 48, 7)
        assert sorted(r["reason"] for r in event.removals) == ["exact_duplicate"] + ["over_budget"] * 3
        # the legacy callback manager (LlamaDebugHandler and other tracers) sees it as a reranking step
        ((start, end),) = debug.get_event_pairs(CBEventType.RERANKING)
        assert start.payload is not None and len(start.payload["nodes"]) == 5
        assert end.payload is not None and end.payload[PAYLOAD_KEY]["removals"] == event.removals

    def test_async_query(self) -> None:
        engine = self.index().as_query_engine(llm=MockLLM(), similarity_top_k=5,
                                              node_postprocessors=[RagtrimPostprocessor(pipeline=dedup_budget(9))])
        response = asyncio.run(engine.aquery(self.QUERY))
        (node,) = response.source_nodes
        assert node.node.get_content() == CORPUS[0][0] and node.node.metadata["ragtrim_tokens"] == 7


class TestExample:
    """examples/llamaindex_qa.py runs offline (SummaryIndex over the raw HTML pages, MockLLM)."""

    def test_offline_run_prints_tokens_saved(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert load_example("llamaindex_qa").main(["--limit", "2", "--budget", "300"]) == 0
        out = capsys.readouterr().out
        assert out.count("(saved ") == 2 and "2 questions:" in out and "in prompt: True" in out
