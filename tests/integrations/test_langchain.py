"""RagtrimRetriever and RagtrimCompressor against the real langchain-core (no mocks of LangChain classes)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from ragtrim.errors import ConfigError, InputError, StageError
from ragtrim.integrations.langchain import (
    EVENT_NAME,
    RUN_NAME,
    RagtrimCompressor,
    RagtrimRetriever,
    chunks_to_documents,
    document_ids,
    documents_to_chunks,
)
from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget
from tests.integrations.conftest import (
    CORPUS,
    Exploding,
    ThreadProbe,
    dedup_budget,
    load_example,
    truncating_budget,
)

QUERIES = [
    "how often do lifecycle rules run",
    "archive minimum storage duration",
    "queue retries dead letter",
    "access keys rotate",
    "lifecycle archive storage rules",
    "nothing matches zebra",
]


def corpus_documents(with_ids: bool = True) -> list[Document]:
    return [
        Document(page_content=text, metadata=dict(meta), id=f"doc-{i}" if with_ids else None)
        for i, (text, meta) in enumerate(CORPUS)
    ]


class KeywordRetriever(BaseRetriever):
    """A real BaseRetriever: documents sharing a word with the query, in corpus order, at most k."""

    documents: list[Document]
    k: int = 10

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        words = set(query.lower().split())
        return [d for d in self.documents if words & set(d.page_content.lower().split())][: self.k]


class AsyncKeywordRetriever(KeywordRetriever):
    """Records which path ran, and yields to the loop so concurrent calls interleave."""

    calls: list[str] = []  # noqa: RUF012 - a pydantic field: each instance gets its own list

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.calls.append("sync")
        return super()._get_relevant_documents(query, run_manager=run_manager)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.calls.append("async")
        await asyncio.sleep(0.001)
        words = set(query.lower().split())
        return [d for d in self.documents if words & set(d.page_content.lower().split())][: self.k]


class FailingRetriever(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        try:
            raise ConnectionError("vector index at 10.0.0.7 refused the connection")
        except ConnectionError as exc:
            raise RuntimeError("search backend unavailable") from exc


class EventRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.chain_outputs: list[Any] = []
        self.prompts: list[str] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))

    def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        self.chain_outputs.append(outputs)

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.prompts.extend(m.content for batch in messages for m in batch)


def retriever(max_tokens: int = 20) -> RagtrimRetriever:
    return RagtrimRetriever(base_retriever=KeywordRetriever(documents=corpus_documents()), pipeline=dedup_budget(max_tokens))


def summary(docs: list[Document]) -> list[tuple[str | None, str, dict[str, Any]]]:
    return [(d.id, d.page_content, dict(d.metadata)) for d in docs]


class TestConfig:
    """Defaults and the options common to all adapters: tests/integrations/test_common.py."""

    def test_defaults(self) -> None:
        r = RagtrimRetriever(base_retriever=KeywordRetriever(documents=[]))
        assert r.pipeline is None and r.budget is None and r.score_key is None
        assert [s.name for s in r.trim_pipeline.stages] == ["html", "dedup", "relevance", "order"]

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"budget": -1}, "budget must be >= 0, got -1"),
            ({"score_key": ""}, "score_key must be a metadata key"),
        ],
    )
    def test_invalid(self, kwargs: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            RagtrimRetriever(base_retriever=KeywordRetriever(documents=[]), **kwargs)
        with pytest.raises(ConfigError, match=message):
            RagtrimCompressor(**kwargs)

    def test_zero_budget_is_valid_as_in_trim(self) -> None:
        # trim(budget=0) was accepted while these classes rejected it; both accept it now and keep nothing
        c = RagtrimCompressor(budget=0, tokenizer="whitespace")
        assert c.compress_documents([Document(page_content="a b c")], "q") == []
        r = RagtrimRetriever(base_retriever=KeywordRetriever(documents=[]), budget=0)
        assert r.budget == 0

    def test_base_retriever_must_be_a_retriever(self) -> None:
        with pytest.raises(ConfigError, match="base_retriever must be a LangChain BaseRetriever, got list"):
            RagtrimRetriever(base_retriever=[])  # type: ignore[arg-type]

class TestConversion:
    def test_ids_from_documents(self) -> None:
        assert document_ids(corpus_documents()) == ["doc-0", "doc-1", "doc-2", "doc-3", "doc-4"]

    def test_ids_fall_back_to_positions_when_missing_or_repeated(self) -> None:
        docs = corpus_documents(with_ids=False)
        assert document_ids(docs) == ["0", "1", "2", "3", "4"]
        repeated = [Document(page_content="a", id="x"), Document(page_content="b", id="x")]
        assert document_ids(repeated) == ["0", "1"]
        partly = [Document(page_content="a", id="1"), Document(page_content="b")]
        assert document_ids(partly) == ["0", "1"]

    def test_chunks_carry_text_metadata_and_score(self) -> None:
        docs = [Document(page_content="x y", metadata={"score": 0.5, "src": "a"})]
        (chunk,) = documents_to_chunks(docs, score_key="score")
        assert (chunk.text, chunk.id, chunk.score, dict(chunk.metadata)) == ("x y", "0", 0.5, {"score": 0.5, "src": "a"})
        assert documents_to_chunks(docs)[0].score is None

    def test_non_numeric_score_is_an_input_error(self) -> None:
        docs = [Document(page_content="x", metadata={"score": "high"})]
        with pytest.raises(InputError, match=r"metadata\['score'\] must be a number.*got 'high'"):
            documents_to_chunks(docs, score_key="score")

    def test_non_document_is_an_input_error(self) -> None:
        with pytest.raises(InputError, match="document at index 0 must be a langchain_core Document, got str"):
            documents_to_chunks(["text"])  # type: ignore[list-item]

    def test_round_trip_keeps_class_id_and_metadata(self) -> None:
        docs = corpus_documents()
        result = dedup_budget(100).run(documents_to_chunks(docs))
        out = chunks_to_documents(result, docs)
        assert [d.id for d in out] == ["doc-0", "doc-2", "doc-3", "doc-4"]
        assert out[0].metadata == {"source": "lifecycle", "page": 1, "ragtrim_score": None, "ragtrim_tokens": 7,
                                   "ragtrim_tokens_removed": 0}
        assert all(type(d) is Document for d in out)


class TestRetrieverSync:
    def test_trims_to_budget_and_keeps_metadata(self) -> None:
        docs = retriever(max_tokens=20).invoke("lifecycle archive storage rules")
        # base: doc-0 (7 words), doc-1 (duplicate of doc-0), doc-2 (10 words); budget 20 keeps 17 words
        assert summary(docs) == [
            ("doc-0", CORPUS[0][0], {"source": "lifecycle", "page": 1, "ragtrim_score": None, "ragtrim_tokens": 7,
                                     "ragtrim_tokens_removed": 0}),
            ("doc-2", CORPUS[2][0], {"source": "lifecycle", "page": 2, "ragtrim_score": None, "ragtrim_tokens": 10,
                                     "ragtrim_tokens_removed": 0}),
        ]

    def test_budget_drops_what_does_not_fit(self) -> None:
        docs = retriever(max_tokens=9).invoke("lifecycle archive storage rules")
        assert [d.id for d in docs] == ["doc-0"]

    def test_truncated_document_reports_tokens_removed(self) -> None:
        base = KeywordRetriever(documents=[Document(page_content="One two three. Four five six seven.", id="a")])
        (doc,) = RagtrimRetriever(base_retriever=base, pipeline=truncating_budget(5)).invoke("one")
        assert doc.page_content == "One two three."
        assert (doc.metadata["ragtrim_tokens"], doc.metadata["ragtrim_tokens_removed"]) == (3, 4)

    def test_score_key_feeds_the_budget(self) -> None:
        docs = [Document(page_content="low score words here", metadata={"s": 0.1}),
                Document(page_content="high score words here", metadata={"s": 0.9})]
        pipe = Pipeline([TokenBudget(max_tokens=4, truncate=False)], tokenizer="whitespace")
        out = RagtrimRetriever(base_retriever=KeywordRetriever(documents=docs), pipeline=pipe,
                               score_key="s").invoke("words")
        assert [(d.page_content, d.metadata["ragtrim_score"]) for d in out] == [("high score words here", 0.9)]

    def test_empty_base_result(self) -> None:
        recorder = EventRecorder()
        assert retriever().invoke("nothing matches zebra", config={"callbacks": [recorder]}) == []
        ((name, data),) = recorder.events
        assert name == EVENT_NAME and (data["documents_in"], data["documents_out"], data["removals"]) == (0, 0, [])

    def test_base_error_surfaces_with_its_cause(self) -> None:
        r = RagtrimRetriever(base_retriever=FailingRetriever(), budget=10)
        with pytest.raises(RuntimeError, match="search backend unavailable") as info:
            r.invoke("q")
        assert isinstance(info.value.__cause__, ConnectionError)
        assert any("FailingRetriever wrapped in RagtrimRetriever" in n for n in info.value.__notes__)

    def test_stage_error_names_the_stage_and_keeps_the_cause(self) -> None:
        r = RagtrimRetriever(base_retriever=KeywordRetriever(documents=corpus_documents()),
                             pipeline=Pipeline([Exploding()], tokenizer="whitespace"))
        with pytest.raises(StageError, match="stage 'exploding' failed") as info:
            r.invoke("lifecycle")
        assert isinstance(info.value.__cause__, ZeroDivisionError)

    def test_no_input_mutation(self) -> None:
        docs = corpus_documents()
        before = summary(docs)
        RagtrimRetriever(base_retriever=KeywordRetriever(documents=docs), pipeline=dedup_budget(3)).invoke("rules")
        assert summary(docs) == before

    def test_trace_through_callbacks(self) -> None:
        recorder = EventRecorder()
        retriever(max_tokens=9).invoke("lifecycle archive storage rules", config={"callbacks": [recorder]})
        ((name, data),) = recorder.events
        assert name == EVENT_NAME
        assert (data["tokens_before"], data["tokens_after"], data["tokens_saved"]) == (24, 7, 17)
        removed = [(r["document_id"], r["document_index"], r["stage"], r["reason"], r["tokens_removed"], r["kept_id"])
                   for r in data["removals"]]
        assert removed == [("doc-1", 1, "dedup", "exact_duplicate", 7, "doc-0"),
                           ("doc-2", 2, "budget", "over_budget", 10, None)]
        assert [s["stage"] for s in data["stages"]] == ["dedup", "budget"]
        assert data in recorder.chain_outputs  # the "ragtrim" child run's output is the same trace

    def test_trim_documents_returns_the_trim_result(self) -> None:
        docs, result = retriever(max_tokens=9).trim_documents(corpus_documents()[:3], "q")
        assert [d.id for d in docs] == ["doc-0"]
        assert [r.chunk_id for r in result.removals] == ["doc-1", "doc-2"]


class TestRetrieverAsync:
    def test_ainvoke_equals_invoke_and_awaits_the_async_path(self) -> None:
        base = AsyncKeywordRetriever(documents=corpus_documents())
        r = RagtrimRetriever(base_retriever=base, pipeline=dedup_budget(20))
        got = asyncio.run(r.ainvoke("lifecycle archive storage rules"))
        assert base.calls == ["async"]
        assert summary(got) == summary(retriever(max_tokens=20).invoke("lifecycle archive storage rules"))

    def test_pipeline_runs_off_the_event_loop(self) -> None:
        probe = ThreadProbe()
        r = RagtrimRetriever(base_retriever=KeywordRetriever(documents=corpus_documents()),
                             pipeline=Pipeline([probe], tokenizer="whitespace"))

        async def main() -> int:
            await r.ainvoke("lifecycle")
            return threading.get_ident()

        loop_thread = asyncio.run(main())
        assert probe.threads and probe.threads[0] != loop_thread

    def test_async_base_error_surfaces(self) -> None:
        r = RagtrimRetriever(base_retriever=FailingRetriever(), budget=10)
        with pytest.raises(RuntimeError, match="search backend unavailable") as info:
            asyncio.run(r.ainvoke("q"))
        assert isinstance(info.value.__cause__, ConnectionError)

    def test_async_empty_base_result(self) -> None:
        assert asyncio.run(retriever().ainvoke("nothing matches zebra")) == []

    def test_concurrent_ainvoke_matches_sequential(self) -> None:
        # The default pipeline with the real cl100k counter, shared by all calls.
        base = AsyncKeywordRetriever(documents=corpus_documents())
        r = RagtrimRetriever(base_retriever=base, budget=25)
        queries = [QUERIES[i % len(QUERIES)] + f" {i}" for i in range(100)]
        sequential = [summary(r.invoke(q)) for q in queries]

        async def main() -> list[list[Document]]:
            return await asyncio.gather(*(r.ainvoke(q) for q in queries))

        concurrent = [summary(docs) for docs in asyncio.run(main())]
        assert concurrent == sequential
        assert any(len(s) >= 2 for s in sequential)  # the budget let several documents through somewhere

    def test_astream_events_show_the_trim(self) -> None:
        async def main() -> list[dict[str, Any]]:
            stream = retriever(max_tokens=9).astream_events("lifecycle rules", version="v2")
            return [dict(e) async for e in stream]

        events = asyncio.run(main())
        names = [(e["event"], e["name"]) for e in events]
        assert ("on_chain_start", RUN_NAME) in names and ("on_custom_event", EVENT_NAME) in names
        custom = next(e for e in events if e["event"] == "on_custom_event")
        assert [r["reason"] for r in custom["data"]["removals"]] == ["exact_duplicate"]
        top = next(e for e in events if e["event"] == "on_retriever_start")
        assert top["run_id"] in custom["parent_ids"]


class TestChains:
    @staticmethod
    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    def build(self, r: BaseRetriever) -> Any:
        prompt = ChatPromptTemplate.from_messages([("human", "Context:\n{context}\n\nQuestion: {question}")])
        llm = FakeListChatModel(responses=["once every 24 hours"])
        return (
            {"context": r | RunnableLambda(self.format_docs), "question": RunnableLambda(lambda q: q)}
            | prompt
            | llm
            | StrOutputParser()
        )

    def test_lcel_chain_sees_only_the_trimmed_context(self) -> None:
        recorder = EventRecorder()
        chain = self.build(retriever(max_tokens=9))
        answer = chain.invoke("how often do lifecycle rules run", config={"callbacks": [recorder]})
        assert answer == "once every 24 hours"
        (prompt,) = recorder.prompts
        assert prompt == f"Context:\n{CORPUS[0][0]}\n\nQuestion: how often do lifecycle rules run"
        assert [name for name, _ in recorder.events] == [EVENT_NAME]

    def test_lcel_chain_async_and_batch(self) -> None:
        chain = self.build(retriever(max_tokens=9))
        assert asyncio.run(chain.ainvoke("lifecycle rules")) == "once every 24 hours"
        assert chain.batch(["lifecycle rules", "queue retries"]) == ["once every 24 hours"] * 2

    def test_over_an_in_memory_vector_store(self) -> None:
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
        store.add_documents(corpus_documents())
        base = store.as_retriever(search_kwargs={"k": 5})
        r = RagtrimRetriever(base_retriever=base, pipeline=dedup_budget(100))
        docs = r.invoke("lifecycle rules")
        assert len(docs) == 4  # the five documents minus the exact duplicate
        assert {d.metadata["source"] for d in docs} >= {"queues", "keys"}
        assert all(d.metadata["ragtrim_tokens"] == len(d.page_content.split()) for d in docs)


class TestCompressor:
    def test_compress_and_acompress(self) -> None:
        c = RagtrimCompressor(pipeline=dedup_budget(9))
        docs = corpus_documents()[:3]
        sync = c.compress_documents(docs, "lifecycle")
        assert [d.id for d in sync] == ["doc-0"]
        assert summary(list(asyncio.run(c.acompress_documents(docs, "lifecycle")))) == summary(list(sync))

    def test_empty(self) -> None:
        assert list(RagtrimCompressor(budget=5).compress_documents([], "q")) == []

    def test_callbacks_receive_the_trace(self) -> None:
        recorder = EventRecorder()
        RagtrimCompressor(pipeline=dedup_budget(9)).compress_documents(corpus_documents(), "q",
                                                                       callbacks=[recorder])
        ((name, data),) = recorder.events
        assert name == EVENT_NAME and data["documents_in"] == 5 and data["documents_out"] == 1

    def test_in_contextual_compression_retriever(self) -> None:
        classic = pytest.importorskip("langchain_classic.retrievers")
        recorder = EventRecorder()
        ccr = classic.ContextualCompressionRetriever(
            base_compressor=RagtrimCompressor(pipeline=dedup_budget(20)),
            base_retriever=KeywordRetriever(documents=corpus_documents()),
        )
        docs = ccr.invoke("lifecycle archive storage rules", config={"callbacks": [recorder]})
        assert [d.id for d in docs] == ["doc-0", "doc-2"]
        assert [name for name, _ in recorder.events] == [EVENT_NAME]
        assert asyncio.run(ccr.ainvoke("lifecycle archive storage rules")) == docs


class TestExample:
    """examples/langchain_qa.py runs offline (BM25 + extractive stand-in model) over the shipped corpus."""

    def test_offline_run_prints_tokens_saved(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert load_example("langchain_qa").main(["--limit", "2", "--budget", "300"]) == 0
        out = capsys.readouterr().out
        assert out.count("(saved ") == 2 and "2 questions:" in out and "in context: True" in out


class ScoredVectorRetriever(BaseRetriever):
    """A vector store retriever that copies each hit's relevance score into metadata (what score_key reads)."""

    store: Any
    k: int = 5

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        hits = self.store.similarity_search_with_score(query, k=self.k)
        return [Document(page_content=d.page_content, id=d.id, metadata={**d.metadata, "similarity": s})
                for d, s in hits]


