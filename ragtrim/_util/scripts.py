"""Which writing system a line uses, as far as dedup, HTML extraction and history need to know (issue 24).

A small local helper: the text layer's script detection (``ragtrim.text``, branch ``wip-lang``) is the general one;
this module answers the three questions those stages ask, with character classes only (no model, no table build).
"""

from __future__ import annotations

import re

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
Chinese sentences of the issue-24 HTML prototype 3.2 per Chinese character."""
HANGUL_WEIGHT = 2
"""The same for a Hangul syllable: 1.8 and 2.0 English characters per Korean character in the two Korean sentences
of the issue-24 HTML prototype (spaces counted on both sides)."""
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
