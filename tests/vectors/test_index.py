"""Filling the store ahead of time: ``index_passages``, ``read_corpus`` and ``ragtrim index``."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from ragtrim.cli import main
from ragtrim.errors import ConfigError, InputError, VectorStoreError
from ragtrim.pipeline import Pipeline
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.cascade import CascadeScorer
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.testing import FakeEmbedder
from ragtrim.vectors.index import embedders_of, index_passages, read_corpus
from ragtrim.vectors.store import open_store, pack, vector_key

PASSAGES = [f"Passage {i}: the tower by the river number {i}." for i in range(10)]


def fast_like(embedder: FakeEmbedder) -> CascadeScorer:
    return CascadeScorer(first="bm25", second=HybridScorer(scorers=(BM25Scorer(), embedder), method="mix",
                                                            weights=(0.4, 0.6)), candidates=32)


class TestIndexPassages:
    def test_fills_the_store_for_later_trims(self, tmp_path: Path) -> None:
        path = str(tmp_path / "v.sqlite3")
        embedder = FakeEmbedder(recipe="fake-v1", vector_store=path)
        seen: list[int] = []
        report = index_passages(PASSAGES, scorer=fast_like(embedder), batch_size=4, progress=seen.append)
        assert (report.passages, report.stored, report.already) == (10, 10, 0)
        assert report.embedders == ("fake-embedding:fake-v1",) and seen == [4, 4, 2]
        again = index_passages(PASSAGES[:5] + ["a new one"], scorer=fast_like(embedder))
        assert (again.stored, again.already) == (1, 5)
        later = FakeEmbedder(recipe="fake-v1", vector_store=path)
        scores = later.score("tower", PASSAGES)
        assert later.encoded_texts() == ["tower"]  # only the query needed the model
        assert scores == FakeEmbedder(recipe="fake-v1", vector_store=None).score("tower", PASSAGES)

    def test_store_argument_and_html(self, tmp_path: Path) -> None:
        path = str(tmp_path / "other.sqlite3")
        html = "<html><body><nav>Home | About</nav><article><p>" + "The tower stands by the river. " * 8 + \
            "</p></article></body></html>"
        index_passages([html], scorer=fast_like(FakeEmbedder(recipe="fake-v1", vector_store=None)), store=path)
        from ragtrim.stages.html import HtmlCleaner

        cleaned = HtmlCleaner().clean(html).text
        assert cleaned != html
        probe = FakeEmbedder(recipe="fake-v1", vector_store=path)
        probe.embed([cleaned])
        assert probe.encoded_texts() == []  # stored under the text a trim embeds

    def test_a_scorer_without_a_model_or_store_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(VectorStoreError, match="uses no embedding model"):
            index_passages(PASSAGES, scorer="bm25")
        with pytest.raises(VectorStoreError, match="has no vector store to fill"):
            index_passages(PASSAGES, scorer=FakeEmbedder(recipe=None, vector_store=str(tmp_path / "v.sqlite3")))
        with pytest.raises(VectorStoreError, match="has no vector store to fill"):
            index_passages(PASSAGES, scorer=FakeEmbedder(recipe="fake-v1", vector_store=None))
        with pytest.raises(InputError, match="batch_size must be an int >= 1, got 0"):
            index_passages(PASSAGES, scorer=FakeEmbedder(recipe="fake-v1"), batch_size=0)

    def test_a_file_that_is_not_a_store_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "v.sqlite3"
        path.write_bytes(b"not a database" * 100)
        with pytest.raises(ConfigError, match="v.sqlite3 is not a ragtrim vector store: it is not an SQLite database"):
            index_passages(PASSAGES, scorer=FakeEmbedder(recipe="fake-v1", vector_store=str(path)))
        assert path.read_bytes() == b"not a database" * 100

    def test_embedders_of_composites(self) -> None:
        e = FakeEmbedder(recipe="x")
        assert embedders_of(fast_like(e)) == [e]
        assert embedders_of(HybridScorer(scorers=(e, e), method="mix")) == [e]
        assert embedders_of("bm25") == []


class TestReadCorpus:
    def test_jsonl_text_files_and_folders(self, tmp_path: Path) -> None:
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / "a.jsonl").write_text(
            '{"text": "one"}\n"two"\n\n{"page_content": "three"}\n{"title": "T", "text": "four"}\n')
        (tmp_path / "c" / "b.txt").write_text("a whole file\nis one passage\n")
        (tmp_path / "c" / "empty.txt").write_text("  \n")
        assert list(read_corpus([tmp_path / "c"])) == ["one", "two", "three", "four", "a whole file\nis one passage\n"]
        assert list(read_corpus([tmp_path / "c" / "a.jsonl"], title_field="title"))[-1] == "T\nfour"
        (tmp_path / "d.jsonl").write_text('{"body": "x", "text": "y"}\n')
        assert list(read_corpus([tmp_path / "d.jsonl"], text_field="body")) == ["x"]

    @pytest.mark.parametrize(("content", "message"), [
        ("{not json\n", "d.jsonl:1: not JSON"),
        ('[1, 2]\n', "d.jsonl:1: a line must be a string or an object, got list"),
        ('{"title": "x"}\n', "d.jsonl:1: no text field"),
        ('{"text": 5}\n', "d.jsonl:1: no text field"),
    ])
    def test_bad_lines_name_file_and_line(self, tmp_path: Path, content: str, message: str) -> None:
        (tmp_path / "d.jsonl").write_text(content)
        with pytest.raises(InputError, match=message):
            list(read_corpus([tmp_path / "d.jsonl"]))

    def test_a_byte_order_mark_is_read_as_trim_reads_it(self, tmp_path: Path) -> None:
        (tmp_path / "b.jsonl").write_bytes(b'\xef\xbb\xbf{"text": "one"}\r\n"two"\r\n')
        (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbfa whole file\n")
        assert list(read_corpus([tmp_path / "b.jsonl", tmp_path / "b.txt"])) == ["one", "two", "a whole file\n"]

    @pytest.mark.parametrize("name", ["-", "/dev/stdin"])
    def test_stdin_is_jsonl(self, name: str) -> None:
        stdin = io.BytesIO(b'"one"\n{"text": "two"}\n')
        assert list(read_corpus([name], stdin=stdin)) == ["one", "two"]
        with pytest.raises(InputError, match=r"^stdin:2: not UTF-8 text \(invalid continuation byte at byte 10 of the "
                                             r"line\)"):
            list(read_corpus([name], stdin=io.BytesIO(b'"one"\n{"text": "\xe9t\xe9"}\n')))

    @pytest.mark.parametrize(("content", "message"), [
        (b'"fine"\n{"text": "caf\xe9"}\n', (r"d.jsonl:2: not UTF-8 text \(invalid continuation byte at byte 13 "
                                             r"of the line\); convert it first")),
        (b'"fine"\n"half \\ud800 a character"\n', r"d.jsonl:2: holds a lone surrogate '\\ud800'"),
        (b'{"title": "\\udfff", "text": "x"}\n', r"d.jsonl:1: holds a lone surrogate '\\udfff'"),
    ])
    def test_text_that_is_not_unicode_names_file_and_line(self, tmp_path: Path, content: bytes,
                                                          message: str) -> None:
        (tmp_path / "d.jsonl").write_bytes(content)
        with pytest.raises(InputError, match=message):
            list(read_corpus([tmp_path / "d.jsonl"], title_field="title"))

    def test_missing_and_binary_files(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="does not exist"):
            list(read_corpus([tmp_path / "nope.jsonl"]))
        (tmp_path / "b.bin").write_bytes(b"\xff\xfe\x00")
        with pytest.raises(InputError, match="not UTF-8"):
            list(read_corpus([tmp_path / "b.bin"]))


@pytest.fixture
def fake_index_scorer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ragtrim index`` embeds with FakeEmbedder(recipe="fake-v1") instead of the auto scorer's model."""
    from ragtrim.vectors import index as index_mod

    monkeypatch.setattr(index_mod, "resolve_index_scorer", lambda scorer: FakeEmbedder(recipe="fake-v1"))


