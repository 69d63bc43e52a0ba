import gzip
import json
import math
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim_bench.common.answers import answer_substring_in_text
from ragtrim_bench.datasets import data_dir
from ragtrim_bench.datasets.nq import (
    NQQuestion,
    Passage,
    _BM25Index,
    build_multidoc,
    gold_index,
    golden_multidoc,
    load_nq_open,
)


def _q(i: int, question: str, answer: str, title: str, text: str) -> NQQuestion:
    return NQQuestion(index=i, question=question, answers=(answer,),
                      gold=Passage(id=f"nq{i}", title=title, text=text, is_gold=True))


QUESTIONS = [
    _q(0, "who founded rome", "Romulus", "Rome", "Rome was founded by Romulus in 753 BC."),
    _q(1, "capital of france", "Paris", "France", "The capital of France is Paris."),
    _q(2, "who founded carthage", "Dido", "Carthage", "Carthage was founded by Dido, queen of Tyre."),
    _q(3, "when was rome sacked", "410", "Sack of Rome", "Rome was sacked by the Visigoths in 410."),
    _q(4, "tallest mountain", "Everest", "Everest", "Mount Everest is the tallest mountain."),
    _q(5, "rome river", "Tiber", "Tiber", "The Tiber flows through Rome, which Romulus founded."),
    _q(6, "dup of france", "Lyon", "France", "The capital of France is Paris."),
]


class TestGoldIndex:
    def test_named_positions(self) -> None:
        assert [gold_index(p, 20) for p in ("first", "middle", "last")] == [0, 9, 19]
        assert gold_index("middle", 30) == 14

    def test_int_and_invalid(self) -> None:
        assert gold_index(3, 5) == 3
        with pytest.raises(ConfigError, match="gold_position"):
            gold_index(5, 5)
        with pytest.raises(ConfigError, match="gold_position"):
            gold_index("centre", 5)  # type: ignore[arg-type]


class TestBuildMultidoc:
    def test_shape_position_and_no_answer_in_distractors(self) -> None:
        for pos, slot in (("first", 0), ("middle", 1), ("last", 3)):
            inst = build_multidoc(QUESTIONS[:1], n_docs=4, gold_position=pos, pool=QUESTIONS)[0]
            assert len(inst.passages) == 4
            assert inst.passages[slot].is_gold and inst.passages[slot].id == "nq0"
            assert inst.gold_ids == ("nq0",)
            for p in inst.passages:
                if not p.is_gold:
                    assert not answer_substring_in_text(inst.answers, p.content)

    def test_bm25_prefers_lexical_neighbours(self) -> None:
        inst = build_multidoc(QUESTIONS[:1], n_docs=3, pool=QUESTIONS)[0]
        # "Tiber ... Romulus" holds the answer and is excluded; the Rome-sack and Carthage "founded" passages lead.
        assert [p.id for p in inst.passages] == ["nq0", "nq3", "nq2"]

    def test_deduplicates_pool_and_never_uses_own_passage(self) -> None:
        inst = build_multidoc([QUESTIONS[6]], n_docs=6, pool=QUESTIONS)[0]
        ids = [p.id for p in inst.passages]
        assert len(set(ids)) == 6 and "nq1" not in ids  # nq1 has the identical text of nq6's gold

    def test_deterministic_random(self) -> None:
        a = build_multidoc(QUESTIONS[:2], n_docs=4, distractors="random", seed=1, pool=QUESTIONS)
        b = build_multidoc(QUESTIONS[:2], n_docs=4, distractors="random", seed=1, pool=QUESTIONS)
        assert a == b

    def test_invalid_parameters(self) -> None:
        with pytest.raises(ConfigError, match="n_docs"):
            build_multidoc(QUESTIONS, n_docs=0)
        with pytest.raises(ConfigError, match="distractors"):
            build_multidoc(QUESTIONS, distractors="hard")  # type: ignore[arg-type]
        with pytest.raises(InputError, match="n_docs"):
            build_multidoc(QUESTIONS, n_docs=50)

    def test_empty_questions(self) -> None:
        assert build_multidoc([], n_docs=3, pool=QUESTIONS) == []


