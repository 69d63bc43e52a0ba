"""Numbers, dates, versions and amounts that two near-duplicate texts disagree on (a Free plan at 60
requests per minute and a Pro plan at 600 are not one chunk said twice).

A *value* is a number with its currency sign, decimal or version parts (``$1,200.50``, ``v2.5``, ``2024-03-01``,
``15%``) or an English month name; values with only spaces or commas between them form one *slot*
(``march 3, 2019``). Two texts *disagree* when their numbers differ and one was replaced: the same context holds
different values in each (a slot of one and a slot of the other have the same two tokens before them, or the same two
after, and each text has a value there that the other lacks). A value present in only one of the texts (a window that
starts a few words later, a line one copy lacks) is no disagreement; neither is a changed name next to an unchanged
number. ``ValueIndex`` answers for pairs of texts, lazily; the ``DuplicateFilter`` stage asks only about pairs at or
above its threshold.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ragtrim.text.scripts import SPACELESS_CHAR, SPACELESS_CLASS

_MONTH_NAMES = ("january|february|march|april|may|june|july|august|september|october|november|december"
                "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec")
_S = SPACELESS_CLASS
# Values are found from their digits: one scan with a plain character class (the regex engine skips everything else
# at C speed), then a look at what precedes them ("v" of a version, a currency sign, or a letter that makes the whole
# a word: "user4821", "h2o", "rev2"). Month names are looked for only in a line that holds one of their first three
# letters (a scan of literals, cheaper than the word-boundary pattern).
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*%?")
_MONTH_HINT = re.compile("jan|feb|ma[ry]|apr|ju[nl]|aug|sep|oct|nov|dec")
_MONTH = re.compile(rf"(?:{_MONTH_NAMES})(?![^\W_{_S}])")
_GLUE = re.compile(rf"[^\W_{_S}]")
"""A character a value may not follow: a letter or digit of a script written with spaces."""
_CURRENCY = "$€£¥₩"


def _values(line: str) -> list[tuple[int, int, str]]:
    """(start, end, canonical value) of every value of ``line``, in order."""
    out: list[tuple[int, int, str]] = []
    for m in _NUMBER.finditer(line):
        start, end = m.span()
        value = m.group()
        before = line[start - 1] if start else ""
        if before == "v" and (start < 2 or not _GLUE.match(line, start - 2)):
            start -= 1  # a version: "v2.5", the same value as "2.5"
        elif before in _CURRENCY and before:
            start -= 1
            value = before + value
        elif before == " " and start >= 2 and line[start - 2] in _CURRENCY:
            start -= 2
            value = line[start] + value
        elif before and _GLUE.match(before):
            continue  # glued to a word
        out.append((start, end, value))
    months = _months(line)
    if months:
        out.extend(months)
        out.sort()
    return out


def _months(text: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of every month name standing alone in ``text``."""
    out = []
    for hint in _MONTH_HINT.finditer(text):
        start = hint.start()
        if start and _GLUE.match(text, start - 1):
            continue
        month = _MONTH.match(text, start)
        if month:
            out.append((start, month.end(), month.group()))
    return out


# The tokens a context is made of: a Han/Kana character (those lines have no words) or a run of other letters and
# digits (Latin, Hangul, Cyrillic...; "2.5" is two tokens here, the same in both texts).
_TOKEN = re.compile(rf"[{_S}]|[^\W_{_S}]+")
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
        tokens = _TOKEN.findall(line, lo, start)
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
        tokens = _TOKEN.findall(line, end, hi)
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
        for start, end, value in _values(line):
            value = _canonical(value)
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


_DIGIT_RUN = re.compile(r"\d+")


def number_counts(lines: Iterable[str]) -> Counter[str]:
    """The multiset of digit runs and month names of ``lines``: what "the numbers of a text" means for the first test
    of ``ValueIndex.conflict`` (one C-speed scan; digits inside words count here, the slots ignore them)."""
    text = "\n".join(lines)
    counts = Counter(_DIGIT_RUN.findall(text))
    counts.update(name for _, _, name in _months(text))
    return counts


class ValueIndex:
    """Where pairs of texts disagree on values, computed lazily and cached per text (the ``DuplicateFilter`` stage
    asks only about pairs at or above its threshold).

    Two texts conflict when (1) their numbers differ (``number_counts``: the multisets of digit runs and month
    names are not equal) and (2) one of them was replaced: a context both texts have holds, in each, a value the
    other lacks there (``value_conflict``). Test (1) is one scan per text and settles most near duplicates (the same
    passage with other boilerplate holds the same numbers); (2) tells a replaced number from one that a window
    boundary or a missing line left out. A pair holding the same numbers assigned to other words (swapped) passes
    (1) and is judged by Jaccard alone."""

    def __init__(self, lines: Mapping[int, Sequence[str]]) -> None:
        self._lines = lines
        self._counts: dict[int, Counter[str]] = {}
        self._slots: dict[int, ValueSlots] = {}

    def _numbers(self, i: int) -> Counter[str]:
        got = self._counts.get(i)
        if got is None:
            got = self._counts[i] = number_counts(self._lines[i])
        return got

    def _slots_of(self, i: int) -> ValueSlots:
        got = self._slots.get(i)
        if got is None:
            got = self._slots[i] = value_slots(self._lines[i])
        return got

    def conflict(self, i: int, j: int) -> ValueConflict | None:
        """Where texts ``i`` and ``j`` disagree (the first context in sorted order), or None."""
        if self._lines[i] == self._lines[j] or self._numbers(i) == self._numbers(j):
            return None
        return value_conflict(self._slots_of(i), self._slots_of(j))


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
