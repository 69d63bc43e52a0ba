"""The example corpus in examples/corpus: the committed requests (package data, ragtrim/data/example_requests.jsonl)
are what build_corpus.py produces, and they hold what ``make bench`` needs (answers present, unique ids, the
documented chunk fields)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ragtrim.savings import example_requests

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CORPUS = EXAMPLES / "corpus"
REQUESTS = example_requests()


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_corpus", EXAMPLES / "build_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_corpus"] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def builder() -> ModuleType:
    return _load_builder()


@pytest.fixture(scope="module")
def requests() -> list[dict[str, Any]]:
    return [json.loads(line) for line in REQUESTS.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in (CORPUS / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    ]


class TestBuilder:
    def test_committed_requests_are_what_the_builder_writes(
        self, builder: ModuleType, tmp_path: Path
    ) -> None:
        out = tmp_path / "requests.jsonl"
        assert builder.main(["--out", str(out), "--quiet"]) == 0
        assert out.read_bytes() == REQUESTS.read_bytes(), "run `python examples/build_corpus.py` and commit"

    def test_text_windows_overlap(self, builder: ModuleType) -> None:
        text = " ".join(f"w{i}" for i in range(25))
        windows = builder.text_windows(text, size=10, step=6)
        assert [w.split()[0] for w in windows] == ["w0", "w6", "w12", "w15"]
        assert all(len(w.split()) == 10 for w in windows)
        assert windows[-1].split()[-1] == "w24"

    def test_text_windows_short_and_empty_text(self, builder: ModuleType) -> None:
        assert builder.text_windows("a b c", size=10, step=6) == ["a b c"]
        assert builder.text_windows("", size=10, step=6) == []

    def test_visible_text_skips_scripts_keeps_menus(self, builder: ModuleType) -> None:
        html = "<nav><a>Docs</a></nav><script>var x = 1;</script><p>Body &amp; text</p>"
        assert builder.visible_text(html) == "Docs\nBody & text"

    def test_every_page_is_indexed_as_page_fragments_and_windows(self, builder: ModuleType) -> None:
        candidates = builder.index_pages(builder.load_pages(CORPUS))
        for _name, url in builder.PAGES:
            kinds = {c.kind for c in candidates if c.source == url}
            assert kinds == {"page", "fragment", "window"}, url


class TestQuestions:
    def test_fields_and_sources(self, builder: ModuleType, questions: list[dict[str, Any]]) -> None:
        urls = {url for _name, url in builder.PAGES}
        assert 10 <= len(questions) <= 12
        assert len({q["id"] for q in questions}) == len(questions)
        for q in questions:
            assert set(q) == {"id", "query", "answers", "source"}
            assert q["source"] in urls
            assert q["answers"] and all(isinstance(a, str) and a for a in q["answers"])

    def test_answers_appear_in_the_source_page(
        self, builder: ModuleType, questions: list[dict[str, Any]]
    ) -> None:
        pages = {page.url: page.html for page in builder.load_pages(CORPUS)}
        for q in questions:
            for answer in q["answers"]:
                assert answer in pages[q["source"]], (q["id"], answer)


class TestRequests:
    def test_one_request_per_question(
        self, requests: list[dict[str, Any]], questions: list[dict[str, Any]]
    ) -> None:
        assert [r["id"] for r in requests] == [q["id"] for q in questions]
        for r, q in zip(requests, questions):
            assert {k: r[k] for k in q} == q

    def test_every_answer_occurs_in_a_chunk(self, requests: list[dict[str, Any]]) -> None:
        for r in requests:
            for answer in r["answers"]:
                assert any(answer in c["text"] for c in r["chunks"]), (r["id"], answer)

    def test_chunk_ids_unique_per_request(self, requests: list[dict[str, Any]]) -> None:
        for r in requests:
            ids = [c["id"] for c in r["chunks"]]
            assert len(ids) == len(set(ids)), r["id"]

    def test_chunk_shape(self, builder: ModuleType, requests: list[dict[str, Any]]) -> None:
        urls = {url for _name, url in builder.PAGES}
        for r in requests:
            assert 12 <= len(r["chunks"]) <= 20, r["id"]
            for c in r["chunks"]:
                assert set(c) == {"id", "text", "metadata"}
                assert c["text"].strip()
                assert set(c["metadata"]) == {"source", "kind"}
                assert c["metadata"]["kind"] in {"page", "fragment", "window"}
                assert c["metadata"]["source"] in urls

    def test_corpus_has_the_redundancy_it_is_meant_to_show(
        self, builder: ModuleType, requests: list[dict[str, Any]]
    ) -> None:
        rows = builder.corpus_stats(requests)
        assert sum(int(row["exact_duplicates"]) for row in rows) >= len(rows)
        assert sum(int(row["from_copies"]) for row in rows) > 0
        assert sum(int(row["unrelated"]) for row in rows) > 0
        assert all(int(row["pages"]) >= 1 and int(row["windows"]) >= 1 for row in rows)

    def test_corpus_stays_small(self) -> None:
        """The pages, the questions and the requests that ship in every wheel."""
        total_bytes = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file()) + REQUESTS.stat().st_size
        assert total_bytes < 1_000_000
