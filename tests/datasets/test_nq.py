import gzip
import json
from pathlib import Path

import pytest

from ragtrim.datasets import data_dir
from ragtrim.datasets.nq import NQQuestion, Passage, build_multidoc, gold_index, load_nq_open
from ragtrim.errors import ConfigError, InputError
from ragtrim.qa_metrics import answer_substring_in_text


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


@pytest.mark.data
class TestSharedData:
    def test_full_file_builds(self) -> None:
        if not (data_dir() / "nq-multidoc").is_dir():
            pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")
        pool = load_nq_open()
        assert len(pool) == 2124
        insts = build_multidoc(pool[:20], n_docs=20, gold_position="middle", pool=pool)
        assert all(len(i.passages) == 20 and i.passages[9].is_gold for i in insts)