class TestGivenScores:
    """scorer="given": the base retriever's own scores rank the documents; nothing is scored again."""

    def store(self) -> InMemoryVectorStore:
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
        store.add_documents(corpus_documents())
        return store

    def test_the_retrievers_scores_rank_the_documents(self) -> None:
        base = ScoredVectorRetriever(store=self.store(), k=5)
        retriever = RagtrimRetriever(base_retriever=base, score_key="similarity", scorer="given", budget=1000)
        query = "queue retries dead letter"
        hits = base.invoke(query)
        out = retriever.invoke(query)
        best = max(hits, key=lambda d: d.metadata["similarity"])
        assert out[0].page_content == best.page_content  # best first, by the store's own score
        scores = [d.metadata["ragtrim_score"] for d in out]
        assert scores == [d.metadata["similarity"] for d in out]  # the store's scores, not new ones
        assert scores == sorted(scores, reverse=True)
        _, result = retriever.trim_documents(hits, query)
        relevance = next(r for r in result.trace if r.stage == "relevance")
        assert relevance.info["scorer"] == "given"

    def test_given_needs_a_score_key(self) -> None:
        with pytest.raises(ConfigError, match="score_key"):
            RagtrimCompressor(scorer="given", budget=100)

    def test_a_document_without_a_score_is_a_clear_error(self) -> None:
        compressor = RagtrimCompressor(scorer="given", score_key="similarity", budget=100)
        docs = [Document(page_content="a scored passage", metadata={"similarity": 0.5}),
                Document(page_content="an unscored passage", metadata={})]
        with pytest.raises(InputError, match="scorer='given'.*has none"):
            compressor.compress_documents(docs, "passage")

    def test_scorer_and_pipeline_are_exclusive(self) -> None:
        with pytest.raises(ConfigError, match="scorer="):
            RagtrimCompressor(pipeline=Pipeline([]), scorer="bm25")
        with pytest.raises(ConfigError, match="scorer"):
            RagtrimCompressor(scorer="nope", budget=10)  # type: ignore[arg-type]
