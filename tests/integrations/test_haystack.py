"""RagtrimTrimmer against the real haystack-ai: direct runs, a Pipeline after an InMemoryBM25Retriever over an
InMemoryDocumentStore, the async path, and Pipeline.dumps()/loads()."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
from typing import Any

import numpy as np
import pytest

haystack = pytest.importorskip("haystack")

from haystack import Document
from haystack import Pipeline as HaystackPipeline
from haystack.components.builders import PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragtrim.errors import ConfigError, InputError, StageError
from ragtrim.integrations.haystack import (
    RagtrimTrimmer,
    chunks_to_documents,
    document_ids,
    documents_to_chunks,
    removed_documents,
)
from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget
from ragtrim.stages.dedup import DuplicateFilter
from tests.integrations.conftest import (
    CORPUS,
    SCORES,
    Exploding,
    ThreadProbe,
    dedup_budget,
    load_example,
    truncating_budget,
)

MODULE = "ragtrim.integrations.haystack"


def corpus_documents(with_ids: bool = True) -> list[Document]:
    """The corpus as a retriever returns it: best first, with scores."""
    return [
        Document(content=text, meta=dict(meta), score=score, **({"id": f"doc-{i}"} if with_ids else {}))
        for i, ((text, meta), score) in enumerate(zip(CORPUS, SCORES))
    ]


def summary(docs: list[Document]) -> list[tuple[str, str | None, float | None, dict[str, Any]]]:
    return [(d.id, d.content, d.score, dict(d.meta)) for d in docs]


def loads(text: str) -> HaystackPipeline:
    """Haystack 3 loads only allow-listed modules' components; Haystack 2 has no allowlist."""
    if "allowed_modules" in inspect.signature(HaystackPipeline.loads).parameters:
        return HaystackPipeline.loads(text, allowed_modules=[MODULE])
    return HaystackPipeline.loads(text)


def run_async(pipeline: HaystackPipeline, data: dict[str, Any]) -> dict[str, Any]:
    """Haystack 3's Pipeline.run_async, or Haystack 2's AsyncPipeline built from the same definition."""
    if hasattr(pipeline, "run_async"):
        result: dict[str, Any] = asyncio.run(pipeline.run_async(data))
        return result
    async_pipeline = haystack.AsyncPipeline.from_dict(pipeline.to_dict())
    result = asyncio.run(async_pipeline.run_async(data))
    return result


class TestConfig:
    """Defaults and invalid options common to all adapters: tests/integrations/test_common.py."""

    def test_zero_budget_is_valid_as_in_trim(self) -> None:
        out = RagtrimTrimmer(budget=0, tokenizer="whitespace").run(documents=corpus_documents()[:2], query="q")
        assert out["documents"] == []
        # in input order: doc-0 did not fit, doc-1 was its copy
        assert [d.meta["ragtrim_reason"] for d in out["removed_documents"]] == ["over_budget", "exact_duplicate"]

    def test_to_dict_and_from_dict(self) -> None:
        t = RagtrimTrimmer(pipeline=dedup_budget(9))
        data = t.to_dict()
        assert data == {"type": f"{MODULE}.RagtrimTrimmer", "init_parameters": {
            "pipeline": dedup_budget(9).to_dict(), "budget": None, "tokenizer": None, "scorer": "auto"}}
        back = RagtrimTrimmer.from_dict(data)
        assert back.trim_pipeline.to_dict() == t.trim_pipeline.to_dict() and back.to_dict() == data
        u = RagtrimTrimmer.from_dict(RagtrimTrimmer(budget=30, tokenizer="whitespace", scorer="bm25").to_dict())
        assert (u.budget, u.trim_pipeline.counter.name, u.scorer) == (30, "whitespace", "bm25")

    def test_a_config_tokenizer_file_must_be_in_an_allowed_dir(self) -> None:
        data = {"type": f"{MODULE}.RagtrimTrimmer", "init_parameters": {"tokenizer": "hf:/etc/hostname"}}
        with pytest.raises(ConfigError, match="RAGTRIM_TOKENIZER_DIRS"):
            RagtrimTrimmer.from_dict(data)

    def test_is_a_haystack_component_with_async_support(self) -> None:
        t = RagtrimTrimmer(pipeline=dedup_budget(9))
        assert set(t.__haystack_input__._sockets_dict) == {"documents", "query"}  # type: ignore[attr-defined]
        assert set(t.__haystack_output__._sockets_dict) == {  # type: ignore[attr-defined]
            "documents", "removed_documents", "trim_report"}
        assert t.__haystack_supports_async__  # type: ignore[attr-defined]

