"""Text helpers shared by stages: rule-based sentence spans in every script (no downloaded models) and normalization.

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

# Stops that end a sentence when whitespace follows: the Latin ones, Arabic and Urdu (؟ ۔), the Greek question
# mark (U+037E), Armenian (։), Ethiopic (።), Myanmar (။) and Khmer (។) full stops.
_SPACED = ".!?…\u061f\u06d4\u037e\u0589\u1362\u104b\u17d4"
_SPACED_SET = frozenset(_SPACED)
# Closing quotes and brackets that stay with the sentence they close (full-width and CJK corner brackets too).
_CLOSERS = "\"'”’)\\]」』）】〉》〕｣"
# A candidate boundary: a stop, optional closing quotes/brackets, then whitespace; a blank line; a newline before a
# list item. The first branch is possessive and may not start right after a stop: a run of 40,000 dots is then read
# once instead of once per dot (the plain ``[.!?…]+...(?=\s)`` backtracked, quadratic). Neither restriction changes
# a match: a shorter run is followed by another mark, never by whitespace, and a start inside a run only follows a
# failed attempt at the run's first mark. Every branch starts with one character of ``[<stops>\n]``, matched first
# and then told apart by lookbehind: on ASCII text the same matches as
# ``(?<![.!?…])[.!?…]++["'”’)\]]*+(?=\s)|\n\s*\n|\n(?=[ \t]*(?:[-*•]|\d+[.)])\s)``, but the engine skips every
# other character with one set test instead of trying three branches at each.
_BOUNDARY = re.compile(
    rf"""[{_SPACED}\n](?:(?<=[{_SPACED}])(?<![{_SPACED}].)[{_SPACED}]*+[{_CLOSERS}]*+(?=\s)|(?<=\n)\s*\n"""
    r"""|(?<=\n)(?=[ \t]*(?:[-*•]|\d+[.)])\s))"""
)
# Stops that end a sentence with no whitespace after them: 。！？｡ (Chinese, Japanese), । ॥ (Devanagari), ．unless a
# digit follows (a full-width decimal point), and an ASCII ! or ? written straight before Han or Kana.
_SPACELESS = "。！？｡।॥"
_HAN_KANA = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_SPACELESS_BOUNDARY = re.compile(
    rf"(?<![{_SPACELESS}])[{_SPACELESS}]++[{_SPACELESS}!?]*+[{_CLOSERS}]*+"
    rf"|．(?![0-9０-９])[{_CLOSERS}]*+"
    rf"|(?<![!?])[!?]++(?=[{_HAN_KANA}])"
)
_SPACELESS_PRESENT = re.compile(rf"[{_SPACELESS}．]|[!?][{_HAN_KANA}]")
_QUOTATIVE = frozenset("とっ")  # 「…。」と言った: the quotative particle continues the sentence
# Thai and Lao write no full stop; a space between two letters of the script separates sentences or clauses.
_THAI_LAO = "\u0e01-\u0e4e\u0e81-\u0ece"
_THAI_SPACE = re.compile(rf"(?<=[{_THAI_LAO}])[ \t\u00a0]+(?=[{_THAI_LAO}])")
_THAI_PRESENT = re.compile(rf"[{_THAI_LAO}]")
_ASCII_START = re.compile(r"[A-Z0-9À-Ý]")
_LEAD = re.compile(r"""\s*["'“‘(\[«„「『¿¡‹]?""")
_LINE_LEAD = re.compile(r"""[ \t]*["'“‘(\[«„「『¿¡‹]?""")
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


def starts_sentence(text: str, pos: int, *, caseless: bool = True, lead: re.Pattern[str] = _LEAD) -> bool:
    """True when, after the whitespace at ``pos`` and an optional opening quote or bracket, comes a character that
    can start a sentence: an ASCII capital or digit or ``À-Ý`` (the English rule), any upper- or title-case letter
    (``Ł``, ``İ``, ``Б``, ``Α``), any digit, or, with ``caseless``, a letter of a script without case (Hangul, Han,
    Kana, Arabic, Hebrew, Devanagari, Thai: category Lo). A lower-case letter never starts one ("e.g. the",
    "т. е. столица")."""
    m = lead.match(text, pos)
    p = m.end() if m else pos
    if p >= len(text):
        return False
    c = text[p]
    if c.isascii() or _ASCII_START.match(c):
        return bool(_ASCII_START.match(c))
    if c.isupper() or c.istitle() or c.isdigit():
        return True
    return caseless and unicodedata.category(c) == "Lo"


def _bracket_quotes(text: str, opener: str, closer: str) -> list[tuple[int, int]]:
    """Spans ``opener ... closer`` (Japanese 「…」, 『…』) of 1-400 characters on one line, leftmost first, in one
    pass: each opener's stop (the next closer or newline) is found once and shared by the openers before it."""
    out: list[tuple[int, int]] = []
    n = len(text)
    limit = _MAX_QUOTED_CHARS
    stop_re = re.compile(f"[{closer}\n]")
    pos = 0
    stop = -1
    while True:
        p = text.find(opener, pos)
        if p < 0:
            return out
        if stop <= p:
            m = stop_re.search(text, p + 1)
            stop = m.start() if m else n
        q = stop
        if q < n and text[q] == closer and 1 <= q - p - 1 <= limit:
            out.append((p, q + 1))
            pos = q + 1
        elif q < n and text[q] == closer and q - p - 1 > limit:
            pos = max(p + 1, q - limit - 1)  # the first opener close enough to q
        else:
            pos = q + 1


