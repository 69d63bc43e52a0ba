"""QA answer matching as in "Lost in the Middle" (Liu et al.): SQuAD-style normalization and answer containment.

Used to ask whether a trimmed context still holds a gold answer, and later to score reader outputs.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, strip ASCII punctuation and the articles a/an/the, collapse whitespace (the paper's order)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def normalized_answers(answers: Iterable[str]) -> list[str]:
    """The answers, normalized, without those that normalize to nothing."""
    # An answer that normalizes to "" ("The") would match everything; it carries no signal, so skip it.
    return [n for n in (normalize_answer(a) for a in answers) if n]


def answer_in_text(answers: Iterable[str], text: str) -> bool:
    """True when some normalized answer occurs in the normalized ``text`` as a run of whole words.

    Whole-word matching (unlike the paper's plain substring test) keeps "1" from matching "1990", so a trimmed
    context is credited only for a real answer occurrence.
    """
    haystack = f" {normalize_answer(text)} "
    return any(f" {a} " in haystack for a in normalized_answers(answers))


def answer_substring_in_text(answers: Iterable[str], text: str) -> bool:
    """The paper's looser test: some normalized answer is a substring of the normalized text (any position)."""
    haystack = normalize_answer(text)
    return any(a in haystack for a in normalized_answers(answers))


def best_subspan_em(prediction: str, answers: Iterable[str]) -> float:
    """The paper's reader metric: 1.0 when a normalized gold answer is a substring of the normalized prediction."""
    return 1.0 if answer_substring_in_text(answers, prediction) else 0.0
