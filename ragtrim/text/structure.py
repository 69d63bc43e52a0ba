"""Which units of a text travel together: a table row with its header rows, its caption and its section row; a
numbered or titled clause with its heading (and a heading with the first unit of its clause).

Units are the sentence spans of one chunk (``ragtrim.text.sentences.sentence_spans``: table rows and short lines are
units of their own). ``dependencies`` says, for each unit, which other units a reader needs to understand it: a row
"| Pro | 200 GB |" means nothing without "| Plan | Limit |" above it, and "10.7 Governing Law." nothing without the
clause below it. The compressor keeps a unit only with everything it depends on.

Tables: Markdown and pipe tables (lines starting with ``|``; the rows above a ``|---|`` rule are the header) and
tab-separated rows; without a rule the first row is the header, with the rows right below it whose first cell is
empty (a second header line such as "|  | RMB'Million |") or whose other cells are column labels with a year among
them and no other figure ("| (in thousands of $) | 2018 | 2017 | Change |"). A row whose only filled cell is the first
("| As at 31 December 2019 |  |  |") is a section row: the data rows below it depend on it, up to the next one.
The caption is the unit right above the table when it is a short line ending in a colon, or without a final stop.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence

_PIPE_ROW = re.compile(r"^[ \t]*\|")
_TAB_ROW = re.compile(r"^[^\n\t]*\S\t+\S")
_RULE_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$")
_HEADING_START = re.compile(
    r"^(?:#{1,6}\s|(?i:article|section|clause|schedule|exhibit|annex|appendix|part)\s+(?i:[0-9]+|[ivxlc]+)\b"
    r"|\d{1,3}(?:\.\d{1,3})*\.?\s+[A-Z]|[IVXLC]{1,6}\.\s+[A-Z][a-z])"
)
"""A Markdown heading; "Section 3", "ARTICLE V"; a number before a capitalized word ("10.7 Governing", "1. Services":
not "10 apples"); a Roman numeral before a word ("IV. Remedies": not the initials of "I. M. Pei")."""
MAX_HEADING_WORDS = 10
MAX_HEADING_CHARS = 100
MAX_CAPTION_CHARS = 200
MAX_HEADER_ROWS = 3
_YEAR_LABEL = re.compile(r"^(?:FY\s?|Fiscal\s)?(?:19|20)\d{2}(?:\s?[/-]\s?(?:19|20)?\d{2})?$", re.IGNORECASE)
"""A column label that is a year or a fiscal year: "2019", "FY2019", "2018/2019", "2019-20"."""


def is_table_row(unit: str) -> bool:
    """A Markdown or pipe table row (starts with ``|``) or a tab-separated row."""
    return ("|" in unit or "\t" in unit) and bool(_PIPE_ROW.match(unit) or _TAB_ROW.match(unit))


def starts_line(text: str, pos: int) -> bool:
    """True when the whitespace before ``pos`` holds a line break (a sentence span starts after its whitespace)."""
    i = pos - 1
    while i >= 0 and text[i].isspace():
        if text[i] == "\n":
            return True
        i -= 1
    return False


def cells(row: str) -> list[str]:
    """The stripped cells of a table row: between pipes, or between tabs."""
    text = row.strip()
    if text.startswith("|"):
        parts = text.strip("|").split("|")
    else:
        parts = text.split("\t")
    return [p.strip() for p in parts]


def is_heading(unit: str) -> bool:
    """A short numbered or titled line: "10.7 Governing Law.", "ARTICLE 5 - TERM", "# Fees", "GOVERNING LAW"."""
    text = unit.strip()
    if not text or len(text) > MAX_HEADING_CHARS or len(text.split()) > MAX_HEADING_WORDS or is_table_row(text):
        return False
    if _HEADING_START.match(text):
        return True
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 4 and all(c.isupper() for c in letters)


def _is_caption(unit: str) -> bool:
    text = unit.strip()
    return 0 < len(text) <= MAX_CAPTION_CHARS and (text.endswith(":") or not text.endswith((".", "!", "?", "。")))


def dependencies(units: Sequence[str]) -> list[tuple[int, ...]]:
    """For each unit, the other units it must be kept with (transitively closed, sorted). See the module docstring."""
    n = len(units)
    direct: list[set[int]] = [set() for _ in range(n)]
    table = [is_table_row(u) for u in units]
    i = 0
    while i < n:
        if not table[i]:
            i += 1
            continue
        j = i
        while j < n and table[j]:
            j += 1
        _table_dependencies(units, i, j, direct)
        i = j
    _heading_dependencies(units, table, direct)
    out: list[tuple[int, ...]] = []
    for k in range(n):  # transitive closure: a row needs its header, the header its caption
        seen: set[int] = set()
        stack = list(direct[k])
        while stack:
            d = stack.pop()
            if d != k and d not in seen:
                seen.add(d)
                stack.extend(direct[d])
        out.append(tuple(sorted(seen)))
    return out


def _table_dependencies(units: Sequence[str], lo: int, hi: int, direct: list[set[int]]) -> None:
    """Rows ``lo`` .. ``hi - 1`` form one table."""
    rule = next((k for k in range(lo, min(hi, lo + MAX_HEADER_ROWS + 1)) if _RULE_ROW.match(units[k])), None)
    if rule is not None:
        header = list(range(lo, rule + 1))
    else:
        header = [lo]
        while (len(header) < MAX_HEADER_ROWS and header[-1] + 1 < hi
               and _continues_header(cells(units[header[-1] + 1]))):
            header.append(header[-1] + 1)
    caption = [lo - 1] if lo > 0 and _is_caption(units[lo - 1]) else []
    for h in header:
        direct[h].update(x for x in header + caption if x != h)
    section: int | None = None
    for k in range(header[-1] + 1, hi):
        row = cells(units[k])
        if row and row[0] and not any(row[1:]):
            section = k
            direct[k].update(header + caption)
            continue
        direct[k].update(header + caption + ([section] if section is not None else []))


def _continues_header(row: list[str]) -> bool:
    """A row right below a header without a rule that is a header row too: its first cell empty and another filled,
    or its other cells column labels with at least one year and no other figure."""
    if not row or not any(row[1:]):
        return False
    if not row[0]:
        return True
    labels = [c for c in row[1:] if c]
    return (any(_YEAR_LABEL.match(c) for c in labels)
            and all(_YEAR_LABEL.match(c) or not any(ch.isdigit() for ch in c) for c in labels))


def _heading_dependencies(units: Sequence[str], table: list[bool], direct: list[set[int]]) -> None:
    """Every unit below a heading (up to the next heading) depends on it; a heading depends on the unit right below
    it, the start of its clause, when that is not a heading too."""
    heading: int | None = None
    for k, unit in enumerate(units):
        if table[k]:
            continue
        if is_heading(unit):
            heading = k
            if k + 1 < len(units) and not table[k + 1] and not is_heading(units[k + 1]):
                direct[k].add(k + 1)
            continue
        if heading is not None:
            direct[k].add(heading)


def closed_under(chosen: set[int], deps: list[tuple[int, ...]]) -> set[int]:
    """``chosen`` without every sentence whose dependencies are not all in it (repeated until none is missing)."""
    out = set(chosen)
    while True:
        missing = {i for i in out if any(d not in out for d in deps[i])}
        if not missing:
            return out
        out -= missing


def neighbour_max(vals: list[float], width: int) -> list[float | None]:
    """For each position, the largest value among the ``width`` positions on either side (itself excluded), or
    None when it has no neighbour. Two monotonic-queue passes: O(len(vals)) for any ``width``."""
    out: list[float | None] = [None] * len(vals)
    for order in (range(len(vals)), range(len(vals) - 1, -1, -1)):
        window: deque[int] = deque()  # positions with decreasing values, the last ``width`` seen
        for i in order:
            while window and abs(window[0] - i) > width:
                window.popleft()
            if window:
                best = vals[window[0]]
                current = out[i]
                out[i] = best if current is None else max(current, best)
            while window and vals[window[-1]] <= vals[i]:
                window.pop()
            window.append(i)
    return out
