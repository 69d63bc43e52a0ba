"""KorQuAD 1.0 (Korean Wikipedia reading comprehension, SQuAD 1.1 format) as multi-document QA: each question's gold
paragraph among the paragraphs of other articles that score highest for it under a character-bigram BM25.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragtrim.errors import ConfigError, InputError
from ragtrim.savings import normalize_answer, normalized_answers
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.nq import Passage, QAInstance, _BM25Index
from ragtrim_bench.datasets.squad import SquadArticle, load_squad
from ragtrim_bench.relevance.baseline import script_tokens

KORQUAD_FOLDER = "korquad-v1-dev"
KORQUAD_FILE = "KorQuAD_v1.0_dev.shared.json"


def korquad_path(path: str | Path | None = None) -> Path:
    return Path(path) if path is not None else dataset_path(KORQUAD_FOLDER) / KORQUAD_FILE


def load_korquad(path: str | Path | None = None) -> list[SquadArticle]:
    """Read the KorQuAD 1.0 JSON (the SQuAD reader: every question is answerable); ``path`` defaults to
    ``$RAGTRIM_DATA/korquad-v1-dev/``."""
    p = korquad_path(path)
    if not p.is_file():
        raise InputError(f"KorQuAD file {str(p)!r} not found; set RAGTRIM_DATA or pass the path of {KORQUAD_FILE}")
    return load_squad(p)


def hard_instances(
    articles: Sequence[SquadArticle], selected: Sequence[tuple[int, int]], *, n_docs: int = 20
) -> list[tuple[QAInstance, tuple[float, ...]]]:
    """One instance per ``(article index, question index)`` of ``selected``: the gold paragraph first, then the
    ``n_docs - 1`` paragraphs of the OTHER ``articles`` that score highest for the question under a BM25 over
    ``script_tokens`` (character bigrams for Hangul) and hold no normalized answer (substring test, the strict side).

    The pool is ``articles``: pass one split's articles to keep the splits apart. Returned with each passage's score
    under that pool-wide BM25 (the retriever's score, for ``scorer="given"``).
    """
    if isinstance(n_docs, bool) or not isinstance(n_docs, int) or n_docs < 1:
        raise ConfigError(f"n_docs must be an int >= 1, got {n_docs!r}")
    texts = [t for art in articles for t in art.paragraphs]
    owner = [ai for ai, art in enumerate(articles) for _ in art.paragraphs]
    first = np.cumsum([0] + [len(art.paragraphs) for art in articles])
    normalized = [normalize_answer(t) for t in texts]
    index = _BM25Index(texts, tokens=script_tokens)
    out: list[tuple[QAInstance, tuple[float, ...]]] = []
    for ai, qi in selected:
        q = articles[ai].questions[qi]
        answers = normalized_answers(q.answers)
        scores = index.scores(q.question)
        chosen: list[int] = []
        for j in np.argsort(-scores, kind="stable"):
            j = int(j)
            if owner[j] != ai and not any(a in normalized[j] for a in answers):
                chosen.append(j)
                if len(chosen) == n_docs - 1:
                    break
        if len(chosen) < n_docs - 1:
            raise InputError(f"question {q.id}: only {len(chosen)} usable distractors for n_docs={n_docs}")
        gold = int(first[ai]) + q.paragraph_index
        slots = [gold, *chosen]
        passages = tuple(Passage(id=f"k{j}", title="", text=texts[j], is_gold=j == gold) for j in slots)
        out.append((QAInstance(id=q.id, question=q.question, answers=q.answers, passages=passages),
                    tuple(float(scores[j]) for j in slots)))
    return out
