"""TAT-QA (annual-report tables with their paragraphs, finance QA) as multi-document QA over tables and text.

Each report's table becomes one chunk, one row a line (``| a | b | c |``), header rows first as in the source;
each paragraph another chunk. A question's gold chunk is the first chunk of its own report (the table, then the
paragraphs in order) that holds its answer; its distractors are the chunks of the split's reports (other reports and
its own) that score highest under a word BM25 and hold no answer.

Only span questions are used: their answer is a string of the table or a paragraph, so "the answer survived" is a
substring test. Arithmetic and count answers are computed, not written anywhere; multi-span answers need every span
and the matrix credits any one. Answers that normalize to fewer than ``MIN_ANSWER_CHARS`` characters ("5", "12")
are left out too: such a substring turns up in unrelated numbers of the gold chunk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ragtrim.errors import InputError
from ragtrim.savings import normalize_answer
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.domain import (
    ChunkPool,
    DomainQuestion,
    DomainSplit,
    cap_per_document,
    check_split,
    split_of,
)
from ragtrim_bench.datasets.nq import bm25_tokens

TATQA_FOLDER = "tatqa-test"
TATQA_FILE = "tatqa_dataset_test_gold.json"
MIN_ANSWER_CHARS = 3


@dataclass(frozen=True, slots=True)
class TatqaQuestion:
    id: str
    question: str
    answer: str
    answer_type: str


@dataclass(frozen=True, slots=True)
class TatqaReport:
    """One context of the file: its table's uid (the document key), the table's rows and paragraphs in order, and
    its questions."""

    id: str
    table: tuple[tuple[str, ...], ...]
    paragraphs: tuple[str, ...]
    questions: tuple[TatqaQuestion, ...]

    def chunks(self) -> list[str]:
        """The table chunk, then one chunk per paragraph."""
        return [render_table(self.table), *self.paragraphs]


def render_table(rows: tuple[tuple[str, ...], ...] | list[list[str]]) -> str:
    """One row a line, cells between pipes, whitespace inside a cell collapsed: ``| Revenue | $1.2 | $1.0 |``."""
    return "\n".join("| " + " | ".join(" ".join(str(c).split()) for c in row) + " |" for row in rows)


def tatqa_path(path: str | Path | None = None) -> Path:
    return Path(path) if path is not None else dataset_path(TATQA_FOLDER) / TATQA_FILE


def load_tatqa(path: str | Path | None = None) -> list[TatqaReport]:
    """Read the TAT-QA JSON (``path`` defaults to ``$RAGTRIM_DATA/tatqa-test/``)."""
    p = tatqa_path(path)
    if not p.is_file():
        raise InputError(f"TAT-QA file {str(p)!r} not found; set RAGTRIM_DATA or pass the path of {TATQA_FILE}")
    try:
        raw: Any = json.loads(p.read_text(encoding="utf-8"))
        reports: list[TatqaReport] = []
        for ctx in raw:
            paragraphs = sorted(ctx["paragraphs"], key=lambda x: int(x["order"]))
            questions = []
            for q in ctx["questions"]:
                answer = q["answer"]
                text = str(answer[0]) if isinstance(answer, list) and len(answer) == 1 else ""
                questions.append(TatqaQuestion(id=str(q["uid"]), question=str(q["question"]), answer=text,
                                               answer_type=str(q["answer_type"])))
            reports.append(TatqaReport(id=str(ctx["table"]["uid"]),
                                       table=tuple(tuple(str(c) for c in row) for row in ctx["table"]["table"]),
                                       paragraphs=tuple(str(x["text"]) for x in paragraphs),
                                       questions=tuple(questions)))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{p} is not a TAT-QA file ({exc!r})") from None
    return reports


def eligible(report: TatqaReport, question: TatqaQuestion) -> str | None:
    """The gold chunk of a usable question (a span answer of at least ``MIN_ANSWER_CHARS`` normalized characters,
    found in a chunk of its report), else None."""
    norm = normalize_answer(question.answer)
    if question.answer_type != "span" or len(norm) < MIN_ANSWER_CHARS:
        return None
    return next((c for c in report.chunks() if norm in normalize_answer(c)), None)


@lru_cache(maxsize=4)
def tatqa_questions(split: DomainSplit, seed: int = 0, path: str | None = None) -> tuple[DomainQuestion, ...]:
    """Every usable question of the split's reports (at most ``PER_DOCUMENT`` per report, a seeded draw), built."""
    split = check_split(split)
    reports = [r for r in load_tatqa(path) if split_of(f"tatqa/{r.id}") == split]
    pool = ChunkPool(((r.id, c) for r in reports for c in r.chunks()), tokens=bm25_tokens)
    items = [(r, q, gold) for r in reports for q in r.questions if (gold := eligible(r, q)) is not None]
    items = cap_per_document(items, lambda x: x[0].id, seed=seed, label="tatqa")
    out: list[DomainQuestion] = []
    for report, q, gold in items:
        distractors, scores, gold_score = pool.hardest(q.id, q.question, (q.answer,), gold)
        out.append(DomainQuestion(id=q.id, document=report.id, question=q.question, answers=(q.answer,), gold=gold,
                                  distractors=tuple(distractors), scores=(gold_score, *scores)))
    return tuple(out)
