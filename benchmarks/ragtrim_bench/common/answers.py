"""Answer matching for every benchmark: one normalisation, the library's ``ragtrim.savings.normalize_answer``.

It is the official SQuAD evaluation script's (v1.1/v2.0 ``normalize_answer``): lower-case, delete ASCII punctuation,
drop the articles a/an/the, collapse whitespace; so "answer recall" means the same thing in ``ragtrim bench`` and in
every benchmark here (tests/bench/test_layout.py keeps any other normalisation out of the package). Beside the
library's whole-word test, the looser tests of "Lost in the Middle" (Liu et al.).
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