# -- lines that are units of their own: table rows, list items, short block lines -------------------------------------
# A table row: a Markdown row (the line starts with "|") or a plain-text row (two cells separated by tabs).
_TABLE_ROW = re.compile(r"^[ \t]*\|[^\n]*|^[^\n\t]*[^\s]\t+[^\s][^\n]*", re.MULTILINE)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*•]|\d+[.)])[ \t][^\n]*", re.MULTILINE)
_SHORT_LINE_CHARS = 60
"""Consecutive lines shorter than this (table rows rendered by the HTML stage, labels and values, a short list without
markers) are units of their own when the next line starts a sentence. A single short line before a paragraph (a
title, a heading) stays with the paragraph's first sentence, as before: hard-wrapped prose has longer lines, and a
lower-case continuation never starts a sentence."""
_SHORT_LINE = re.compile(rf"^[^\S\n]*\S[^\n]{{0,{_SHORT_LINE_CHARS - 2}}}(?:\n|\Z)", re.MULTILINE)


def _line_units(text: str) -> set[int]:
    """Cuts that make lines units of their own: before and after every table row; after a list item (the item
    itself starts at a boundary already) and after a short line next to another short line, when the next line starts
    a sentence."""
    cuts: set[int] = set()
    n = len(text)
    if "|" in text or "\t" in text:
        for m in _TABLE_ROW.finditer(text):
            a, b = m.start(), m.end()
            if a > 0:
                cuts.add(a)
            if b < n:
                cuts.add(b + 1)
    for m in _LIST_ITEM.finditer(text):
        b = m.end() + 1
        if b < n and starts_sentence(text, b, lead=_LINE_LEAD):
            cuts.add(b)
    short = [(m.start(), m.end()) for m in _SHORT_LINE.finditer(text)]
    starts = {a for a, _ in short}
    ends = {b for _, b in short}
    for a, b in short:
        if b < n and (a in ends or b in starts) and starts_sentence(text, b, lead=_LINE_LEAD):
            cuts.add(b)
    return cuts


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentence spans ``(start, end)``; trailing whitespace belongs to the sentence before it.

    Rules: a boundary is a stop (``.``/``!``/``?``/``…`` and the spaced stops of other scripts, plus closing quotes)
    followed by whitespace and a character that starts a sentence (``starts_sentence``: a capital or digit, or a
    letter of a caseless script such as Hangul; an ellipsis only before a capital or digit); ``。！？｡।॥`` end a
    sentence with no whitespace after them; known abbreviations (``Dr.``, ``e.g.``, ``U.S.``), single-letter
    initials of cased scripts and decimals (``3.5``, no whitespace) do not end a sentence; blank lines, list items,
    table rows and short lines followed by a sentence start are units of their own; in Thai and Lao a space between
    two letters ends a unit. No boundary falls inside a quoted span (``"…"``, ``“…”``, ``「…」``, ``『…』``), inline
    code or a code line; a fenced code block or a code line is a unit of its own.

    Linear time in the length of the text: every scan is a single pass or a bisection.
    """
    if not text:
        return []
    return list(_sentence_spans(text))


@bounded_cache(max_entries=16384, weigh=weigh_text_and_items(120))
def _sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    fences = _fences(text)
    code = _code_lines(text)
    quoted = _inline_and_quoted(text)
    ascii_text = text.isascii()
    if not ascii_text:
        if "「" in text:
            quoted += _bracket_quotes(text, "「", "」")
        if "『" in text:
            quoted += _bracket_quotes(text, "『", "』")
    protected = _Ranges(fences + code + quoted)
    fenced = _Ranges(fences)
    has_protected = bool(protected)
    # The text's first non-blank position in each fence: a cut there starts the fence, a cut further in splits it.
    fence_starts = [a for a, _ in fences]
    fence_heads = [_blank_end(text, a) for a in fence_starts]
    cuts: set[int] = set()
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        token = m.group(0)
        if token[0] in _SPACED_SET:
            if has_protected and protected.contains(m.start()):
                continue
            # An ellipsis (..., …) is a pause in caseless scripts: it ends a sentence only before a capital or digit.
            if not starts_sentence(text, end, caseless=not (token[0] == "…" or token.startswith(".."))):
                continue
            if token[0] == "." and len(token.rstrip(_CLOSERS)) == 1 and _is_abbreviation(text, m.start()):
                continue
        elif fences and fenced.contains(m.start()):
            continue
        cuts.add(end)
    if "\n" in text:
        cuts |= _line_units(text)
    if not ascii_text:
        if _SPACELESS_PRESENT.search(text):
            n = len(text)
            for m in _SPACELESS_BOUNDARY.finditer(text):
                end = m.end()
                # A stop that closes a quote (。」, 。”) ends the sentence; one inside a quote does not.
                if end >= n or (has_protected and protected.contains(end)):
                    continue
                if text[end] in _QUOTATIVE and text[end - 1] in _CLOSERS:
                    continue
                cuts.add(end)
        if _THAI_PRESENT.search(text):
            for m in _THAI_SPACE.finditer(text):
                if not (has_protected and protected.contains(m.start())):
                    cuts.add(m.start())
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
    if len(word) == 1 and word.isalpha() and word != word.upper():  # initials of cased scripts: "J. Smith"
        return True  # (a Hangul or Han syllable before a full stop is a word, not an initial)
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
