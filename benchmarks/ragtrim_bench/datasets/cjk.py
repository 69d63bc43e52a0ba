"""CMRC 2018 (Chinese Wikipedia) and JSQuAD (Japanese Wikipedia) as multi-document QA: each question's gold
paragraph among the paragraphs of the split's other articles that score highest for it under a character-bigram
BM25 (``ragtrim_bench.relevance.baseline.script_tokens``, as the KorQuAD column) and hold no answer.

A JSQuAD context ``"<title> [SEP] <paragraph>"`` is shown as ``"<title>\\n<paragraph>"``; a CMRC paragraph as it is
(CMRC articles are one paragraph each). The source document of the per-document cap is the paragraph; the split is
by article, so no article lends a question or a distractor to both splits.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from ragtrim.errors import ConfigError, InputError
from ragtrim_bench.common.answers import answer_substring_in_text
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.domain import (
    ChunkPool,
    DomainQuestion,
    DomainSplit,
    cap_per_document,
    check_split,
    split_of,
)
from ragtrim_bench.datasets.squad import SquadArticle, load_squad
from ragtrim_bench.relevance.baseline import script_tokens

CjkSet = Literal["cmrc", "jsquad"]
FILES: dict[str, tuple[str, str]] = {
    "cmrc": ("cmrc2018-trial", "cmrc2018_trial.json"),
    "jsquad": ("jsquad-v1.3-test", "test-v1.3.json"),
}
JSQUAD_SEP = " [SEP] "


def cjk_path(name: CjkSet, path: str | Path | None = None) -> Path:
    if name not in FILES:
        raise ConfigError(f"name must be one of {sorted(FILES)}, got {name!r}")
    folder, file = FILES[name]
    return Path(path) if path is not None else dataset_path(folder) / file


def shown(name: CjkSet, context: str) -> str:
    """What the reader gets of a context: JSQuAD's ``title [SEP] paragraph`` as two lines."""
    if name == "jsquad" and JSQUAD_SEP in context:
        title, _, paragraph = context.partition(JSQUAD_SEP)
        return f"{title.strip()}\n{paragraph.strip()}"
    return context


def load_cjk(name: CjkSet, path: str | Path | None = None) -> list[SquadArticle]:
    """The articles of CMRC 2018 trial or JSQuAD v1.3 test (SQuAD format; ``path`` defaults to ``$RAGTRIM_DATA``)."""
    p = cjk_path(name, path)
    if not p.is_file():
        raise InputError(f"{name} file {str(p)!r} not found; set RAGTRIM_DATA or pass the path of {FILES[name][1]}")
    return load_squad(p)


@lru_cache(maxsize=8)
def cjk_questions(name: CjkSet, split: DomainSplit, seed: int = 0,
                  path: str | None = None) -> tuple[DomainQuestion, ...]:
    """Every question of the split's articles (at most ``PER_DOCUMENT`` per paragraph, a seeded draw), built."""
    split = check_split(split)
    articles = [(ai, a) for ai, a in enumerate(load_cjk(name, path)) if split_of(f"{name}/{a.title}/{ai}") == split]
    pool = ChunkPool(((f"{ai}", shown(name, t)) for ai, a in articles for t in a.paragraphs), tokens=script_tokens)
    items = [(ai, a, q) for ai, a in articles for q in a.questions
             if answer_substring_in_text(q.answers, shown(name, a.paragraphs[q.paragraph_index]))]
    items = cap_per_document(items, lambda x: f"{x[0]}/{x[2].paragraph_index}", seed=seed, label=name)
    out: list[DomainQuestion] = []
    for ai, article, q in items:
        gold = shown(name, article.paragraphs[q.paragraph_index])

        def same_article(j: int, ai: int = ai) -> bool:
            return pool.documents[j] == f"{ai}"

        distractors, scores, gold_score = pool.hardest(q.id, q.question, q.answers, gold, exclude=same_article)
        out.append(DomainQuestion(id=q.id, document=f"{name}/{ai}/{q.paragraph_index}", question=q.question,
                                  answers=q.answers, gold=gold, distractors=tuple(distractors),
                                  scores=(gold_score, *scores)))
    return tuple(out)