class TestConversion:
    def test_ids_from_documents(self) -> None:
        assert document_ids(corpus_documents()) == ["doc-0", "doc-1", "doc-2", "doc-3", "doc-4"]

    def test_ids_fall_back_to_positions_when_repeated(self) -> None:
        same = Document(content="a")
        assert document_ids([same, Document(content="b"), same]) == ["0", "1", "2"]
        assert document_ids(corpus_documents(with_ids=False))[0] == Document(content=CORPUS[0][0],
                                                                             meta=CORPUS[0][1]).id

    def test_chunks_carry_content_meta_and_score(self) -> None:
        (chunk,) = documents_to_chunks([Document(content="x y", meta={"src": "a"}, id="d", score=np.float32(0.5))])
        assert (chunk.text, chunk.id, chunk.score, dict(chunk.metadata)) == ("x y", "d", 0.5, {"src": "a"})
        assert type(chunk.score) is float

    def test_bad_documents_are_input_errors(self) -> None:
        with pytest.raises(InputError, match="document at index 0 must be a haystack Document, got str"):
            documents_to_chunks(["text"])  # type: ignore[list-item]
        with pytest.raises(InputError, match=r"document at index 1 \(id 'img'\) has no text content"):
            documents_to_chunks([Document(content="x"), Document(id="img", content=None)])
        with pytest.raises(InputError, match="document at index 0: score must be a number or None, got 'high'"):
            documents_to_chunks([Document(content="x", score="high")])  # type: ignore[arg-type]

    def test_round_trip_keeps_id_meta_and_score(self) -> None:
        docs = corpus_documents()
        result = dedup_budget(100).run(documents_to_chunks(docs))
        out = chunks_to_documents(result, docs)
        assert [(d.id, d.score) for d in out] == [("doc-0", 0.9), ("doc-2", 0.7), ("doc-3", 0.6), ("doc-4", 0.5)]
        assert out[0].meta == {"source": "lifecycle", "page": 1, "ragtrim_score": 0.9, "ragtrim_tokens": 7,
                               "ragtrim_tokens_removed": 0}
        (dropped,) = removed_documents(result, docs)
        assert (dropped.id, dropped.content, dropped.score) == ("doc-1", CORPUS[1][0], 0.8)
        assert dropped.meta == {"source": "lifecycle-mirror", "page": 1, "ragtrim_stage": "dedup",
                                "ragtrim_reason": "exact_duplicate", "ragtrim_detail": "same normalized text as chunk "
                                "doc-0", "ragtrim_kept_id": "doc-0", "ragtrim_tokens_removed": 7}


