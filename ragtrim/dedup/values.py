"""Numbers, dates, versions and amounts that two near-duplicate texts disagree on (issue 23: a Free plan at 60
requests per minute and a Pro plan at 600 are not one chunk said twice).

A *value* is a number with its currency sign, decimal or version parts (``$1,200.50``, ``v2.5``, ``2024-03-01``,
``15%``) or an English month name; values with only spaces or commas between them form one *slot* (``march 3, 2019``). Two texts *disagree* when the
same context holds different values in each: a slot of one and a slot of the other have the same two tokens before
them (or the same two after), and each text has a value there that the other lacks. A value present in only one of
the texts (a window that starts a few words later, a line one copy lacks) is no disagreement; neither is a changed
name next to an unchanged number. Pure functions; the ``DuplicateFilter`` stage asks only about pairs at or above its
threshold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ragtrim._util.scripts import SPACELESS_CHAR, SPACELESS_CLASS

_MONTH_NAMES = ("january|february|march|april|may|june|july|august|september|october|november|december"
                "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec")
_S = SPACELESS_CLASS
_NUMBER = r"(?:[$€£¥₩]\s?)?v?\d+(?:[.,:/-]\d+)*%?"
_MONTH = rf"(?:{_MONTH_NAMES})(?![^\W_{_S}])"
# One match per value: first everything that cannot start one, skipped in bulk (a word that starts with a letter,
# digits and all, so "user4821" and "h2o" are words; a Han/Kana character; anything else that is no currency sign
# before a number), then the value (a number with its currency sign, decimal, date or version parts, or a month
# name standing alone), or the end of the line. Every position where the skip stops starts a value, so no match
# fails and is retried from the next character: one linear pass, values found at C speed on a 10 MB line.
_VALUE = re.compile(
    rf"(?:(?!{_MONTH}|v\d)[^\W\d_{_S}][^\W_{_S}]*+|[{_S}_]|[$€£¥₩](?!\s?v?\d)|[^\w$€£¥₩])*+"
    rf"(?:(?P<value>{_NUMBER}|{_MONTH})|\Z)"
)
# The tokens a context is made of: a value, a Han/Kana character (those lines have no words), or a run of other
# letters and digits (Latin, Hangul, Cyrillic...).
_TOKEN = re.compile(rf"(?<![^\W_{_S}])(?:[$€£¥₩]\s?)?v?\d+(?:[.,:/-]\d+)*%?|[{_S}]|[^\W_{_S}]+")
_JOIN = re.compile(r"[\s,]*")
"""What may stand between two values of one slot ("march 3, 2019", "3 march 2019")."""
_CONTEXT = 2
"""Tokens on each side that make a slot's context."""
_WINDOW = 48
"""Characters read on each side of a slot for its context at first (doubled while too few tokens are in it), so the
cost follows the number of values, not the length of the text."""

Context = tuple[str, ...]
ValueSlots = Mapping[Context, frozenset[str]]


def _canonical(token: str) -> str:
    # "v2.5" and "2.5" name the same version; "$ 5" and "$5" the same amount.
    token = token.replace(" ", "")
    return token[1:] if token[:1] == "v" and token[1:2].isdigit() else token


def _before(line: str, start: int) -> list[str]:
    """The ``_CONTEXT`` tokens before ``start``, padded with ``"|"`` at the line's start."""
    width = _WINDOW
    while True:
        lo = max(0, start - width)
        tokens = [_canonical(t) for t in _TOKEN.findall(line, lo, start)]
        if lo > 0:
            tokens = tokens[1:]  # the window may cut the first token
        if len(tokens) >= _CONTEXT or lo == 0:
            return ["|"] * (_CONTEXT - len(tokens)) + tokens[-_CONTEXT:]
        width *= 2


def _after(line: str, end: int) -> list[str]:
    """The ``_CONTEXT`` tokens after ``end``, padded with ``"|"`` at the line's end."""
    width = _WINDOW
    while True:
        hi = min(len(line), end + width)
        tokens = [_canonical(t) for t in _TOKEN.findall(line, end, hi)]
        if hi < len(line):
            tokens = tokens[:-1]
        if len(tokens) >= _CONTEXT or hi == len(line):
            return tokens[:_CONTEXT] + ["|"] * (_CONTEXT - len(tokens))
        width *= 2


def value_slots(lines: Iterable[str]) -> ValueSlots:
    """Every slot of ``lines`` (NFKC, lower-cased text, one line each; contexts never cross a line) by context: a
    left context is ``("<",) + the two tokens before``, a right one ``(">",) + the two tokens after`` (``"|"`` pads at
    a line's ends); the value is the slot's values joined by spaces."""
    slots: dict[Context, set[str]] = {}
    for line in lines:
        runs: list[tuple[int, int, list[str]]] = []  # values with only spaces or commas between them form one slot
        for m in _VALUE.finditer(line):
            start, end = m.span("value")
            if start < 0:
                continue
            value = _canonical(m.group("value"))
            if runs and _JOIN.fullmatch(line, runs[-1][1], start):
                runs[-1] = (runs[-1][0], end, [*runs[-1][2], value])
            else:
                runs.append((start, end, [value]))
        for start, end, values in runs:
            value = " ".join(values)
            left, right = _before(line, start), _after(line, end)
            if left != ["|"] * _CONTEXT:
                slots.setdefault(("<", *left), set()).add(value)
            if right != ["|"] * _CONTEXT:
                slots.setdefault((">", *right), set()).add(value)
    return {k: frozenset(v) for k, v in slots.items()}


@dataclass(frozen=True, slots=True)
class ValueConflict:
    """The first context (in sorted order) where two texts hold different values, for the trace."""

    context: Context
    values: tuple[str, str]

    def describe(self) -> str:
        """``"600 vs 60 (before 'requests per')"`` style: the two values and where they sit."""
        side, *words = self.context
        where = ""
        for w in (w for w in words if w != "|"):  # Han/Kana characters are written without spaces
            glued = where and SPACELESS_CHAR.fullmatch(w) and SPACELESS_CHAR.fullmatch(where[-1])
            where += w if not where or glued else " " + w
        return f"{self.values[0]} vs {self.values[1]} ({'after' if side == '<' else 'before'} '{where}')"


def value_conflict(a: ValueSlots, b: ValueSlots) -> ValueConflict | None:
    """Where ``a`` and ``b`` disagree (each holds a value in a shared context that the other lacks), or None."""
    if len(b) < len(a):
        a, b, swapped = b, a, True
    else:
        swapped = False
    for context in sorted(a.keys() & b.keys()):
        va, vb = a[context], b[context]
        only_a, only_b = va - vb, vb - va
        if only_a and only_b:
            pair = (min(only_a), min(only_b))
            return ValueConflict(context, (pair[1], pair[0]) if swapped else pair)
    return None
