"""Words, word and character shingles and their 64-bit hashes, template lines, and Jaccard similarity.

What near-duplicate detection (``ragtrim.dedup.engine``, the ``DuplicateFilter`` stage) compares; pure functions.
A line written mostly in Han or Kana (no spaces between words) is shingled by characters, any other line by words.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

from ragtrim.text.scripts import SPACELESS_CLASS, is_spaceless
from ragtrim.text.sentences import normalize_text

_WORD = re.compile(r"\w+")
# On a spaceless line every Han/Kana character is a token; runs of other word characters stay words.
_CHAR_TOKEN = re.compile(f"[{SPACELESS_CLASS}]|[^\\W{SPACELESS_CLASS}]+")

SHINGLE_CHARS = 6
"""Characters per shingle on Han/Kana lines (``DuplicateFilter(shingle_chars=...)``'s default): chosen on the
development texts of ``ragtrim-bench dedup scripts`` (docs/dedup.md, "Text without spaces")."""

SPACELESS_CHARS_PER_WORD = 2
"""How many Han/Kana characters count as one word where a limit is in words (``template_max_words``): a Japanese
translation of an English text had 2.3 characters per English word, Chinese fewer; rounded down, so a limit in words
admits no longer a Han/Kana line than an English one."""
_U64 = np.uint64
_FNV_PRIME = _U64(0x100000001B3)
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_POLY_BASE = _U64(0x9E3779B97F4A7C15)  # odd, so invertible modulo 2**64

U64Array = npt.NDArray[np.uint64]


def normalize(text: str) -> str:
    """``ragtrim.text.sentences.normalize_text``: NFKC, lower case, whitespace runs -> one space, stripped."""
    return normalize_text(text)


def nfkc_lower(text: str) -> str:
    """NFKC and lower case: ``" ".join(nfkc_lower(t).split()) == normalize_text(t)``; its lines are the lines."""
    return unicodedata.normalize("NFKC", text).lower()


# Every ASCII character that is neither a word character (``\w``) nor whitespace becomes a space, so that
# ``translate(...).split()`` equals ``_WORD.findall`` on ASCII text at a fraction of the cost.
_ASCII_NON_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})


def word_text(normalized: str) -> str:
    """Normalized text with every non-word character turned into a space: its ``split()`` is the ``\\w+`` words."""
    if normalized.isascii():
        return normalized.translate(_ASCII_NON_WORD)
    return " ".join(_WORD.findall(normalized))


def words_of(normalized: str) -> list[str]:
    """The words near-duplicate detection compares: the ``\\w+`` runs of normalized text."""
    if normalized.isascii():
        return normalized.translate(_ASCII_NON_WORD).split()
    return _WORD.findall(normalized)


def char_text(line: str) -> str:
    """A line's tokens for character shingles, joined by spaces: every Han/Kana character is a token of its own,
    every run of other word characters (Latin, digits, Hangul...) one token."""
    return " ".join(_CHAR_TOKEN.findall(line))


def line_tokens(line: str) -> tuple[str, bool]:
    """The tokens near-duplicate detection shingles on one line (normalized), joined by spaces, and whether they are
    characters (a line whose letters are mostly Han/Kana, ``ragtrim.text.scripts.is_spaceless``) or words."""
    if is_spaceless(line):
        return char_text(line), True
    return word_text(line), False


def line_words(text: str) -> list[list[str]]:
    """The tokens of each line of ``text`` (NFKC, lower-cased) that has any (words, or characters on a Han/Kana
    line): shingles never cross these lines."""
    return [w for w in (line_tokens(line)[0].split() for line in nfkc_lower(text).splitlines()) if w]


def word_shingles(words: list[str], shingle_words: int) -> Iterable[tuple[str, ...]]:
    """Runs of ``shingle_words`` consecutive words of one line; a shorter line gives one shingle of all its words."""
    if len(words) < shingle_words:
        return (tuple(words),)
    return zip(*(words[j:] for j in range(shingle_words)))


def line_shingles(text: str, shingle_words: int, shingle_chars: int = SHINGLE_CHARS) -> set[tuple[str, ...]]:
    """The shingles of ``text`` as near-duplicate detection forms them (no template discounting): each line shingled
    on its own, by ``shingle_words`` words or, on a Han/Kana line, by ``shingle_chars`` characters; a line shorter
    than that gives one shingle of all its tokens."""
    out: set[tuple[str, ...]] = set()
    for line in nfkc_lower(text).splitlines():
        tokens, chars = line_tokens(line)
        if tokens and not tokens.isspace():
            out.update(word_shingles(tokens.split(), shingle_chars if chars else shingle_words))
    return out


def template_lines(chunk_lines: Iterable[Sequence[Sequence[str]]], *, min_chunks: int,
                   max_words: int) -> frozenset[tuple[str, ...]]:
    """Lines (word tuples) of at most ``max_words`` words found in at least ``min_chunks`` of the given chunks
    (each chunk's lines as word lists; a line counts once per chunk)."""
    counts: Counter[tuple[str, ...]] = Counter()
    for lines in chunk_lines:
        counts.update({tuple(w) for w in lines if len(w) <= max_words})
    return frozenset(line for line, n in counts.items() if n >= min_chunks)


def fmix64(h: U64Array) -> U64Array:
    """MurmurHash3's 64-bit finalizer, element-wise (wrapping uint64 arithmetic)."""
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> _U64(33))


_POWERS: U64Array = np.ones(1, dtype=np.uint64)
_POWERS_CACHE_MAX = 1 << 16
_GROUP_BYTES = 1 << 17


def _powers(n: int) -> U64Array:
    """``P**t`` modulo 2**64 for ``t < n``; cached (words are short, so n rarely exceeds a few dozen)."""
    global _POWERS
    cached = _POWERS
    if len(cached) >= n:
        return cached
    size = max(n, 2 * len(cached), 64)
    table = np.full(size, _POLY_BASE, dtype=np.uint64)
    table[0] = 1
    table = np.cumprod(table, dtype=np.uint64)
    if size <= _POWERS_CACHE_MAX:
        _POWERS = table  # one assignment: other threads see the old or the new table, both valid
    return table


def batch_shingle_hashes(word_texts: Sequence[str], shingle_words: int) -> list[U64Array]:
    """64-bit hashes of the word shingles of each text (``word_text`` output), in shingle order, not deduplicated.

    Texts are hashed in groups of about ``_GROUP_BYTES`` so temporary arrays stay cache-sized; see
    ``_shingle_hashes_group`` for the hashing itself.
    """
    out: list[U64Array] = []
    group: list[str] = []
    size = 0
    for text in word_texts:
        if group and size + len(text) > _GROUP_BYTES:
            out.extend(_shingle_hashes_group(group, shingle_words))
            group, size = [], 0
        group.append(text)
        size += len(text) + 1
    if group:
        out.extend(_shingle_hashes_group(group, shingle_words))
    return out


def _shingle_hashes_group(word_texts: Sequence[str], shingle_words: int) -> list[U64Array]:
    """Shingle hashes of each text, computed in one vectorized pass.

    All texts are hashed in one vectorized pass: a word's hash is a polynomial hash of its UTF-8 bytes (a segmented
    sum, O(bytes) whatever the word lengths) and its length, finalized with MurmurHash3's fmix64; a shingle's hash
    is an FNV-style fold of its word hashes. A text with fewer than ``shingle_words`` words (but at least one) has
    a single shingle of all its words; a text without words has none.
    """
    parts = [t.encode("utf-8") for t in word_texts]
    data = np.frombuffer(b" ".join(parts), dtype=np.uint8)
    is_word = np.concatenate(([False], data != 0x20, [False]))
    edges = np.flatnonzero(is_word[1:] != is_word[:-1])
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    word_hashes = np.empty(0, dtype=np.uint64)
    if len(lengths):
        word_bytes = data[is_word[1:-1]].astype(np.uint64)
        offsets = np.cumsum(lengths) - lengths
        position = np.arange(len(word_bytes)) - np.repeat(offsets, lengths)  # byte position inside its word
        terms = word_bytes * _powers(int(lengths.max()))[position]
        summed: U64Array = np.add.reduceat(terms, offsets)
        word_hashes = fmix64(summed ^ lengths.astype(np.uint64))
    text_starts = np.cumsum([0] + [len(p) + 1 for p in parts])
    first_word = np.searchsorted(starts, text_starts).tolist()

    n_words = len(word_hashes)
    k = shingle_words
    m = n_words - k + 1
    full = np.empty(0, dtype=np.uint64)
    if m > 0:
        h = np.full(m, _FNV_OFFSET, dtype=np.uint64)
        for j in range(k):
            h = (h ^ word_hashes[j : j + m]) * _FNV_PRIME
        full = fmix64(h)
    out: list[U64Array] = []
    for c in range(len(parts)):
        lo, hi = first_word[c], first_word[c + 1]
        if hi - lo >= k:
            out.append(full[lo : hi - k + 1])
        elif hi > lo:  # fewer words than a shingle: one shingle of them all
            h1 = np.full(1, _FNV_OFFSET, dtype=np.uint64)
            for j in range(lo, hi):
                h1 = (h1 ^ word_hashes[j : j + 1]) * _FNV_PRIME
            out.append(fmix64(h1))
        else:
            out.append(np.empty(0, dtype=np.uint64))
    return out


def shingle_hashes(text: str, shingle_words: int) -> U64Array:
    """Sorted unique shingle hashes of one chunk's text (normalized here), as near-duplicate detection sees it."""
    return np.unique(batch_shingle_hashes([word_text(normalize(text))], shingle_words)[0])


def jaccard(a: AbstractSet[Hashable], b: AbstractSet[Hashable]) -> float:
    """|a & b| / |a | b| (0.0 when both are empty)."""
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def sorted_jaccard(a: U64Array, b: U64Array) -> float:
    """Jaccard of two sorted unique arrays (for big sets, where Python sets would cost too much memory)."""
    if not len(a) and not len(b):
        return 0.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)
