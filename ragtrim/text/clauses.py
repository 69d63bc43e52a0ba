"""Clauses inside one sentence: where the compressor may cut a sentence that is longer than the room left."""

from __future__ import annotations

import re

_CLAUSE_END = re.compile(r"[,;:](?=\s)|\s[\u2013\u2014-]\s|[\uff0c\u3001\uff1b\uff1a]")
"""Where a clause ends inside a sentence: a comma, semicolon or colon before a space, a spaced dash, or the CJK
comma, enumeration comma, semicolon and colon (which need no space)."""


def clause_spans(text: str) -> list[tuple[int, int]]:
    """Spans of the clauses of one sentence (each ends after its mark; the whitespace between is left out)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _CLAUSE_END.finditer(text):
        end = m.start() if m.group()[0].isspace() else m.end()
        if text[start:end].strip():
            spans.append((start, end))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    out: list[tuple[int, int]] = []
    for a, b in spans:  # trim the whitespace at both ends of every clause
        piece = text[a:b]
        a2 = a + len(piece) - len(piece.lstrip())
        b2 = b - (len(piece) - len(piece.rstrip()))
        out.append((a2, b2))
    return out
