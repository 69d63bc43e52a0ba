"""Text helpers shared by stages: rule-based sentence spans (no downloaded models) and normalization.

Sentence spans cover the text without gaps, so any prefix of them is a clean cut of the original string.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right

from ragtrim._util.lru import bounded_cache, weigh_text_and_items

_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "vs", "etc", "e.g", "i.e", "cf", "al",
    "fig", "figs", "no", "nos", "vol", "vols", "pp", "p", "ed", "eds", "approx", "est", "dept", "univ",
    "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
    "nov", "dec", "mon", "tue", "wed", "thu", "fri", "sat", "sun", "gen", "col", "lt", "sgt", "capt",
    "cmdr", "gov", "sen", "rep", "rev", "hon", "u.s", "u.k", "u.n", "a.m", "p.m", "b.c", "a.d", "ph.d",
})

# A candidate boundary: terminal punctuation, optional closing quotes/brackets, then whitespace; a blank line; a
# newline before a list item. The first branch is possessive and may not start right after a terminal mark: a run of
# 40,000 dots is then read once instead of once per dot (the plain ``[.!?…]+...(?=\s)`` backtracked, quadratic).
# Neither restriction changes a match: a shorter run is followed by another mark, never by whitespace, and a start
# inside a run only follows a failed attempt at the run's first mark. Every branch starts with one character of
# ``[.!?…\n]``, matched first and then told apart by lookbehind: the same matches as
# ``(?<![.!?…])[.!?…]++["'”’)\]]*+(?=\s)|\n\s*\n|\n(?=[ \t]*(?:[-*•]|\d+[.)])\s)``, but the engine skips every
# other character with one set test instead of trying three branches at each.
_BOUNDARY = re.compile(r"""[.!?…\n](?:(?<=[.!?…])(?<![.!?…].)[.!?…]*+["'”’)\]]*+(?=\s)|(?<=\n)\s*\n"""
                       r"""|(?<=\n)(?=[ \t]*(?:[-*•]|\d+[.)])\s))""")
_NEXT_START = re.compile(r"""\s*["'“‘(\[]?[A-Z0-9À-Ý]""")
# Regions no boundary may fall inside: fenced code blocks, inline code, and short double-quoted spans on one line.
_FENCE_OPEN = re.compile(r"[ \t]*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_MAX_QUOTED_CHARS = 400
_STRAIGHT_STOP = re.compile('["\n]')
_CURLY_STOP = re.compile("[”\n]")
# A line that reads as code: indented by a tab or 4+ spaces, or ending in a typical statement/block terminator.
_CODE_LINE = re.compile(r"^(?:\t|    )[^\n]*\S[^\n]*$|^[^\n]*(?:[;{}]|\):)[ \t]*$", re.MULTILINE)
_WS_RUN = re.compile(r"\s*")


def _fences(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks as ``(start, end)``, found by one scan over the lines.

    A fence opens on a line whose first non-blank characters are ```` ``` ```` or ``~~~`` and that ends in a
    newline; it closes at the end of the next line starting (after blanks) with the same marker, or at the end of
    the text. Same spans as the former regex ``^[ \\t]*(```|~~~)[^\\n]*\\n.*?(?:^[ \\t]*\\1[^\\n]*$|\\Z)``, whose
    lazy scan plus backreference cost a second per 40 KiB of unclosed fences.
    """
    if "```" not in text and "~~~" not in text:
        return []
    out: list[tuple[int, int]] = []
    n = len(text)
    line = 0
    while line < n:
        nl = text.find("\n", line)
        m = _FENCE_OPEN.match(text, line, n if nl < 0 else nl)
        if m is None or nl < 0:
            line = n if nl < 0 else nl + 1
            continue
        marker = m.group(1)
        inner = nl + 1
        end = n
        while inner < n:
            inner_nl = text.find("\n", inner)
            inner_end = n if inner_nl < 0 else inner_nl
            close = _FENCE_OPEN.match(text, inner, inner_end)
            if close is not None and close.group(1) == marker:
                end = inner_end
                break
            inner = inner_end + 1
        out.append((line, end))
        line = end + 1
    return out


def _code_lines(text: str) -> list[tuple[int, int]]:
    if not any(ch in text for ch in ";{}\t") and "):" not in text and "\n    " not in text and not text.startswith("    "):
        return []
    return [(m.start(), m.end()) for m in _CODE_LINE.finditer(text)]


def _quoted(text: str) -> list[tuple[int, int]]:
    """Spans of ``"..."`` and ``“...”`` with 1-400 characters on one line, leftmost first and non-overlapping (as
    ``re.finditer`` on ``"[^"\\n]{1,400}"|“[^”\\n]{1,400}”`` gives them).

    A single pass: the regex retried up to 400 characters at every opening ``“`` (400 times the text length for a
    run of them). Each opener's stop (the next closer or newline) is found once and shared by the openers before it.
    """
    out: list[tuple[int, int]] = []
    n = len(text)
    limit = _MAX_QUOTED_CHARS
    pos = 0
    straight = text.find('"')
    curly = text.find("“")
    curly_floor = 0  # no opening “ before this can still match
    curly_stop = -1  # the next ” or newline after the last curly opener tried (-1: unknown)
    while True:
        if 0 <= straight < pos:
            straight = text.find('"', pos)
        if curly >= 0 and curly < max(pos, curly_floor):
            curly = text.find("“", max(pos, curly_floor))
        if straight < 0 and curly < 0:
            return out
        if straight >= 0 and (curly < 0 or straight < curly):
            p = straight
            stop = _STRAIGHT_STOP.search(text, p + 1)
            q = stop.start() if stop else n
            if q < n and text[q] == '"' and 1 <= q - p - 1 <= limit:
                out.append((p, q + 1))
                pos = q + 1
            else:
                pos = p + 1
            continue
        p = curly
        if curly_stop <= p:
            stop = _CURLY_STOP.search(text, p + 1)
            curly_stop = stop.start() if stop else n
        q = curly_stop
        if q < n and text[q] == "”" and 1 <= q - p - 1 <= limit:
            out.append((p, q + 1))
            pos = q + 1
        elif q < n and text[q] == "”" and q - p - 1 > limit:
            curly_floor = q - limit - 1  # the first opener close enough to q
            pos = p + 1
        else:  # a newline, the end, or an empty pair: no opener before q can match
            curly_floor = q + 1
            pos = p + 1


def _inline_and_quoted(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    if "`" in text:
        out.extend((m.start(), m.end()) for m in _INLINE_CODE.finditer(text))
    if '"' in text or "“" in text:
        out.extend(_quoted(text))
    return out


class _Ranges:
    """Open intervals ``(a, b)``, possibly overlapping, answering "is ``pos`` strictly inside one?" in O(log n).

    Starts are sorted with the running maximum of the ends, so the intervals starting before ``pos`` reach past it
    exactly when that maximum does (a per-boundary scan over all ranges made quoted text quadratic)."""

    __slots__ = ("_reach", "_starts")

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        ordered = sorted(ranges)
        self._starts = [a for a, _ in ordered]
        self._reach: list[int] = []
        reach = -1
        for _, b in ordered:
            reach = max(reach, b)
            self._reach.append(reach)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def contains(self, pos: int) -> bool:
        k = bisect_left(self._starts, pos)  # ranges [0, k) start before pos
        return k > 0 and self._reach[k - 1] > pos


def _blank_end(text: str, pos: int) -> int:
    """The end of the whitespace run starting at ``pos`` (``pos`` itself when there is none)."""
    m = _WS_RUN.match(text, pos)
    return m.end() if m else pos


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

    Linear time in the length of the text: every scan is a single pass or a bisection.
    """
    if not text:
        return []
    return list(_sentence_spans(text))


@bounded_cache(max_entries=16384, weigh=weigh_text_and_items(120))
def _sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    fences = _fences(text)
    code = _code_lines(text)
    protected = _Ranges(fences + code + _inline_and_quoted(text))
    fenced = _Ranges(fences)
    has_protected = bool(protected)
    # The text's first non-blank position in each fence: a cut there starts the fence, a cut further in splits it.
    fence_starts = [a for a, _ in fences]
    fence_heads = [_blank_end(text, a) for a in fence_starts]
    cuts: set[int] = set()
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        token = m.group(0)
        if token[0] in ".!?…":
            if (has_protected and protected.contains(m.start())) or not _NEXT_START.match(text, end):
                continue
            if token.startswith(".") and len(token.rstrip("\"'”’)]")) == 1 and _is_abbreviation(text, m.start()):
                continue
        elif fences and fenced.contains(m.start()):
            continue
        cuts.add(end)
    if fences or code:
        cuts |= _line_breaks_around(text, fences + code)
    spans: list[tuple[int, int]] = []
    start = 0
    ws = 0
    for cut in sorted(cuts):
        # Swallow the whitespace after a boundary into the sentence before it (cuts in one whitespace run share
        # the scan).
        if cut > ws:
            ws = _blank_end(text, cut)
        if ws <= start:
            continue
        if fences and fenced.contains(ws):
            k = bisect_right(fence_starts, ws) - 1  # the only fence that can begin with blanks up to ws
            if k < 0 or ws > fence_heads[k]:
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


def clear_sentence_cache() -> None:
    """Forget the memoized sentence spans (``ragtrim.caches.clear_caches`` calls this)."""
    _sentence_spans.cache_clear()
