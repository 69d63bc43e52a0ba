"""The domain columns' shared rule (split by document, per-document cap, hardest distractors without the answer), the
TAT-QA and CMRC / JSQuAD builders on small files, and all four on the shared data where it is present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim_bench.datasets import data_dir
from ragtrim_bench.datasets.cjk import cjk_questions, load_cjk, shown
from ragtrim_bench.datasets.domain import GOLD_SLOT, ChunkPool, cap_per_document, check_split, split_of
from ragtrim_bench.datasets.nq import bm25_tokens
from ragtrim_bench.datasets.tatqa import eligible, load_tatqa, render_table, tatqa_questions
from ragtrim_bench.relevance.columns import DOMAIN_COLUMNS, build_column
from ragtrim_bench.relevance.matrix import answer_kept


class TestSplitAndCap:
    def test_split_of_is_fixed_and_spreads(self) -> None:
        assert split_of("tatqa/abc") == split_of("tatqa/abc")
        splits = [split_of(f"doc{i}") for i in range(200)]
        assert 70 < splits.count("dev") < 130 and set(splits) == {"dev", "heldout"}
        # pinned: SHA-256 is the same everywhere, so the split never moves between hosts or Python versions
        assert [split_of(f"doc{i}") for i in range(6)] == ["heldout", "dev", "dev", "dev", "dev", "dev"]

    def test_check_split(self) -> None:
        assert check_split("dev") == "dev"
        with pytest.raises(ConfigError, match="split must be"):
            check_split("test")

    def test_cap_per_document(self) -> None:
        items = [("a", k) for k in range(5)] + [("b", 0), ("b", 1)]
        capped = cap_per_document(items, lambda x: x[0], seed=0, label="t")
        assert [x for x in capped if x[0] == "b"] == [("b", 0), ("b", 1)]
        assert len([x for x in capped if x[0] == "a"]) == 3
        assert capped == cap_per_document(items, lambda x: x[0], seed=0, label="t")
        assert capped == sorted(capped, key=items.index)  # input order kept
        draws = {tuple(cap_per_document(items, lambda x: x[0], seed=s, label="t")) for s in range(10)}
        assert len(draws) > 1  # the seed draws


class TestChunkPool:
    CHUNKS: ClassVar[list[tuple[str, str]]] = [("d1", "revenue grew in 2019 to 5 million"), ("d1", "revenue fell in 2018"),
              ("d2", "revenue of other segments"), ("d2", "cost of revenue rose"), ("d3", "unrelated text here"),
              ("d3", "revenue fell in 2018")]  # a duplicate text: kept once

    def test_hardest_skips_answer_gold_and_excluded(self) -> None:
        pool = ChunkPool(self.CHUNKS, tokens=bm25_tokens)
        assert len(pool.texts) == 5 and pool.documents[1] == "d1"
        texts, scores, gold_score = pool.hardest("q", "revenue in 2019", ["5 million"], self.CHUNKS[0][1], n=3)
        assert self.CHUNKS[0][1] not in texts and len(texts) == 3
        assert scores == sorted(scores, reverse=True) and gold_score > scores[0]
        texts, _, _ = pool.hardest("q", "revenue", ["2018"], self.CHUNKS[0][1], n=2)
        assert all("2018" not in t for t in texts)
        texts, _, _ = pool.hardest("q", "revenue", ["zz"], self.CHUNKS[0][1], n=1,
                                   exclude=lambda j: pool.documents[j] == "d2")
        assert texts == ["revenue fell in 2018"]

    def test_first_goes_first(self) -> None:
        pool = ChunkPool(self.CHUNKS, tokens=bm25_tokens)
        texts, _, _ = pool.hardest("q", "revenue", ["zz"], self.CHUNKS[0][1], n=4,
                                   first=lambda j: pool.documents[j] == "d3")
        assert texts[0] == "unrelated text here"  # d3's only text of its own: it scores 0, yet comes first

    def test_too_few_and_no_answer(self) -> None:
        pool = ChunkPool(self.CHUNKS, tokens=bm25_tokens)
        with pytest.raises(InputError, match="usable distractors"):
            pool.hardest("q", "revenue", ["revenue"], self.CHUNKS[0][1], n=2)
        with pytest.raises(InputError, match="no answer"):
            pool.hardest("q", "revenue", ["the"], self.CHUNKS[0][1], n=2)


def _tatqa_file(tmp_path: Path) -> Path:
    contexts = [{
        "table": {"uid": f"t{i}", "table": [["", "2019", "2018"], [f"Revenue {i}", f"{100 + i}.5", "90.1"],
                                            ["Cost", "40", "3"]]},
        "paragraphs": [{"uid": "p2", "order": 2, "text": f"Second paragraph {i} on margins."},
                       {"uid": "p1", "order": 1, "text": f"The company uses the straight-line method {i}."}],
        "questions": [
            {"uid": f"q{i}a", "question": "What method does the company use?", "answer": [f"straight-line method {i}"],
             "answer_type": "span"},
            {"uid": f"q{i}b", "question": f"What is revenue {i} in 2019?", "answer": [f"{100 + i}.5"],
             "answer_type": "span"},
            {"uid": f"q{i}c", "question": "What is the change?", "answer": 10.4, "answer_type": "arithmetic"},
            {"uid": f"q{i}d", "question": "Which cost?", "answer": ["40"], "answer_type": "span"},
            {"uid": f"q{i}e", "question": "Which ones?", "answer": ["a", "b"], "answer_type": "multi-span"},
        ]} for i in range(30)]
    path = tmp_path / "tatqa.json"
    path.write_text(json.dumps(contexts))
    return path


class TestTatqa:
    def test_render_table(self) -> None:
        assert render_table([["", "2019"], ["Net  income", "$1,2\n00"]]) == "|  | 2019 |\n| Net income | $1,2 00 |"

    def test_load_and_eligible(self, tmp_path: Path) -> None:
        reports = load_tatqa(_tatqa_file(tmp_path))
        r = reports[0]
        assert r.paragraphs == ("The company uses the straight-line method 0.", "Second paragraph 0 on margins.")
        assert r.chunks()[0].splitlines()[0] == "|  | 2019 | 2018 |"
        by_id = {q.id: q for q in r.questions}
        assert eligible(r, by_id["q0a"]) == r.paragraphs[0]
        assert eligible(r, by_id["q0b"]) == r.chunks()[0]  # the table holds "100.5"
        assert eligible(r, by_id["q0c"]) is None  # arithmetic: computed, written nowhere
        assert eligible(r, by_id["q0d"]) is None  # "40": under MIN_ANSWER_CHARS
        assert eligible(r, by_id["q0e"]) is None  # multi-span

    def test_questions(self, tmp_path: Path) -> None:
        path = str(_tatqa_file(tmp_path))
        dev, held = tatqa_questions("dev", 0, path), tatqa_questions("heldout", 0, path)
        assert dev and held and not {q.document for q in dev} & {q.document for q in held}
        for q in dev + held:
            assert len(q.distractors) == 19 and len(q.scores) == 20
            assert answer_kept(q.answers, q.gold) and not any(answer_kept(q.answers, d) for d in q.distractors)

    def test_missing_and_bad_file(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="TAT-QA file"):
            load_tatqa(tmp_path / "absent.json")
        (tmp_path / "bad.json").write_text('[{"table": {}}]')
        with pytest.raises(InputError, match="not a TAT-QA file"):
            load_tatqa(tmp_path / "bad.json")


class TestCjk:
    def test_shown(self) -> None:
        assert shown("jsquad", "東京 [SEP] 東京は日本の首都である。") == "東京\n東京は日本の首都である。"
        assert shown("cmrc", "北京 [SEP] x") == "北京 [SEP] x"

    def test_questions_from_a_small_file(self, tmp_path: Path) -> None:
        data = {"data": [{"title": f"条目{i}", "paragraphs": [{"context": f"条目{i} [SEP] 第{i}号车站位于港口。答案{i}在此。",
                                                          "qas": [{"id": f"q{i}", "question": "车站位于哪里？",
                                                                   "answers": [{"text": f"答案{i}", "answer_start": 0}]}]}]}
                         for i in range(60)]}
        path = tmp_path / "js.json"
        path.write_text(json.dumps(data, ensure_ascii=False))
        dev = cjk_questions("jsquad", "dev", 0, str(path))
        assert dev and all(q.gold.startswith("条目") and "\n" in q.gold for q in dev)
        assert all(not any(answer_kept(q.answers, d) for d in q.distractors) for q in dev)

    def test_missing(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="cmrc file"):
            load_cjk("cmrc", tmp_path / "absent.json")
        with pytest.raises(ConfigError, match="name must be"):
            load_cjk("xx", tmp_path)  # type: ignore[arg-type]


@pytest.mark.data
class TestSharedDomainColumns:
    """The four domain columns on the shared data: 20 chunks, the gold in GOLD_SLOT and nowhere else the answer,
    deterministic, documents apart between the splits."""

    @pytest.mark.parametrize("column", list(DOMAIN_COLUMNS))
    def test_column(self, column: str) -> None:
        if not data_dir().is_dir():
            pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")
        dev = build_column(column, "dev", limit=40)
        held = build_column(column, "heldout", limit=40)
        assert dev == build_column(column, "dev", limit=40) and len(dev) == len(held) == 40
        for req in dev + held:
            assert len(req.passages) == 20 and req.gold_index == GOLD_SLOT
            assert answer_kept(req.answers, req.passages[GOLD_SLOT])
            assert not any(answer_kept(req.answers, p) for i, p in enumerate(req.passages) if i != GOLD_SLOT)
            assert req.retrieval_scores is not None and len(req.retrieval_scores) == 20
        assert not {r.passages[GOLD_SLOT] for r in dev} & {r.passages[GOLD_SLOT] for r in held}
