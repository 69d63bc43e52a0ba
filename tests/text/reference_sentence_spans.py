"""The sentence splitter as it was before the linear rewrite (regex with backtracking, a linear scan per boundary), kept
verbatim as the reference the linear rewrite in ``ragtrim.text`` must agree with on ordinary text."""

from __future__ import annotations

import re

from ragtrim.text.sentences import _is_abbreviation

_BOUNDARY = re.compile(r"""[.!?…]+["'”’)\]]*(?=\s+)|\n\s*\n|\n(?=[ \t]*(?:[-*•]|\d+[.)])\s)""")
_NEXT_START = re.compile(r"""\s*["'“‘(\[]?[A-Z0-9À-Ý]""")
# Regions no boundary may fall inside: fenced code blocks, inline code, and short double-quoted spans on one line.
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[^\n]*$|\Z)", re.DOTALL | re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_QUOTED = re.compile(r"\"[^\"\n]{1,400}\"|“[^”\n]{1,400}”")
# A line that reads as code: indented by a tab or 4+ spaces, or ending in a typical statement/block terminator.
_CODE_LINE = re.compile(r"^(?:\t|    )[^\n]*\S[^\n]*$|^[^\n]*(?:[;{}]|\):)[ \t]*$", re.MULTILINE)


def _fences(text: str) -> list[tuple[int, int]]:
    if "```" not in text and "~~~" not in text:
        return []
    return [(m.start(), m.end()) for m in _FENCE.finditer(text)]


def _code_lines(text: str) -> list[tuple[int, int]]:
    if not any(ch in text for ch in ";{}\t") and "):" not in text and "\n    " not in text and not text.startswith("    "):
        return []
    return [(m.start(), m.end()) for m in _CODE_LINE.finditer(text)]


def _inline_and_quoted(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    if "`" in text:
        out.extend((m.start(), m.end()) for m in _INLINE_CODE.finditer(text))
    if '"' in text or "“" in text:
        out.extend((m.start(), m.end()) for m in _QUOTED.finditer(text))
    return out


def _inside(pos: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a < pos < b for a, b in ranges)


def _line_breaks_around(text: str, blocks: list[tuple[int, int]]) -> set[int]:
    """Positions right after the newline that ends a fenced block or a code line: code stays on whole lines."""
    cuts: set[int] = set()
    for start, end in blocks:
        if start > 0 and text[start - 1] == "\n":
            cuts.add(start)
        if end < len(text) and text[end] == "\n":
            cuts.add(end + 1)
    return cuts


def old_sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    fences = _fences(text)
    code = _code_lines(text)
    protected = fences + code + _inline_and_quoted(text)
    cuts: set[int] = set()
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        token = m.group(0)
        if token[0] in ".!?…":
            if (protected and _inside(m.start(), protected)) or not _NEXT_START.match(text, end):
                continue
            if token.startswith(".") and len(token.rstrip("\"'”’)]")) == 1 and _is_abbreviation(text, m.start()):
                continue
        elif fences and _inside(m.start(), fences):
            continue
        cuts.add(end)
    if fences or code:
        cuts |= _line_breaks_around(text, fences + code)
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in sorted(cuts):
        # Swallow the whitespace after a boundary into the sentence before it.
        ws = cut
        while ws < len(text) and text[ws].isspace():
            ws += 1
        if ws <= start:
            continue
        if fences and _inside(ws, fences) and not any(a <= ws and not text[a:ws].strip() for a, _ in fences):
            continue
        spans.append((start, ws))
        start = ws
    if start < len(text):
        spans.append((start, len(text)))
    return tuple(spans)
