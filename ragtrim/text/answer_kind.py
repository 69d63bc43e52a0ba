"""The kind of answer a question asks for, and whether a sentence holds one: the compressor's answer hint.

"When ..." asks for a date (a year, a month, a clock time, a weekday), "how many ..." for a number, "why ..." for a
reason (a sentence that gives one says "due to", "driven by", "because"). Cheap regular
expressions, no model: a prior that breaks near-ties between sentences that match the question, never a match of
its own (``ragtrim.stages.compress`` scales it by the sentence's query match).

``lookup_matches`` reads a question that names a year, or asks which year, as a table lookup ("What was the revenue
in 2019?": the cell in the row "Revenue" under the column "2019"; "In which year was revenue larger?": the row
"Revenue" of a table whose columns are years), for the compressor's lookup bonus.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from ragtrim.errors import ConfigError
from ragtrim.text.stem import light_stem
from ragtrim.text.stopwords import STOPWORDS
from ragtrim.text.structure import cells, is_table_row

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b")
_MONTH_WORDS = "january|february|march|april|may|june|july|august|september|october|november|december|century"
_TIME_WORDS = "noon|midnight|o'clock|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTH = re.compile(rf"\b({_MONTH_WORDS})\b", re.IGNORECASE)
_TIME = re.compile(
    r"\b(?:[01]?\d|2[0-3]):[0-5]\d\b"  # 09:40, 21:05
    r"|\b(?:[01]?\d|2[0-3])[.:][0-5]\d\s?[ap]\.?m\b"  # 9.40 am (a bare 3.50 is a price, not a time)
    r"|\b(?:1[0-2]|0?[1-9])\s?[ap]\.?m\b"  # 9 a.m., 9pm
    rf"|\b(?:{_TIME_WORDS})\b",
    re.IGNORECASE,
)
"""A clock time or a weekday: "When does the ferry leave?" asks for one as often as "when was it built" asks for a
year."""
_DIGIT = re.compile(r"\d")
_DATE_WORD = re.compile(rf"\b(?:{_MONTH_WORDS}|{_TIME_WORDS})\b", re.IGNORECASE)
"""The words of ``_MONTH`` and ``_TIME`` in one pattern: all of the three date patterns that can match a text
without a digit (a year and every clock time need one), found in one scan instead of three."""
_WHEN = re.compile(r"^\s*(?:(?:in|during|for|by) )?(when\b|what (year|date|day|time|century)|which year|how long ago)",
                   re.IGNORECASE)
"""A question for a date, at its start, maybe after a preposition ("In which year was ... larger?")."""
_HOW_MANY = re.compile(r"\b(how (many|much|long|old|far|tall|big|high|deep|fast)|what (number|percentage|age))\b",
                       re.IGNORECASE)


_WHAT_IN_YEAR = re.compile(r"^\s*what (?:was|were|is|are) the\b.*\b(?:19|20)\d{2}\b", re.IGNORECASE)
"""A question for a figure of a year: "What was the total revenue in 2017?" (finance reports ask this way)."""


_WHY = re.compile(r"^\s*(?:why\b|what (?:caused|causes|drove|drives|led to|leads to|contributed to|resulted in|"
                  r"is the reason|was the reason|were the reasons|are the reasons|explains)\b)", re.IGNORECASE)
"""A question for a reason: "Why did revenue rise?", "What caused the increase in ...?"."""
_REASON = re.compile(r"\b(?:due to|because|driven by|attributable to|attributed to|as a result of|resulted from|"
                     r"owing to|caused by|primarily from|primarily by|mainly from|mainly by|reflects|reflected|"
                     r"reflecting|offset by|thanks to)\b", re.IGNORECASE)
"""The words a reason is given with ("The increase was primarily due to ...")."""


AnswerKind = Literal["date", "number", "reason"]
"""What a question asks for: a date, a number or a reason."""


ANSWER_KINDS: tuple[AnswerKind, ...] = ("reason", "date", "number")
"""Every kind, in the order ``answer_kind`` tries them."""


def answer_kind(query: str, kinds: Collection[AnswerKind] = ANSWER_KINDS) -> AnswerKind | None:
    """The kind of answer a question asks for: ``"reason"`` ("why ...", "what caused ..."), ``"date"`` ("when ...",
    "in which year ..."), ``"number"`` ("how many ...", "what was the ... in 2017?"), or None. Only ``kinds`` are
    tried (in ``ANSWER_KINDS`` order): a question for a kind left out gets the kind its other words give."""
    if "reason" in kinds and _WHY.search(query):
        return "reason"
    if "date" in kinds and _WHEN.search(query):
        return "date"
    if "number" in kinds and (_HOW_MANY.search(query) or _WHAT_IN_YEAR.search(query)):
        return "number"
    return None


def holds_kind(kind: AnswerKind | None, sentence: str) -> float:
    """1.0 when ``sentence`` holds a value of ``kind`` (a year, a month, a clock time or a weekday for dates, a digit
    for numbers, the words a reason is given with, "due to", "driven by", for reasons), else 0.0."""
    if kind == "reason":
        return 1.0 if _REASON.search(sentence) else 0.0
    if kind == "date":
        if not _DIGIT.search(sentence):  # _YEAR, _MONTH or _TIME, in one scan (_DATE_WORD)
            return 1.0 if _DATE_WORD.search(sentence) else 0.0
        return 1.0 if (_YEAR.search(sentence) or _MONTH.search(sentence) or _TIME.search(sentence)) else 0.0
    if kind == "number":
        return 1.0 if _DIGIT.search(sentence) else 0.0
    return 0.0


def answer_hint(query: str, sentence: str) -> float:
    """1.0 when the sentence holds the kind of answer the question asks for (a date for "when", a number for
    "how many", a reason's words for "why"), else 0.0. A cheap answer-type prior; 0.0 for other questions."""
    return holds_kind(answer_kind(query), sentence)


_LOOKUP_YEAR = re.compile(r"\b(?:19|20)\d{2}\b")
_FISCAL_YEAR = re.compile(r"\bFY ?'?(\d{2}|(?:19|20)\d{2})\b", re.IGNORECASE)
"""A fiscal year as reports write it: "FY19", "FY 2019", "FY'19" (a year of two digits is 20xx below 50, else
19xx)."""
LOOKUP_MARGIN = 0.1
"""How far below the request's best lookup match a table's best row may be and keep its bonus."""
_WHICH_YEAR = re.compile(r"\b(?:which|what) year\b", re.IGNORECASE)
_LETTERS = re.compile(r"[^\W\d_]+")


def _years(text: str, *, fiscal: bool = True) -> frozenset[str]:
    """The years ``text`` names, four digits each: "2019", and with ``fiscal`` "FY19" or "FY 2019" as "2019"."""
    years = frozenset(_LOOKUP_YEAR.findall(text))
    if not fiscal:
        return years
    return years.union(y if len(y) == 4 else ("20" if int(y) < 50 else "19") + y for y in _FISCAL_YEAR.findall(text))


def _content_words(text: str) -> set[str]:
    return {light_stem(w) for w in _LETTERS.findall(text.lower()) if w not in STOPWORDS}


def _row_label(row: str) -> str:
    """A table row's label: its first cell with a letter in it ("| Net income | 52,982 |" -> "Net income")."""
    return next((c for c in cells(row) if any(ch.isalpha() for ch in c)), "")


@dataclass(frozen=True)
class LookupQuestion:
    """A question read as a table lookup (``lookup_question``): the years it names (none: it asks which year, and
    any year will do) and its content words; whether a header's fiscal years count, and the margin below the best
    match within which a table's best row keeps its value (``lookup_matches``)."""

    years: frozenset[str]
    words: frozenset[str]
    fiscal_years: bool = True
    margin: float = LOOKUP_MARGIN

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin <= 1.0:
            raise ConfigError(f"margin is an F1 difference, in [0, 1]; got {self.margin!r}")

    def matches(self, units: Sequence[str], with_dependencies: Sequence[str], tables: Sequence[int]) -> list[float]:
        """How well each unit answers the lookup, in [0, 1] (see ``lookup_matches``)."""
        out = [0.0] * len(units)
        best: dict[int, int] = {}
        for i, unit in enumerate(units):
            if not is_table_row(unit):
                continue
            found = _years(with_dependencies[i], fiscal=self.fiscal_years)
            if not (self.years & found if self.years else found):
                continue
            label = _content_words(_row_label(unit))
            if not label:
                continue
            out[i] = 2 * len(label & self.words) / (len(label) + len(self.words))
            if out[i] > 0 and (tables[i] not in best or out[i] > out[best[tables[i]]]):
                best[tables[i]] = i
        top = max(out, default=0.0)
        kept = {i for i in best.values() if out[i] >= top - self.margin}
        return [v if i in kept else 0.0 for i, v in enumerate(out)]


def lookup_question(query: str, *, fiscal_years: bool = True, margin: float = LOOKUP_MARGIN) -> LookupQuestion | None:
    """``query`` as a table lookup, parsed once: None unless it names a year or asks "which year" ("what year"),
    and has a content word besides. ``fiscal_years=False`` reads "FY19" as no year; ``margin=1.0`` keeps every
    table's best row, however far below the best match of all."""
    years = _years(query, fiscal=fiscal_years)
    if not years and not _WHICH_YEAR.search(query):
        return None
    words = frozenset(_content_words(_LOOKUP_YEAR.sub(" ", _FISCAL_YEAR.sub(" ", query) if fiscal_years else query)))
    return LookupQuestion(years, words, fiscal_years, margin) if words else None


def lookup_matches(query: str, units: Sequence[str], with_dependencies: Sequence[str],
                   tables: Sequence[int]) -> list[float]:
    """How well each unit answers ``query`` as a table lookup, in [0, 1]; all 0.0 unless the question names a year
    or asks "which year" ("what year").

    A table row counts when its text with the units it depends on (its header rows) holds one of the question's
    years (any year, for a question that asks which year); its value is the F1 overlap of its label's words and the
    question's (stopwords, numbers and years left out, words lightly stemmed). A fiscal year counts as its year
    ("FY19" as 2019). Only the best such row of each table (``tables[i]``: which table, or chunk, unit ``i`` belongs
    to; the first on a tie) keeps its value, so a question lifts one row per table, not every row that shares a word
    with it; and only where it is within ``LOOKUP_MARGIN`` of the best row of all, so that a table whose best row
    shares one word of "research and development expense" is not lifted beside the one whose row is named by all
    three.
    """
    lookup = lookup_question(query)
    return lookup.matches(units, with_dependencies, tables) if lookup is not None else [0.0] * len(units)
