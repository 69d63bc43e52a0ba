"""Text helpers shared by stages: rule-based sentence spans (no downloaded models) and normalization.

Sentence spans cover the text without gaps, so any prefix of them is a clean cut of the original string.
"""

from __future__ import annotations

import re
import unicodedata

from ragtrim._lru import bounded_cache, weigh_text_and_items

_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "vs", "etc", "e.g", "i.e", "cf", "al",
    "fig", "figs", "no", "nos", "vol", "vols", "pp", "p", "ed", "eds", "approx", "est", "dept", "univ",
    "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
    "nov", "dec", "mon", "tue", "wed", "thu", "fri", "sat", "sun", "gen", "col", "lt", "sgt", "capt",
    "cmdr", "gov", "sen", "rep", "rev", "hon", "u.s", "u.k", "u.n", "a.m", "p.m", "b.c", "a.d", "ph.d",
})

# A candidate boundary: terminal punctuation, optional closing quotes/brackets, then whitespace; a blank line; a
# newline before a list item.
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


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentence spans ``(start, end)``; trailing whitespace belongs to the sentence before it.

    Rules: a boundary is ``.``/``!``/``?`` (plus closing quotes) followed by whitespace and an upper-case letter or
    digit; known abbreviations (``Dr.``, ``e.g.``, ``U.S.``), single-letter initials and decimals (``3.5``, no
    whitespace) do not end a sentence; blank lines and list items always do. No boundary falls inside a quoted
    span, inline code or a code line; a fenced code block or a code line is a unit of its own.
    """
    if not text:
        return []
    return list(_sentence_spans(text))


@bounded_cache(max_entries=16384, weigh=weigh_text_and_items(120))
def _sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
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


def _is_abbreviation(text: str, dot: int) -> bool:
    i = dot
    while i > 0 and not text[i - 1].isspace() and text[i - 1] not in "([\"'“":
        i -= 1
    word = text[i:dot].lower()
    if not word:
        return False
    if len(word) == 1 and word.isalpha():  # initials: "J. Smith"
        return True
    return word in _ABBREVIATIONS or word.rstrip(".") in _ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (each with its trailing whitespace stripped)."""
    return [s for s in (text[a:b].strip() for a, b in sentence_spans(text)) if s]


def normalize_text(text: str) -> str:
    """Lower-case, NFKC, collapse whitespace: the form exact-duplicate hashing compares.

    ``str.split()`` and ``re``'s ``\\s`` use the same Unicode whitespace test, so this equals
    ``re.sub(r"\\s+", " ", nfkc).strip().lower()`` at about a fifth of the cost."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())
