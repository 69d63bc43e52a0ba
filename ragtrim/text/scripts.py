"""Which writing system a text is in, cheaply: shares of its letters per script over a bounded prefix, and a
script-level language guess. The relevance scorers use it to let a model vote only on text it can read. Below
them, the character classes dedup, HTML extraction and history ask about: is a line written without spaces (Han,
Kana), does a text hold any CJK, how long is it in Latin-letter equivalents.

Cost: one ``str.translate`` over at most ``max_chars`` characters (a table over the Basic Multilingual Plane maps
each letter to a one-letter script code and everything else to nothing), then a count of the short code string.
ASCII text short-circuits to Latin. About 10 us for a question, 50 us for a 500-character Korean paragraph.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Collection
from functools import cache
from typing import Literal, get_args

Script = Literal["latin", "hangul", "han", "kana", "cyrillic", "greek", "arabic", "hebrew", "indic", "thai_lao",
                 "myanmar_khmer", "other"]
"""The scripts told apart. ``indic``: Devanagari to Sinhala (U+0900-0DFF); ``other``: letters of any other script
(Georgian, Armenian, Ethiopic, ...)."""
SCRIPTS: tuple[str, ...] = get_args(Script)
CJK_SCRIPTS = frozenset({"hangul", "han", "kana"})

# (code, script, ranges): a letter in a range belongs to the script; every other letter is "other".
_RANGES: tuple[tuple[str, str, tuple[tuple[int, int], ...]], ...] = (
    ("L", "latin", ((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x1E00, 0x1EFF), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))),
    ("K", "hangul", ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7A3), (0xD7B0, 0xD7FF),
                     (0xFFA0, 0xFFDC))),
    ("H", "han", ((0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))),
    ("J", "kana", ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))),
    ("C", "cyrillic", ((0x400, 0x52F), (0x1C80, 0x1C8F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F))),
    ("G", "greek", ((0x370, 0x3FF), (0x1F00, 0x1FFF))),
    ("A", "arabic", ((0x600, 0x6FF), (0x750, 0x77F), (0x8A0, 0x8FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF))),
    ("W", "hebrew", ((0x590, 0x5FF), (0xFB1D, 0xFB4F))),
    ("D", "indic", ((0x900, 0xDFF),)),
    ("T", "thai_lao", ((0xE00, 0xEFF),)),
    ("M", "myanmar_khmer", ((0x1000, 0x109F), (0x1780, 0x17FF), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F))),
)
_OTHER = "O"
_SCRIPT_OF_CODE: dict[str, str] = {code: name for code, name, _ in _RANGES} | {_OTHER: "other"}
_ASCII_NON_LETTERS: dict[int, None] = {i: None for i in range(128) if not chr(i).isalpha()}
_CJK_EXTENSIONS = (0x20000, 0x323AF)  # Han beyond the BMP (extensions B-H, compatibility supplement)


@cache
def _table() -> dict[int, str | None]:
    """Every BMP code point -> its script code (letters, and the marks of scripts that write vowels as marks), or
    None (deleted by ``str.translate``). Built once, on first use (about 20 ms)."""
    table: dict[int, str | None] = dict.fromkeys(range(0x10000))
    for cp in range(0x10000):
        if unicodedata.category(chr(cp)).startswith("L"):
            table[cp] = _OTHER
    for code, _, ranges in _RANGES:
        with_marks = code in "DTM"
        for a, b in ranges:
            for cp in range(a, b + 1):
                cat = unicodedata.category(chr(cp))
                if cat.startswith("L") or (with_marks and cat.startswith("M")) or (code == "H" and cat == "Nl"):
                    table[cp] = code
    return table


def warm_up() -> None:
    """Build the script table now rather than inside the first request with text that is not plain ASCII."""
    _table()


def script_shares(text: str, max_chars: int = 512) -> dict[str, float]:
    """The share of each script among the letters of ``text[:max_chars]``, largest first (``{}`` when there is no
    letter). Latin-script languages are not told apart."""
    head = text[:max_chars]
    if head.isascii():
        return {"latin": 1.0} if head.translate(_ASCII_NON_LETTERS) else {}
    codes = head.translate(_table())
    if not codes.isascii():  # code points above the BMP pass through translate unchanged
        codes = "".join(_astral_code(c) for c in codes)
    if not codes:
        return {}
    total = len(codes)
    return {_SCRIPT_OF_CODE[c]: n / total for c, n in Counter(codes).most_common()}


def _astral_code(c: str) -> str:
    if c.isascii():
        return c
    if _CJK_EXTENSIONS[0] <= ord(c) <= _CJK_EXTENSIONS[1]:
        return "H"
    return _OTHER if c.isalpha() else ""


def dominant_script(text: str, max_chars: int = 512) -> str:
    """The script of most letters of ``text[:max_chars]`` (one of ``SCRIPTS``), or ``"none"`` without letters."""
    shares = script_shares(text, max_chars)
    return next(iter(shares)) if shares else "none"


def share_in(text: str, scripts: Collection[str], max_chars: int = 512) -> float | None:
    """The share of the letters of ``text[:max_chars]`` written in ``scripts``; None when it has no letter."""
    shares = script_shares(text, max_chars)
    if not shares:
        return None
    return sum(v for k, v in shares.items() if k in scripts)


def query_length(query: str) -> float:
    """A query's length in words: whitespace-separated words, or, when at least half its letters are CJK (which
    separates no words), its non-space characters / 2."""
    if (share_in(query, CJK_SCRIPTS) or 0.0) >= 0.5:
        return sum(1 for c in query if not c.isspace()) / 2
    return float(len(query.split()))


_LANGUAGE_OF_SCRIPT = {"hangul": "ko", "han": "zh", "kana": "ja", "cyrillic": "ru", "greek": "el", "arabic": "ar",
                       "hebrew": "he", "indic": "hi", "thai_lao": "th", "myanmar_khmer": "my", "latin": "latin",
                       "other": "other"}


def guess_language(text: str, max_chars: int = 512) -> str:
    """A script-level guess: ``"ja"`` when kana is at least a tenth of the letters (Japanese mixes kana into Han)
    and Hangul not the majority, ``"ko"`` for mostly Hangul, ``"zh"`` for Han without kana, ``"latin"`` (English,
    French, ... not told apart), ``"ru"``/``"el"``/``"ar"``/``"he"``/``"hi"``/``"th"``/``"my"`` by script (Cyrillic,
    Greek, Arabic, Hebrew, Indic, Thai/Lao, Myanmar/Khmer), ``"other"``, or ``"none"`` without letters."""
    shares = script_shares(text, max_chars)
    if not shares:
        return "none"
    if shares.get("kana", 0.0) >= 0.1 and shares.get("hangul", 0.0) < 0.5:
        return "ja"
    return _LANGUAGE_OF_SCRIPT[next(iter(shares))]


# -- character classes (no table build): spaceless lines, CJK presence, Latin-equivalent length ---------------
SPACELESS_CLASS = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana (NFKC folds them, raw text may still hold them)
    "\U00020000-\U0002fa1f"  # CJK extensions B-F and compatibility supplement
)
"""Han and Kana: scripts written without spaces between words, where a "word" of ``\\w+`` is a whole clause."""

HANGUL_CLASS = "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff"
"""Hangul syllables and jamo. Korean is written with spaces between words (eojeol), so it keeps word rules."""

SPACELESS_CHAR = re.compile(f"[{SPACELESS_CLASS}]")
# A quicker first look: one merged range over the BMP blocks (a charset of few ranges scans about twice as fast on
# non-CJK text). It also admits Bopomofo, Hangul compatibility jamo and CJK symbols, so a hit is then counted with
# the exact class; a line whose only Han characters lie beyond the BMP goes by words.
_MAYBE_SPACELESS = re.compile("[\u3040-\u9fff\uf900-\ufaff\uff66-\uff9f]")
_HANGUL_CHAR = re.compile(f"[{HANGUL_CLASS}]")

HAN_KANA_WEIGHT = 3
"""Latin letters one Han or Kana character stands for in a length threshold: the English translations of the ten
Japanese articles in benchmarks/ragtrim_bench/dedup/script_texts.py have 2.4-2.9 characters per Japanese character, and the two
Chinese sentences of the HTML tests' multilingual page 3.2 per Chinese character."""
HANGUL_WEIGHT = 2
"""The same for a Hangul syllable: 1.8 and 2.0 English characters per Korean character in the two Korean sentences
of the HTML tests' multilingual page (spaces counted on both sides)."""
_LETTER = re.compile(r"[^\W\d_]")
_HAS_CJK = re.compile(f"[{SPACELESS_CLASS}{HANGUL_CLASS}]")

