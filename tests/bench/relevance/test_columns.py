"""The quality matrix's dataset builders: KorQuAD hard distractors, KV chunks, the columns' sampling, gold placement
and splits (fixtures here; the shared data where present)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim_bench.datasets import data_dir
from ragtrim_bench.datasets.korquad import hard_instances, load_korquad
from ragtrim_bench.datasets.kv import KVRecord, kv_instance, kv_line, load_kv
from ragtrim_bench.datasets.nq import Passage, QAInstance
from ragtrim_bench.datasets.squad import SquadArticle, SquadQuestion
from ragtrim_bench.relevance.columns import (
    COLUMNS,
    DOMAIN_COLUMNS,
    build_column,
    gold_slot,
    halves,
    request_from,
    sample,
)
from ragtrim_bench.relevance.matrix import answer_kept


def _article(title: str, paragraphs: list[str], questions: list[tuple[str, str, int]]) -> SquadArticle:
    return SquadArticle(title=title, paragraphs=tuple(paragraphs), questions=tuple(
        SquadQuestion(id=f"{title}-{k}", question=q, answers=(a,), is_impossible=False, plausible_answers=(),
                      paragraph_index=pi) for k, (q, a, pi) in enumerate(questions)))


ARTICLES = [
    _article("서울", ["서울은 대한민국의 수도이다. 인구는 약 천만 명이다.", "한강은 서울을 가로지른다."],
             [("대한민국의 수도는 어디인가?", "서울", 0)]),
    _article("부산", ["부산은 대한민국 제2의 도시이다.", "부산의 항구는 대한민국에서 가장 크다."], []),
    _article("대구", ["대구는 대한민국의 도시이며 사과로 유명하다.", "대구의 수도권 접근성은 좋다."], []),
    _article("광주", ["광주 서울 사이의 거리는 멀다.", "광주는 호남의 중심 도시이다."], []),
]


class TestKorquadHardInstances:
    def test_gold_first_distractors_from_other_articles_without_the_answer(self) -> None:
        [(inst, scores)] = hard_instances(ARTICLES, [(0, 0)], n_docs=4)
        assert inst.passages[0].is_gold and inst.passages[0].text == ARTICLES[0].paragraphs[0]
        assert [p.is_gold for p in inst.passages] == [True, False, False, False]
        own = set(ARTICLES[0].paragraphs)
        for p in inst.passages[1:]:
            assert p.text not in own  # other articles only
            assert not answer_kept(inst.answers, p.text)  # "광주 서울 사이..." holds the answer: never drawn
        assert "광주 서울 사이의 거리는 멀다." not in [p.text for p in inst.passages]
        assert len(scores) == 4 and scores[0] == max(scores)

    def test_distractors_are_the_best_bigram_matches(self) -> None:
        [(inst, _)] = hard_instances(ARTICLES, [(0, 0)], n_docs=2)
        # "대한민국의 수도" shares the bigrams 대한, 한민, 민국, 국의, 수도 with Daegu's first paragraph only
        assert inst.passages[1].text == "대구는 대한민국의 도시이며 사과로 유명하다."

    def test_deterministic(self) -> None:
        assert hard_instances(ARTICLES, [(0, 0)], n_docs=4) == hard_instances(ARTICLES, [(0, 0)], n_docs=4)

    def test_too_few_distractors_and_bad_n_docs(self) -> None:
        with pytest.raises(InputError, match="usable distractors"):
            hard_instances(ARTICLES, [(0, 0)], n_docs=8)
        with pytest.raises(ConfigError, match="n_docs"):
            hard_instances(ARTICLES, [(0, 0)], n_docs=0)

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="KorQuAD file"):
            load_korquad(tmp_path / "absent.json")


def _kv_file(tmp_path: Path, records: list[dict[str, object]]) -> Path:
    path = tmp_path / "kv.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return path


PAIRS = [[f"k{i}", f"v{i}"] for i in range(10)]


class TestKV:
    def test_load_and_chunk(self, tmp_path: Path) -> None:
        [rec] = load_kv(_kv_file(tmp_path, [{"ordered_kv_records": PAIRS, "key": "k5", "value": "v5"}]))
        inst = kv_instance(rec)
        assert [p.text.count("\n") + 1 for p in inst.passages] == [4, 4, 2]
        assert [p.is_gold for p in inst.passages] == [False, True, False]
        assert inst.passages[1].text.splitlines()[1] == kv_line("k5", "v5") == '"k5": "v5"'
        assert inst.answers == ("v5",) and '"k5"' in inst.question
        assert len(kv_instance(rec, pairs_per_chunk=5).passages) == 2

    def test_bad_records(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="line 1"):
            load_kv(_kv_file(tmp_path, [{"key": "k"}]))
        with pytest.raises(InputError, match="exactly once"):
            load_kv(_kv_file(tmp_path, [{"ordered_kv_records": PAIRS, "key": "nope", "value": "v"}]))
        with pytest.raises(ConfigError, match="pairs_per_chunk"):
            kv_instance(KVRecord(0, (("a", "b"),), "a", "b"), pairs_per_chunk=0)
        with pytest.raises(InputError, match="kv-retrieval file"):
            load_kv(tmp_path / "absent.jsonl.gz")


class TestSampleAndGold:
    def test_sample_is_seeded_distinct_and_capped(self) -> None:
        a = sample(100, 30, seed=0, label="x")
        assert a == sample(100, 30, seed=0, label="x") and len(set(a)) == 30
        assert a != sample(100, 30, seed=1, label="x") and a != sample(100, 30, seed=0, label="y")
        assert sorted(sample(5, 30, seed=0, label="x")) == [0, 1, 2, 3, 4]
        with pytest.raises(ConfigError, match="limit"):
            sample(5, 0, seed=0, label="x")

    def test_halves_are_disjoint_and_cover(self) -> None:
        assert list(halves(5, "dev")) == [0, 1] and list(halves(5, "heldout")) == [2, 3, 4]

    def test_request_moves_the_gold_and_keeps_the_rest_in_order(self) -> None:
        passages = tuple(Passage(id=f"p{i}", title=f"T{i}", text=f"text {i}", is_gold=i == 0) for i in range(6))
        inst = QAInstance(id="q7", question="q?", answers=("a",), passages=passages)
        req = request_from("c", "dev", inst, seed=0, scores=[10, 1, 2, 3, 4, 5])
        slot = gold_slot("q7", 6, seed=0)
        assert req.gold_index == slot and req.passages[slot] == "T0\ntext 0"
        assert [p for i, p in enumerate(req.passages) if i != slot] == [f"T{i}\ntext {i}" for i in range(1, 6)]
        assert req.retrieval_scores is not None and req.retrieval_scores[slot] == 10.0
        assert [s for i, s in enumerate(req.retrieval_scores) if i != slot] == [1, 2, 3, 4, 5]
        bare = request_from("c", "dev", inst, seed=0, text=lambda p: p.text)
        assert bare.passages[slot] == "text 0" and bare.retrieval_scores is None

    def test_gold_slots_spread(self) -> None:
        slots = {gold_slot(f"q{i}", 20, seed=0) for i in range(200)}
        assert slots == set(range(20))

    def test_exactly_one_gold(self) -> None:
        inst = QAInstance(id="q", question="q", answers=("a",), passages=(Passage("a", "", "x"),))
        with pytest.raises(ConfigError, match="exactly one gold"):
            request_from("c", "dev", inst, seed=0)

    def test_unknown_column_and_split(self) -> None:
        with pytest.raises(ConfigError, match="unknown column"):
            build_column("nope", "dev", limit=1)
        with pytest.raises(ConfigError, match="split"):
            build_column("kv", "test", limit=1)  # type: ignore[arg-type]


@pytest.mark.data
class TestSharedColumns:
    """Every built-in column on the shared data: deterministic, gold where it says, no answer in a distractor, and
    dev and held-out apart."""

    @pytest.fixture(autouse=True)
    def _data(self) -> None:
        if not data_dir().is_dir():
            pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")

    @pytest.mark.parametrize("column", [c for c in COLUMNS if c not in DOMAIN_COLUMNS])  # test_domain.py has those
    def test_column(self, column: str) -> None:
        dev = build_column(column, "dev", limit=25)
        held = build_column(column, "heldout", limit=25)
        assert dev == build_column(column, "dev", limit=25)
        assert len(dev) == len(held) == 25
        for req in dev + held:
            assert len(req.passages) == (19 if column == "kv" else 20)
            assert answer_kept(req.answers, req.passages[req.gold_index])
            assert not any(answer_kept(req.answers, p) for i, p in enumerate(req.passages) if i != req.gold_index)
            assert req.gold_index == gold_slot(req.id, len(req.passages), seed=0)
            has_scores = column in ("nq-title", "nq-notitle", "korquad")
            assert (req.retrieval_scores is not None) == has_scores
        assert not {r.id for r in dev} & {r.id for r in held}
        golds = {r.passages[r.gold_index] for r in held}
        assert not {r.passages[r.gold_index] for r in dev} & golds

    def test_split_rules(self) -> None:
        assert all(int(r.id[2:]) < 1062 for r in build_column("nq-title", "dev", limit=300))
        assert all(int(r.id[2:]) >= 1062 for r in build_column("nq-title", "heldout", limit=300))
        assert all(int(r.id[2:]) < 200 for r in build_column("kv", "dev", limit=300))
        notitle = build_column("nq-notitle", "dev", limit=25)
        title = build_column("nq-title", "dev", limit=25)
        assert [r.id for r in notitle] == [r.id for r in title]
        assert all(t.endswith("\n" + n) for a, b in zip(title, notitle) for t, n in zip(a.passages, b.passages))