class TestLoadNqOpen:
    def test_reads_gz(self, tmp_path: Path) -> None:
        rec = {"question": "q", "answers": ["a"], "ctxs": [{"title": "T", "text": "x a", "hasanswer": True}]}
        path = tmp_path / "x.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
        qs = load_nq_open(path)
        assert qs[0].gold == Passage(id="nq0", title="T", text="x a", is_gold=True)

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="not found"):
            load_nq_open(tmp_path / "nope.jsonl.gz")

    def test_bad_line(self, tmp_path: Path) -> None:
        path = tmp_path / "x.jsonl"
        path.write_text('{"question": "q"}\n')
        with pytest.raises(InputError, match="line 1"):
            load_nq_open(path)


class TestBM25Index:
    def test_scores_are_okapi_with_lucene_idf(self) -> None:
        docs = ["rome founded romulus", "rome river tiber rome", "paris france"]
        index = _BM25Index(docs, k1=1.5, b=0.75)
        avgdl = (3 + 4 + 2) / 3

        def weight(tf: int, df: int, length: int) -> float:
            idf = math.log(1 + (3 - df + 0.5) / (df + 0.5))
            return idf * tf * 2.5 / (tf + 1.5 * (1 - 0.75 + 0.75 * length / avgdl))

        # "who" and "the" are stopwords, "rome" is counted once however often the query repeats it.
        scores = index.scores("who founded the rome rome")
        assert scores.tolist() == pytest.approx([weight(1, 2, 3) + weight(1, 1, 3), weight(2, 2, 4), 0.0], rel=1e-12)

    def test_unknown_or_empty_query_scores_zero(self) -> None:
        index = _BM25Index(["a b", "c d"])
        assert index.scores("zzz").tolist() == [0.0, 0.0]
        assert index.scores("").tolist() == [0.0, 0.0]
        assert _BM25Index([]).scores("rome").tolist() == []


@pytest.mark.data
class TestSharedData:
    def test_full_file_builds(self) -> None:
        if not (data_dir() / "nq-multidoc").is_dir():
            pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")
        pool = load_nq_open()
        assert len(pool) == 2124
        insts = build_multidoc(pool[:20], n_docs=20, gold_position="middle", pool=pool)
        assert all(len(i.passages) == 20 and i.passages[9].is_gold for i in insts)

    def test_distractor_ids_are_pinned(self) -> None:
        """The hard distractors of the first questions, as the committed QA and GPU results were built with them
        (the same ids before and after BM25 moved onto ragtrim.scoring.bm25_okapi, for all 2,124 questions)."""
        if not (data_dir() / "nq-multidoc").is_dir():
            pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")
        pool = load_nq_open()
        insts = build_multidoc(pool[:3], gold_position="middle", pool=pool)
        assert [p.id for p in insts[0].passages] == [
            "nq87", "nq343", "nq1084", "nq1570", "nq382", "nq189", "nq1287", "nq563", "nq1564", "nq0", "nq1824",
            "nq628", "nq1422", "nq1963", "nq161", "nq1929", "nq86", "nq307", "nq862", "nq1088"]
        assert [p.id for p in insts[2].passages][:5] == ["nq1958", "nq91", "nq101", "nq673", "nq694"]

    def test_golden_multidoc_is_the_gpu_benchmarks_setting(self) -> None:
        """The golden requests (GPU and gateway benchmarks): 20 passages, the gold 10th, BM25 distractors from the
        whole file, whatever the offset."""
        if not (data_dir() / "nq-multidoc").is_dir():
            pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")
        pool = load_nq_open()
        assert golden_multidoc(3, offset=5) == build_multidoc(pool[5:8], n_docs=20, gold_position="middle",
                                                              distractors="bm25", pool=pool)
        assert [i.id for i in golden_multidoc(2)] == ["nq0", "nq1"]
        assert golden_multidoc(0) == []