class TestRun:
    def test_empty_input(self) -> None:
        out = RagtrimTrimmer(pipeline=dedup_budget(20)).run(documents=[], query="q")
        assert (out["documents"], out["removed_documents"]) == ([], [])
        report = out["trim_report"]
        assert (report["documents_in"], report["documents_out"], report["removals"]) == (0, 0, [])

    def test_single_document(self) -> None:
        out = RagtrimTrimmer(pipeline=dedup_budget(20)).run(documents=corpus_documents()[:1], query="q")
        assert summary(out["documents"]) == [("doc-0", CORPUS[0][0], 0.9, {
            "source": "lifecycle", "page": 1, "ragtrim_score": 0.9, "ragtrim_tokens": 7, "ragtrim_tokens_removed": 0})]
        assert out["removed_documents"] == []

    def test_trims_to_budget_and_keeps_ids_meta_and_scores(self) -> None:
        # doc-0 (7 words), doc-1 (its copy), doc-2 (10), doc-3 (11), doc-4 (13): budget 20 keeps 7 + 10 (+ 2)
        out = RagtrimTrimmer(pipeline=dedup_budget(20)).run(documents=corpus_documents(), query="q")
        assert summary(out["documents"]) == [
            ("doc-0", CORPUS[0][0], 0.9, {"source": "lifecycle", "page": 1, "ragtrim_score": 0.9,
                                          "ragtrim_tokens": 7, "ragtrim_tokens_removed": 0}),
            ("doc-2", CORPUS[2][0], 0.7, {"source": "lifecycle", "page": 2, "ragtrim_score": 0.7,
                                          "ragtrim_tokens": 10, "ragtrim_tokens_removed": 0}),
        ]
        assert [(d.id, d.meta["ragtrim_reason"], d.meta["ragtrim_tokens_removed"]) for d in out["removed_documents"]
                ] == [("doc-1", "exact_duplicate", 7), ("doc-3", "over_budget", 11), ("doc-4", "over_budget", 13)]

    def test_truncated_document_reports_tokens_removed(self) -> None:
        doc = Document(id="a", content="One two three. Four five six seven.", score=1.0)
        (out,) = RagtrimTrimmer(pipeline=truncating_budget(5)).run(documents=[doc], query="one")["documents"]
        assert (out.id, out.content, out.score) == ("a", "One two three.", 1.0)
        assert (out.meta["ragtrim_tokens"], out.meta["ragtrim_tokens_removed"]) == (3, 4)

    def test_given_scores_rank_the_documents(self) -> None:
        docs = corpus_documents()[2:]  # scores 0.7, 0.6, 0.5 with 10, 11, 13 words
        t = RagtrimTrimmer(scorer="given", budget=24, tokenizer="whitespace")
        out = t.run(documents=[docs[2], docs[0], docs[1]], query="storage duration queue")
        assert [(d.id, d.score) for d in out["documents"]] == [("doc-2", 0.7), ("doc-3", 0.6)]
        relevance = next(s for s in out["trim_report"]["stages"] if s["stage"] == "relevance")
        assert relevance["chunks_out"] == 3  # ranked by the given scores, none dropped by the relevance stage

    def test_given_scores_need_every_document_scored(self) -> None:
        docs = [*corpus_documents()[:1], Document(content="unscored passage")]
        with pytest.raises(InputError, match="scorer='given'.*has none"):
            RagtrimTrimmer(scorer="given", budget=100).run(documents=docs, query="passage")

    def test_stage_error_names_the_stage_and_keeps_the_cause(self) -> None:
        t = RagtrimTrimmer(pipeline=Pipeline([Exploding()], tokenizer="whitespace"))
        with pytest.raises(StageError, match="stage 'exploding' failed") as info:
            t.run(documents=corpus_documents(), query="q")
        assert isinstance(info.value.__cause__, ZeroDivisionError)

    def test_no_input_mutation(self) -> None:
        docs = [*corpus_documents(), Document(id="long", content="One two three. Four five six seven.")]
        before = [dataclasses.asdict(d) for d in docs]
        pipe = Pipeline([DuplicateFilter(near=False), TokenBudget(max_tokens=45, truncate=True,
                                                                  min_truncated_tokens=1)], tokenizer="whitespace")
        out = RagtrimTrimmer(pipeline=pipe).run(documents=docs, query="q")
        assert out["documents"][-1].content == "One two three."  # shortened in the copy...
        assert out["removed_documents"][0].meta["ragtrim_reason"] == "exact_duplicate"  # a copy with the reason...
        assert [dataclasses.asdict(d) for d in docs] == before  # ...and the inputs as they were

    def test_trim_report(self) -> None:
        out = RagtrimTrimmer(pipeline=dedup_budget(9)).run(documents=corpus_documents()[:3], query="lifecycle")
        report = out["trim_report"]
        assert (report["query"], report["tokenizer"], report["documents_in"], report["documents_out"]) == (
            "lifecycle", "whitespace", 3, 1)
        assert (report["tokens_before"], report["tokens_after"], report["tokens_saved"]) == (24, 7, 17)
        removed = [(r["document_id"], r["document_index"], r["stage"], r["reason"], r["tokens_removed"], r["kept_id"])
                   for r in report["removals"]]
        assert removed == [("doc-1", 1, "dedup", "exact_duplicate", 7, "doc-0"),
                           ("doc-2", 2, "budget", "over_budget", 10, None)]
        assert [s["stage"] for s in report["stages"]] == ["dedup", "budget"]

    def test_run_async_equals_run_and_trims_off_the_event_loop(self) -> None:
        probe = ThreadProbe()
        t = RagtrimTrimmer(pipeline=Pipeline([probe, *dedup_budget(20).stages], tokenizer="whitespace"))

        async def main() -> tuple[dict[str, Any], int]:
            return await t.run_async(documents=corpus_documents(), query="q"), threading.get_ident()

        got, loop_thread = asyncio.run(main())
        assert probe.threads[0] != loop_thread
        want = t.run(documents=corpus_documents(), query="q")
        assert summary(got["documents"]) == summary(want["documents"])
        assert got["trim_report"]["removals"] == want["trim_report"]["removals"]


