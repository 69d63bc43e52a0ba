import json
from pathlib import Path

import pytest

from ragtrim.errors import InputError
from ragtrim_bench.datasets import data_dir
from ragtrim_bench.datasets.squad import load_squad, squad_instances

DOC = {"version": "v2.0", "data": [{"title": "A", "paragraphs": [
    {"context": "P zero.", "qas": [{"question": "q0", "id": "i0", "is_impossible": False,
                                    "answers": [{"text": "zero", "answer_start": 2}] * 2}]},
    {"context": "P one.", "qas": [{"question": "q1", "id": "i1", "is_impossible": True, "answers": [],
                                   "plausible_answers": [{"text": "one", "answer_start": 2}]}]},
]}]}


def test_load_and_instances(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps(DOC))
    arts = load_squad(path)
    assert arts[0].paragraphs == ("P zero.", "P one.")
    insts = squad_instances(arts)
    assert insts[0].answers == ("zero",) and insts[0].gold_ids == ("a0p0",)
    assert insts[1].is_impossible and insts[1].answers == () and insts[1].plausible_answers == ("one",)
    assert insts[1].gold_ids == ("a0p1",) and len(insts[1].passages) == 2
    assert len(squad_instances(arts, limit_per_article=1)) == 1


def test_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text("{}")
    with pytest.raises(InputError, match="SQuAD"):
        load_squad(path)


@pytest.mark.data
def test_shared_data() -> None:
    if not (data_dir() / "squad-v2-dev-cs224n").is_dir():
        pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")
    arts = load_squad()
    assert len(arts) == 12 and sum(len(a.questions) for a in arts) == 4715
