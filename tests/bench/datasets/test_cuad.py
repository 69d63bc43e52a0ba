"""The CUAD column's builder on a small folder of the release's shape: chunking, file matching, spans, gold and
distractors."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ragtrim.errors import InputError
from ragtrim_bench.datasets.cuad import (
    MAX_WORDS,
    MIN_WORDS,
    _name_key,
    contract_chunks,
    cuad_question,
    cuad_questions,
    gold_chunk,
    load_cuad,
)
from ragtrim_bench.datasets.domain import split_of
from ragtrim_bench.relevance.matrix import answer_kept


def _para(k: int, words: int = 90) -> str:
    return " ".join(f"w{k}x{i}" for i in range(words)) + "."


class TestChunks:
    def test_paragraphs_packed_within_limits(self) -> None:
        text = "\n\n".join([_para(0, 30), _para(1, 60), _para(2, 100), _para(3, 150), _para(4, 10)])
        chunks = contract_chunks(text)
        words = [len(c.split()) for c in chunks]
        assert words == [90, 100, 160]  # 30+60 (a new chunk at 100's start), 100, then 150 + the short tail
        assert chunks[0] == _para(0, 30) + "\n" + _para(1, 60)  # paragraphs of a chunk: one a line

    def test_long_paragraph_cut_at_sentences_then_words(self) -> None:
        sentences = " ".join(f"Clause {k} " + " ".join(["word"] * 58) + "." for k in range(6))  # 6 x 60 words
        chunks = contract_chunks(sentences + "\n\n" + " ".join(["x"] * 450))
        assert all(len(c.split()) <= MAX_WORDS for c in chunks)
        assert chunks[0].startswith("Clause 0") and chunks[1].startswith("Clause 3")
        assert sum(len(c.split()) for c in chunks) == 360 + 450

    def test_spaces_collapsed_lines_kept(self) -> None:
        assert contract_chunks("ARTICLE  1\nTerm.\t It  lasts.") == ["ARTICLE 1\nTerm. It lasts."]

    def test_name_key(self) -> None:
        assert _name_key("A&B CO'S AGREEMENT.PDF'") == _name_key("A_B CO_S AGREEMENT .txt")
        assert _name_key("Cafe\u0301.pdf") == _name_key("Café.txt")


CATEGORIES = [("Document Name", "The name of the contract"),
              ("Governing Law", "Which state/country's law governs the interpretation of the contract?"),
              ("Audit Rights", "Does a party have the right to audit the books?")]


def _folder(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "cuad"
    (folder / "full_contract_txt").mkdir(parents=True)
    with (folder / "category_descriptions.csv").open("w", encoding="utf-8-sig", newline="") as f:
        w = csv.writer(f, lineterminator="\r\n")
        w.writerow(["Category (incl. context and answer)", "Description", "Answer Format", "Group"])
        w.writerows([f"Category: {c}", f"Description: {d}", "Answer Format: x", "Group: 1"] for c, d in CATEGORIES)
    header = ["Filename"] + [x for c, _ in CATEGORIES for x in (c, f"{c}-Answer")]
    with (folder / "master_clauses.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for k, name in enumerate(names):
            law = f"This Agreement shall be governed by the laws of the State of Delaware number {k}."
            paragraphs = [_para(100 * k + i) for i in range(24)]
            paragraphs[5] = _para(100 * k + 5, 70) + " " + law
            paragraphs[9] = "The  auditor may inspect\nthe books once a year."  # spans are found whitespace aside
            (folder / "full_contract_txt" / f"{name}.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
            w.writerow([f"{name}.pdf", f"['{name}']", name, f"['{law}']", "Delaware",
                        "['The auditor may inspect the books once a year.', 'absent from the text']", "Yes"])
    return folder


def _names() -> list[str]:
    dev = [f"Contract{i}" for i in range(40) if split_of(f"cuad/Contract{i}.txt") == "dev"][:2]
    held = [f"Contract{i}" for i in range(40) if split_of(f"cuad/Contract{i}.txt") == "heldout"][:2]
    return dev + held


class TestCuad:
    def test_load(self, tmp_path: Path) -> None:
        contracts, descriptions = load_cuad(str(_folder(tmp_path, _names())))
        assert descriptions["Governing Law"].startswith("Which state")
        c = contracts[0]
        assert set(c.spans) == {"Governing Law", "Audit Rights"}  # Document Name is left out
        assert [s for s, _, _ in c.spans["Audit Rights"]] == ["The auditor may inspect the books once a year."]
        gold = gold_chunk(c, "Governing Law")
        assert gold is not None and "State of Delaware number 0" in gold[0]

    def test_questions(self, tmp_path: Path) -> None:
        path = str(_folder(tmp_path, _names()))
        dev = cuad_questions("dev", 0, path)
        assert len(dev) == 4  # 2 contracts x 2 categories
        q = next(q for q in dev if q.id.endswith("/Governing Law"))
        assert q.question == cuad_question("Governing Law", CATEGORIES[1][1])
        assert q.question.startswith('Highlight the parts (if any) of this contract related to "Governing Law"')
        assert answer_kept(q.answers, q.gold) and not any(answer_kept(q.answers, d) for d in q.distractors)
        own = {t for t in contract_chunks((Path(path) / "full_contract_txt" / f"{q.document}").read_text())}
        assert all(d in own for d in q.distractors)  # 23 chunks of its own: none from the other contract
        # no distractor holds a clause of the category, from any contract
        assert not any("governed by the laws" in d for d in q.distractors)
        assert all(MIN_WORDS <= len(t.split()) <= MAX_WORDS for t in own)
        held = cuad_questions("heldout", 0, path)
        assert not {x.document for x in dev} & {x.document for x in held}

    def test_missing(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="master_clauses"):
            load_cuad(str(tmp_path))
        folder = _folder(tmp_path, _names())
        (folder / "full_contract_txt" / f"{_names()[0]}.txt").unlink()
        with pytest.raises(InputError, match="no contract text"):
            load_cuad(str(folder) + "/")
