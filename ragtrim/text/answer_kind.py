"""The kind of value a factoid question asks for, and whether a sentence holds one: the compressor's answer hint.

"When ..." asks for a date (a year, a month, a clock time, a weekday), "how many ..." for a number. Cheap regular
expressions, no model: a prior that breaks near-ties between sentences that match the question, never a match of
its own (``ragtrim.stages.compress`` scales it by the sentence's query match).
"""

from __future__ import annotations

import re
from typing import Literal

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b")
_MONTH = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december|century)\b", re.IGNORECASE
)
_TIME = re.compile(
    r"\b(?:[01]?\d|2[0-3]):[0-5]\d\b"  # 09:40, 21:05
    r"|\b(?:[01]?\d|2[0-3])[.:][0-5]\d\s?[ap]\.?m\b"  # 9.40 am (a bare 3.50 is a price, not a time)
    r"|\b(?:1[0-2]|0?[1-9])\s?[ap]\.?m\b"  # 9 a.m., 9pm
    r"|\b(?:noon|midnight|o'clock|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.IGNORECASE,
)
"""A clock time or a weekday: "When does the ferry leave?" asks for one as often as "when was it built" asks for a
year."""
_DIGIT = re.compile(r"\d")
_WHEN = re.compile(r"^\s*(?:(?:in|during|for|by) )?(when\b|what (year|date|day|time|century)|which year|how long ago)",
                   re.IGNORECASE)
"""A question for a date, at its start, maybe after a preposition ("In which year was ... larger?")."""
_HOW_MANY = re.compile(r"\b(how (many|much|long|old|far|tall|big|high|deep|fast)|what (number|percentage|age))\b",
                       re.IGNORECASE)


_WHAT_IN_YEAR = re.compile(r"^\s*what (?:was|were|is|are) the\b.*\b(?:19|20)\d{2}\b", re.IGNORECASE)
"""A question for a figure of a year: "What was the total revenue in 2017?" (finance reports ask this way)."""


AnswerKind = Literal["date", "number"]
"""What a factoid question asks for: a date or a number."""


def answer_kind(query: str) -> AnswerKind | None:
    """The kind of value a factoid question asks for: ``"date"`` ("when ...", "in which year ..."), ``"number"``
    ("how many ...", "what was the ... in 2017?"), or None."""
    if _WHEN.search(query):
        return "date"
    if _HOW_MANY.search(query) or _WHAT_IN_YEAR.search(query):
        return "number"
    return None


def holds_kind(kind: AnswerKind | None, sentence: str) -> float:
    """1.0 when ``sentence`` holds a value of ``kind`` (a year, a month, a clock time or a weekday for dates, a digit
    for numbers), else 0.0."""
    if kind == "date":
        return 1.0 if (_YEAR.search(sentence) or _MONTH.search(sentence) or _TIME.search(sentence)) else 0.0
    if kind == "number":
        return 1.0 if _DIGIT.search(sentence) else 0.0
    return 0.0


def answer_hint(query: str, sentence: str) -> float:
    """1.0 when the sentence holds the kind of value the question asks for (a date for "when", a number for
    "how many"), else 0.0. A cheap answer-type prior for factoid questions; 0.0 for other questions."""
    return holds_kind(answer_kind(query), sentence)
