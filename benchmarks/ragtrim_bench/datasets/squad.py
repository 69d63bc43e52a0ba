"""SQuAD 2.0 (the CS224N half of dev) as QA instances whose candidates are all paragraphs of the question's article.

Every other paragraph of the same article is a same-topic distractor. Unanswerable questions are kept, with the
annotators' plausible answers, so a benchmark can report them apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.errors import InputError
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.nq import Passage, QAInstance

SQUAD_FOLDER = "squad-v2-dev-cs224n"
SQUAD_FILE = "dev-v2.0.shared.json"


@dataclass(frozen=True, slots=True)
class SquadQuestion:
    id: str
    question: str
    answers: tuple[str, ...]
    is_impossible: bool
    plausible_answers: tuple[str, ...]
    paragraph_index: int


@dataclass(frozen=True, slots=True)
class SquadArticle:
    title: str
    paragraphs: tuple[str, ...]
    questions: tuple[SquadQuestion, ...]


def squad_path(path: str | Path | None = None) -> Path:
    return Path(path) if path is not None else dataset_path(SQUAD_FOLDER) / SQUAD_FILE


def _texts(items: Any) -> tuple[str, ...]:
    # Several annotators often mark the same span; keep each text once, in order.
    return tuple(dict.fromkeys(str(a["text"]) for a in items or ()))


def load_squad(path: str | Path | None = None) -> list[SquadArticle]:
    """Read a SQuAD v2 JSON file; ``path`` defaults to ``$RAGTRIM_DATA/squad-v2-dev-cs224n/``."""
    p = squad_path(path)
    if not p.is_file():
        raise InputError(f"SQuAD file {str(p)!r} not found; set RAGTRIM_DATA or pass the path of {SQUAD_FILE}")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
        articles: list[SquadArticle] = []
        for art in raw["data"]:
            paragraphs: list[str] = []
            questions: list[SquadQuestion] = []
            for pi, para in enumerate(art["paragraphs"]):
                paragraphs.append(str(para["context"]))
                for qa in para["qas"]:
                    impossible = bool(qa.get("is_impossible", False))
                    questions.append(
                        SquadQuestion(
                            id=str(qa["id"]),
                            question=str(qa["question"]),
                            answers=() if impossible else _texts(qa.get("answers")),
                            is_impossible=impossible,
                            plausible_answers=_texts(qa.get("plausible_answers")),
                            paragraph_index=pi,
                        )
                    )
            articles.append(SquadArticle(title=str(art["title"]), paragraphs=tuple(paragraphs),
                                         questions=tuple(questions)))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InputError(f"{p} is not a SQuAD v2 file ({exc!r})") from None
    return articles


def squad_instances(articles: list[SquadArticle], *, limit_per_article: int | None = None) -> list[QAInstance]:
    """One instance per question: all paragraphs of its article in article order, its own paragraph marked gold.

    ``limit_per_article`` takes the first N questions of each article (in file order), a fixed, spread-out sample.
    """
    out: list[QAInstance] = []
    for ai, art in enumerate(articles):
        passages = [Passage(id=f"a{ai}p{pi}", title="", text=t) for pi, t in enumerate(art.paragraphs)]
        qs = art.questions if limit_per_article is None else art.questions[:limit_per_article]
        for q in qs:
            docs = tuple(
                Passage(id=p.id, title=p.title, text=p.text, is_gold=(pi == q.paragraph_index))
                for pi, p in enumerate(passages)
            )
            out.append(QAInstance(id=q.id, question=q.question, answers=q.answers, passages=docs,
                                  is_impossible=q.is_impossible, plausible_answers=q.plausible_answers))
    return out
