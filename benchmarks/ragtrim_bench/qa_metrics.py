"""QA answer matching as in "Lost in the Middle" (Liu et al.): SQuAD-style normalization and answer containment.

Used to ask whether a trimmed context still holds a gold answer, and to score reader outputs. The normalization and
the whole-word test are the library's (``ragtrim.savings``, behind ``ragtrim bench``); the paper's looser tests are
here.
"""

from __future__ import annotations

from collections.abc import Iterable

from ragtrim.savings import answer_in_text, normalize_answer, normalized_answers


def answer_substring_in_text(answers: Iterable[str], text: str) -> bool:
    """The paper's looser test: some normalized answer is a substring of the normalized text (any position)."""
    haystack = normalize_answer(text)
    return any(a in haystack for a in normalized_answers(answers))


def best_subspan_em(prediction: str, answers: Iterable[str]) -> float:
    """The paper's reader metric: 1.0 when a normalized gold answer is a substring of the normalized prediction."""
    return 1.0 if answer_substring_in_text(answers, prediction) else 0.0


__all__ = ["answer_in_text", "answer_substring_in_text", "best_subspan_em", "normalize_answer", "normalized_answers"]