class TestIndexCommand:
    def test_usage_errors_exit_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["index", str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "v.sqlite3")]) == 2
        assert "does not exist" in capsys.readouterr().err
        assert main(["index", str(tmp_path), "--max-mb", "0"]) == 2

    @pytest.mark.parametrize("size", ["inf", "nan", "1e308", "0.01", "-1", "lots"])
    def test_a_store_size_out_of_range_exits_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                size: str, monkeypatch: pytest.MonkeyPatch) -> None:
        corpus = tmp_path / "c.jsonl"
        corpus.write_text('"x"\n')
        assert main(["index", str(corpus), "--max-mb", size, "--store", str(tmp_path / "v.sqlite3")]) == 2
        why = {"1e308": " (the unit is MiB)", "0.01": ": a smaller store holds too few vectors to help",
               "-1": ": a smaller store holds too few vectors to help"}.get(size, "")
        assert capsys.readouterr().err == (f"ragtrim: error: --max-mb must be a number of MiB from 1 to 1048576 "
                                           f"(1 TiB), got {size!r}{why}\n")
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE_MAX_MB", size)
        monkeypatch.delenv("RAGTRIM_VECTOR_STORE", raising=False)
        assert main(["index", str(corpus), "--quiet"]) == 2
        assert capsys.readouterr().err.startswith("ragtrim: error: $RAGTRIM_VECTOR_STORE_MAX_MB must be a number "
                                                  "of MiB from 1 to 1048576")

    @pytest.mark.usefixtures("fake_index_scorer")
    @pytest.mark.parametrize(("content", "where"), [
        (b'"ok"\n{"text": "caf\xe9"}\n', "c.jsonl:2: not UTF-8 text"),
        (b'"ok"\n"\\ud800"\n', "c.jsonl:2: holds a lone surrogate"),
    ])
    def test_text_that_is_not_unicode_exits_2_naming_file_and_line(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, where: str) -> None:
        corpus = tmp_path / "c.jsonl"
        corpus.write_bytes(content)
        assert main(["index", str(corpus), "--quiet", "--store", str(tmp_path / "v.sqlite3")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ragtrim: error: {corpus.parent}/{where}") and err.count("\n") == 1

    @pytest.mark.usefixtures("fake_index_scorer")
    @pytest.mark.parametrize("name", ["-", "/dev/stdin"])
    def test_stdin_and_a_byte_order_mark(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'\xef\xbb\xbf"one"\n{"text": "two"}\n')))
        assert main(["index", name, "--quiet", "--store", str(tmp_path / "v.sqlite3")]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["passages"], report["stored"]) == (2, 2)

    @pytest.mark.usefixtures("fake_index_scorer")
    def test_damaged_vectors_are_rewritten_and_counted(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        store, corpus = tmp_path / "v.sqlite3", tmp_path / "c.jsonl"
        corpus.write_text("\n".join(json.dumps(p) for p in PASSAGES))
        assert main(["index", str(corpus), "--quiet", "--store", str(store)]) == 0
        capsys.readouterr()
        conn = sqlite3.connect(store)
        bad_checksum, narrow = vector_key("fake-v1", PASSAGES[0]), vector_key("fake-v1", PASSAGES[1])
        conn.execute("UPDATE vectors SET value = substr(value, 1, 20) || X'00' || substr(value, 22) WHERE key = ?",
                     (bad_checksum,))
        conn.execute("UPDATE vectors SET value = ? WHERE key = ?", (pack(np.ones(10, dtype=np.float32)), narrow))
        conn.commit()
        conn.close()
        assert main(["index", str(corpus), "--quiet", "--store", str(store)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["stored"], report["already"], report["repaired"]) == (0, 8, 2)
        reader = FakeEmbedder(recipe="fake-v1", vector_store=str(store))
        reader.embed(PASSAGES)
        assert reader.encoded_texts() == []  # every passage, the two repaired included, comes from the store
        assert main(["index", str(corpus), "--quiet", "--store", str(store)]) == 0
        assert json.loads(capsys.readouterr().out)["repaired"] == 0


class TestOneKeyForEveryReader:
    """``ragtrim index`` of every input form, then every reader finds every passage in the store."""

    FORMS: ClassVar[dict[str, bytes]] = {
        "a.txt": b"Passage A about the tower.\n",
        "b.txt": b"Passage B about the river.",
        "c.txt": b"\xef\xbb\xbfPassage C, written on Windows.\r\nIts second line.\r\n",
        "d.jsonl": b'\xef\xbb\xbf{"text": "Passage D with trailing blanks.  \\n"}\r\n'
                   b'"  Passage E, indented.\\r\\nA second line.\\r\\n"\r\n',
    }
    STRIPPED: ClassVar[list[str]] = ["Passage A about the tower.", "Passage B about the river.",
                "Passage C, written on Windows.\nIts second line.", "Passage D with trailing blanks.",
                "Passage E, indented.\nA second line."]
    AS_GIVEN: ClassVar[list[str]] = ["Passage A about the tower.\n", " Passage B about the river.\r\n",
                "Passage C, written on Windows.\r\nIts second line.", "\ufeffPassage D with trailing blanks.",
                "Passage E, indented.\r\nA second line.\n\n"]

    @pytest.fixture
    def store(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_index_scorer: None) -> str:
        for name, content in self.FORMS.items():
            (tmp_path / name).write_bytes(content)
        store = str(tmp_path / "v.sqlite3")
        assert main(["index", *(str(tmp_path / n) for n in self.FORMS), "--quiet", "--store", store]) == 0
        assert json.loads(capsys.readouterr().out)["stored"] == 5
        return store

    def pipeline(self, store: str) -> tuple[Pipeline, FakeEmbedder]:
        from ragtrim.api import default_stages
        from ragtrim.stages.relevance import RelevanceFilter

        scorer = FakeEmbedder(recipe="fake-v1", vector_store=store)
        stages = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                  for s in default_stages(scorer="bm25")]
        return Pipeline(stages, tokenizer="whitespace"), scorer

    @pytest.mark.parametrize("form", ["STRIPPED", "AS_GIVEN"])
    def test_trim(self, store: str, form: str) -> None:
        pipeline, scorer = self.pipeline(store)
        pipeline.run(getattr(self, form), query="tower")
        assert scorer.encoded_texts() == ["tower"]  # the query alone went to the model

    def test_the_gateways_documents(self, store: str) -> None:
        from ragtrim.serve.render import _documents

        pipeline, scorer = self.pipeline(store)
        pipeline.run(_documents(self.AS_GIVEN), query="tower")
        assert scorer.encoded_texts() == ["tower"]

    def test_langchain(self, store: str) -> None:
        from langchain_core.documents import Document

        from ragtrim.integrations.langchain import RagtrimCompressor

        pipeline, scorer = self.pipeline(store)
        compressor = RagtrimCompressor(pipeline=pipeline)
        compressor.compress_documents([Document(page_content=t) for t in self.AS_GIVEN], "tower")
        assert scorer.encoded_texts() == ["tower"]

    def test_bm25_has_nothing_to_index(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        corpus = tmp_path / "c.jsonl"
        corpus.write_text("\n".join(json.dumps({"text": p}) for p in PASSAGES))
        assert main(["index", str(corpus), "--scorer", "bm25", "--quiet",
                     "--store", str(tmp_path / "v.sqlite3")]) == 1
        assert "uses no embedding model" in capsys.readouterr().err


@pytest.mark.model
def test_index_command_fills_the_store_for_the_auto_scorer(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrim.scoring.auto import choose

    if choose().scorer == "bm25":
        pytest.skip(f"auto is {choose().scorer} here")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"text": p}) for p in PASSAGES))
    store = str(tmp_path / "v.sqlite3")
    assert main(["index", str(corpus), "--store", store, "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["store"] == store and out["passages"] == 10 and out["stored"] == 10
    from ragtrim.scoring.auto import BALANCED_PREFIX_TOKENS, prefix_minilm

    reader = prefix_minilm(choose().backend, threads=choose().threads, pieces=BALANCED_PREFIX_TOKENS)
    shared = open_store(store)
    reader.vector_store = store  # the same recipe as the shared auto scorer, reading this store
    reader.embed(PASSAGES)
    assert shared is not None and shared.stats.hits == 10


@pytest.mark.model
def test_the_onnx_recipe_names_how_this_host_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    import numpy as np

    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    recipe = OnnxEmbeddingScorer(max_seq_length=128, vector_store=None)._recipe()
    assert re.search(r"/probe-[0-9a-f]{16}$", recipe)
    assert OnnxEmbeddingScorer(max_seq_length=128, vector_store=None)._recipe() == recipe  # stable on one host
    real = OnnxEmbeddingScorer._encode
    monkeypatch.setattr(OnnxEmbeddingScorer, "_encode", lambda self, texts: real(self, texts) + np.float32(1e-6))
    assert OnnxEmbeddingScorer(max_seq_length=128, vector_store=None)._recipe() != recipe  # kernels that round apart
