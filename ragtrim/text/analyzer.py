"""Search tokens for every script: what BM25 matches on when the text is not plain ASCII.

Hangul, Han and Kana runs become overlapping character bigrams (a lone character a unigram), as Lucene's
CJKAnalyzer indexes Chinese, Japanese and Korean: no dictionary, and a Korean word still matches with its particle
attached (``요금제의`` shares ``요금`` and ``금제`` with ``요금제``). Thai, Lao, Myanmar and Khmer, written without
spaces between words, become bigrams of grapheme clusters (a letter with its vowel and tone marks). Every other
script gives words that keep their combining marks (``सीमा`` stays one word). Numbers keep their inner separators.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

# Hangul (syllables, jamo, compatibility jamo), Kana (not the middle dot ・ between the words of a name), Han: one
# run, bigrammed across script changes as Lucene does.
_CJK = ("\u1100-\u11ff\u3005-\u3007\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
        "\uac00-\ud7a3\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U000323af")
# Thai, Lao, Myanmar, Khmer: no spaces between words.
_SEA = "\u0e01-\u0e5b\u0e81-\u0edf\u1000-\u109f\u1780-\u17dd"
# Where combining marks live: Latin, Greek and Cyrillic diacritics, Hebrew and Arabic points, the Indic blocks
# (Devanagari to Sinhala), Tibetan, the South-East Asian scripts, combining supplements. A class of every Mn/Mc/Me
# code point made the tokenizer three times slower on Hindi and took a second to build.
_MARK_BLOCKS = ((0x0300, 0x036F), (0x0483, 0x0489), (0x0591, 0x05C7), (0x0610, 0x061A), (0x064B, 0x065F),
                (0x0670, 0x0670), (0x06D6, 0x06ED), (0x0711, 0x0711), (0x0730, 0x074A), (0x07A6, 0x07B0),
                (0x08D3, 0x08FF), (0x0900, 0x0DFF), (0x0E31, 0x0E4E), (0x0EB1, 0x0ECE), (0x0F18, 0x0FBC),
                (0x102B, 0x109D), (0x17B4, 0x17D3), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF),
                (0xFE20, 0xFE2F))


def _mark_class() -> str:
    marks = [cp for a, b in _MARK_BLOCKS for cp in range(a, b + 1)
             if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me")]
    ranges: list[list[int]] = []
    for cp in marks:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    # Zero-width (non-)joiners sit inside Persian and Indic words.
    return "\u200c\u200d" + "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The token and grapheme-cluster patterns, compiled on first use (tens of milliseconds: not at import)."""
    marks = _mark_class()
    letter = rf"[^\W\d_{_CJK}{_SEA}]"
    # One pass: a number, a CJK run, a South-East Asian run, or a word of letters with their combining marks.
    token = re.compile(
        rf"(\d+(?:[.,:]\d+)*)|([{_CJK}]+)|([{_SEA}]+)|({letter}[^\W\d_{_CJK}{_SEA}{marks}]*(?:[{marks}]+{letter}*)*)"
    )
    return token, re.compile(rf"[^{marks}][{marks}]*")


def warm_up() -> None:
    """Compile the token patterns now (tens of milliseconds) rather than inside the first request with text that is
    not plain ASCII."""
    _patterns()


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs of ``run``; a run of one character is its own token."""
    if len(run) < 2:
        return [run]
    return [run[i:i + 2] for i in range(len(run) - 1)]


def script_tokens(norm: str) -> list[str]:
    """The tokens of ``norm``, text already NFKC-normalized and lower-cased (stopwords not removed)."""
    token, cluster = _patterns()
    out: list[str] = []
    for num, cjk, sea, word in token.findall(norm):
        if word:
            out.append(word)
        elif cjk:
            out.extend(bigrams(cjk))
        elif num:
            out.append(num.replace(",", "") if "," in num else num)
        else:
            clusters = cluster.findall(sea)
            out.extend(clusters if len(clusters) < 2 else
                       [clusters[i] + clusters[i + 1] for i in range(len(clusters) - 1)])
    return out


def run_bigrams(words: Iterable[str]) -> frozenset[str]:
    """The bigrams (or lone characters) of ``words``, for stopword lists of CJK words."""
    return frozenset(b for w in words for b in bigrams(w))
