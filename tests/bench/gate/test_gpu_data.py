"""ragtrim_bench.gate.gpu_data: the golden set and a training set that never shares an article with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim_bench.gate import gpu_data


@pytest.mark.data
def test_the_split(shared_data: Path) -> None:
    golden = gpu_data.golden_set(shared_data)
    assert len(golden) == 300 and sum(not i.answerable for i in golden) == 90
    assert {i.tags[0] for i in golden} == set(gpu_data.GOLDEN_ARTICLES)
    assert all(len(i.documents) == 10 and i.schema is not None for i in golden)
    items, info = gpu_data.training_set(shared_data)
    assert not set(info["training_squad_articles"]) & set(gpu_data.GOLDEN_ARTICLES)
    golden_questions = {i.question for i in golden}
    golden_paragraphs = {d for i in golden for d in i.documents}
    assert not any(i.question in golden_questions for i in items)
    assert not any(d in golden_paragraphs for i in items for d in i.documents)  # no golden passage, even as filler
    unanswerable = sum(not i.answerable for i in items) / len(items)
    assert 0.35 < unanswerable < 0.45
    squad = [i for i in items if i.tags != ("nq",)]
    assert all(i.documents[i.meta["gold_document"]] for i in squad if i.answerable)
    assert {len(i.documents) for i in squad} <= set(gpu_data.TRAIN_DOCUMENTS)


def test_targets() -> None:
    from ragtrim.gate.golden import GoldenItem

    assert gpu_data.target_text(GoldenItem(id="a", question="q", answers=("Gdańsk", "x"))) == '{"answer": "Gdańsk"}'
    assert json.loads(gpu_data.target_text(GoldenItem(id="b", question="q", answerable=False))) == {"answer": None}