class TestPipeline:
    """In a real Haystack Pipeline: InMemoryBM25Retriever over an InMemoryDocumentStore -> RagtrimTrimmer ->
    PromptBuilder, so the test reads the prompt an LLM would get."""

    QUERY = "lifecycle rules archive storage queue access keys"

    @staticmethod
    def build(trimmer: RagtrimTrimmer | None) -> HaystackPipeline:
        store = InMemoryDocumentStore()
        store.write_documents([Document(content=text, meta=dict(meta)) for text, meta in CORPUS])
        pipe = HaystackPipeline()
        pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
        pipe.add_component("prompt", PromptBuilder(template="{% for d in documents %}{{ d.content }}\n{% endfor %}"
                                                            "Question: {{ query }}",
                                                   required_variables=["documents", "query"]))
        if trimmer is None:
            pipe.connect("retriever.documents", "prompt.documents")
        else:
            pipe.add_component("trimmer", trimmer)
            pipe.connect("retriever.documents", "trimmer.documents")
            pipe.connect("trimmer.documents", "prompt.documents")
        return pipe

    def inputs(self, trimmed: bool = True) -> dict[str, Any]:
        data = {"retriever": {"query": self.QUERY}, "prompt": {"query": self.QUERY}}
        return {**data, "trimmer": {"query": self.QUERY}} if trimmed else data

    def test_untrimmed_baseline(self) -> None:
        prompt = self.build(None).run(self.inputs(trimmed=False))["prompt"]["prompt"]
        assert [prompt.count(text) for text, _ in CORPUS] == [2, 2, 1, 1, 1]  # every document; the copies twice

    def test_after_a_bm25_retriever(self) -> None:
        out = self.build(RagtrimTrimmer(pipeline=dedup_budget(9))).run(self.inputs())
        # BM25 order: keys (13 words), archive (10), lifecycle (7) and its copy, queue (11); 9 words fit only one
        assert out["prompt"]["prompt"] == f"{CORPUS[0][0]}\nQuestion: {self.QUERY}"
        removed = out["trimmer"]["removed_documents"]
        assert [(d.meta["source"], d.meta["ragtrim_reason"]) for d in removed[:2]] == [
            ("keys", "over_budget"), ("lifecycle", "over_budget")]
        assert [d.meta["ragtrim_reason"] for d in removed[2:]] == ["exact_duplicate", "over_budget"]
        assert all(d.score is not None for d in removed)  # the retriever's BM25 scores, kept
        report = out["trimmer"]["trim_report"]
        assert (report["documents_in"], report["documents_out"], report["tokens_before"], report["tokens_after"]
                ) == (5, 1, 48, 7)

    def test_the_default_pipeline_with_a_budget(self) -> None:
        out = self.build(RagtrimTrimmer(budget=30, tokenizer="whitespace", scorer="bm25")).run(self.inputs())
        context = out["prompt"]["prompt"].rpartition("Question:")[0]
        report = out["trimmer"]["trim_report"]
        assert (report["tokens_before"], report["documents_in"]) == (48, 5)
        assert 0 < report["tokens_after"] <= 30
        assert len(context.split()) == report["tokens_after"]  # the prompt holds exactly what the report counts
        assert "exact_duplicate" in {r["reason"] for r in report["removals"]}

    def test_a_failing_stage_names_the_component_and_the_stage(self) -> None:
        pipe = self.build(RagtrimTrimmer(pipeline=Pipeline([Exploding()], tokenizer="whitespace")))
        with pytest.raises(Exception, match="trimmer") as info:  # Haystack's own run error, naming the component
            pipe.run(self.inputs())
        assert isinstance(info.value.__cause__, StageError) and "stage 'exploding' failed" in str(info.value.__cause__)

    def test_survives_dumps_and_loads(self) -> None:
        pipe = self.build(RagtrimTrimmer(pipeline=dedup_budget(9)))
        text = pipe.dumps()
        assert f"type: {MODULE}.RagtrimTrimmer" in text
        loaded = loads(text)
        assert loaded.dumps() == text
        assert loaded.run(self.inputs())["prompt"] == pipe.run(self.inputs())["prompt"]

    def test_async_pipeline(self) -> None:
        pipe = self.build(RagtrimTrimmer(pipeline=dedup_budget(9)))
        got = run_async(pipe, self.inputs())
        assert got["prompt"]["prompt"] == f"{CORPUS[0][0]}\nQuestion: {self.QUERY}"
        assert got["trimmer"]["trim_report"]["tokens_after"] == 7


class TestExample:
    """examples/haystack_qa.py runs offline (InMemoryBM25Retriever over the raw HTML pages, PromptBuilder)."""

    def test_offline_run_prints_tokens_saved(self, capsys: pytest.CaptureFixture[str]) -> None:
        example = load_example("haystack_qa")
        assert example.main(["--limit", "2", "--budget", "300"]) == 0
        out = capsys.readouterr().out
        assert out.count("(saved ") == 2 and "2 questions:" in out and "in prompt: True" in out
        assert example.main(["--yaml"]) == 0
        loaded = loads(capsys.readouterr().out).get_component("trimmer")
        assert loaded.to_dict() == RagtrimTrimmer(budget=800).to_dict()