PROBE_CHARS = 1000
"""A line's script is judged on its first this many characters, so the test costs the same on a 10 MB line."""


def is_spaceless(line: str, *, min_share: float = 0.5) -> bool:
    """True when at least ``min_share`` of the letters in the first ``PROBE_CHARS`` characters are Han or Kana."""
    if line.isascii():
        return False
    head = line[:PROBE_CHARS]
    if _MAYBE_SPACELESS.search(head) is None:  # most non-ASCII lines (accents, quotes): one quick scan
        return False
    return len(SPACELESS_CHAR.findall(head)) >= min_share * len(_LETTER.findall(head))


def has_cjk(text: str) -> bool:
    """True when ``text`` holds any Han, Kana or Hangul character."""
    return not text.isascii() and _HAS_CJK.search(text) is not None


def latin_equivalent_len(text: str) -> int:
    """``len(text)`` with each Han/Kana character counted ``HAN_KANA_WEIGHT`` times and each Hangul syllable
    ``HANGUL_WEIGHT`` times, so a length threshold set for English text means as much text in Japanese, Chinese or
    Korean (the same as ``len`` for ASCII text, at once)."""
    n = len(text)
    if text.isascii() or _HAS_CJK.search(text) is None:
        return n
    return (n + (HAN_KANA_WEIGHT - 1) * len(SPACELESS_CHAR.findall(text))
            + (HANGUL_WEIGHT - 1) * len(_HANGUL_CHAR.findall(text)))
