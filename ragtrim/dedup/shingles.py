"""Words, word and character shingles and their 64-bit hashes, template lines, and Jaccard similarity.

What near-duplicate detection (``ragtrim.dedup.engine``, the ``DuplicateFilter`` stage) compares; pure functions.
A line written mostly in Han or Kana (no spaces between words) is shingled by characters, any other line by words.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

from ragtrim.dedup import pieces
from ragtrim.text.scripts import SPACELESS_CLASS, is_spaceless
from ragtrim.text.sentences import normalize_text

_WORD = re.compile(r"\w+")
# On a spaceless line every Han/Kana character is a token; runs of other word characters stay words.
_CHAR_TOKEN = re.compile(f"[{SPACELESS_CLASS}]|[^\\W{SPACELESS_CLASS}]+")
_CHAR_CUT = re.compile(f"[{SPACELESS_CLASS}]|\\W")  # no token of _CHAR_TOKEN continues across one

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
    """NFKC and lower case: ``" ".join(nfkc_lower(t).split()) == normalize_text(t)``; its lines are the lines (a long
    text a piece at a time, ``ragtrim.dedup.pieces``)."""
    return pieces.nfkc_lower(text)


# Every ASCII character that is neither a word character (``\w``) nor whitespace becomes a space, so that
# ``translate(...).split()`` equals ``_WORD.findall`` on ASCII text at a fraction of the cost.
_ASCII_NON_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})


def word_text(normalized: str) -> str:
    """Normalized text with every non-word character turned into a space: its ``split()`` is the ``\\w+`` words."""
    if normalized.isascii():
        return pieces.translated(normalized, _ASCII_NON_WORD)
    return pieces.tokens_joined(normalized, _WORD)


def words_of(normalized: str) -> list[str]:
    """The words near-duplicate detection compares: the ``\\w+`` runs of normalized text."""
    if normalized.isascii():
        return normalized.translate(_ASCII_NON_WORD).split()
    return _WORD.findall(normalized)


def char_text(line: str) -> str:
    """A line's tokens for character shingles, joined by spaces: every Han/Kana character is a token of its own,
    every run of other word characters (Latin, digits, Hangul...) one token."""
    return pieces.tokens_joined(line, _CHAR_TOKEN, _CHAR_CUT)


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
"""Characters of text hashed per vectorized pass (a text longer than this is cut at spaces into such segments):
the temporary arrays, about 40 bytes per byte, stay cache-sized, and no numpy call holds the GIL for long (a text
of megabytes hashed in a single pass holds it for most of a second and takes hundreds of MiB)."""
_FOLD_WORDS = 1 << 17
"""Word hashes folded into shingle hashes per vectorized pass."""
LONG_WORD_BYTES = 1 << 10
"""A word of more UTF-8 bytes than this is hashed whole by BLAKE2b (8 bytes, streamed a slice at a time) instead of
the vectorized polynomial hash, whose arrays grow with the word: the same word always takes the same hash, so every
Jaccard value is the same (up to 64-bit collisions, as for any word), and a run without spaces costs no memory."""
_LONG_WORD_SLICE = 1 << 20  # characters encoded per step when a long word is hashed from a str
_LONG_WORD_PERSON = b"ragtrim-word"
_NOT_SPACE = re.compile(r"[^ ]")


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


def _long_word_hash(data: bytes | memoryview) -> int:
    # hashlib releases the GIL while it hashes more than 2 KiB
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=_LONG_WORD_PERSON).digest(), "little")


def _long_word_hash_of_text(word: str) -> int:
    """``_long_word_hash`` of ``word``'s UTF-8 bytes, encoded a slice at a time (a 12 MB word is never copied)."""
    h = hashlib.blake2b(digest_size=8, person=_LONG_WORD_PERSON)
    for start in range(0, len(word), _LONG_WORD_SLICE):
        h.update(word[start:start + _LONG_WORD_SLICE].encode("utf-8"))
    return int.from_bytes(h.digest(), "little")


def batch_shingle_hashes(word_texts: Sequence[str], shingle_words: int) -> list[U64Array]:
    """64-bit hashes of the word shingles of each text (``word_text`` output), in shingle order, not deduplicated.

    Texts are hashed in groups of about ``_GROUP_BYTES`` so temporary arrays stay cache-sized; a longer text is cut
    at spaces into segments of that size and its words folded in blocks (``_long_text_shingle_hashes``), so memory
    and the time any one numpy call holds the GIL are bounded whatever the text. See ``_shingle_hashes_group`` for
    the hashing itself.
    """
    out: list[U64Array] = []
    group: list[str] = []
    size = 0
    for text in word_texts:
        if len(text) > _GROUP_BYTES:
            if group:
                out.extend(_shingle_hashes_group(group, shingle_words))
                group, size = [], 0
            out.append(_long_text_shingle_hashes(text, shingle_words))
            continue
        if group and size + len(text) > _GROUP_BYTES:
            out.extend(_shingle_hashes_group(group, shingle_words))
            group, size = [], 0
        group.append(text)
        size += len(text) + 1
    if group:
        out.extend(_shingle_hashes_group(group, shingle_words))
    return out


def _word_hashes(parts: Sequence[bytes]) -> tuple[U64Array, list[int]]:
    """The hash of every word of ``parts`` (UTF-8 texts, words separated by spaces) in one vectorized pass, and the
    position of each part's first word (with one more entry: the number of words).

    A word's hash is a polynomial hash of its UTF-8 bytes (a segmented sum, O(bytes) whatever the word lengths) and
    its length, finalized with MurmurHash3's fmix64; a word of more than ``LONG_WORD_BYTES`` bytes is hashed by
    BLAKE2b instead (``_long_word_hash``)."""
    joined = b" ".join(parts)
    data = np.frombuffer(joined, dtype=np.uint8)
    is_word = np.concatenate(([False], data != 0x20, [False]))
    edges = np.flatnonzero(is_word[1:] != is_word[:-1])
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    word_hashes = np.empty(len(lengths), dtype=np.uint64)
    if len(lengths):
        long = lengths > LONG_WORD_BYTES
        any_long = bool(long.any())
        short = ~long
        mask = is_word[1:-1]
        if any_long:
            mask = mask.copy()
            for s, e in zip(starts[long].tolist(), ends[long].tolist(), strict=True):
                mask[s:e] = False
        s_lengths = lengths[short] if any_long else lengths
        if len(s_lengths):
            word_bytes = data[mask].astype(np.uint64)
            offsets = np.cumsum(s_lengths) - s_lengths
            position = np.arange(len(word_bytes)) - np.repeat(offsets, s_lengths)  # byte position inside its word
            terms = word_bytes * _powers(int(s_lengths.max()))[position]
            summed: U64Array = np.add.reduceat(terms, offsets)
            hashed = fmix64(summed ^ s_lengths.astype(np.uint64))
            if any_long:
                word_hashes[short] = hashed
            else:
                word_hashes = hashed
        if any_long:
            view = memoryview(joined)
            for i, s, e in zip(np.flatnonzero(long).tolist(), starts[long].tolist(), ends[long].tolist(), strict=True):
                word_hashes[i] = _long_word_hash(view[s:e])
    text_starts = np.cumsum([0] + [len(p) + 1 for p in parts])
    first_word: list[int] = np.searchsorted(starts, text_starts).tolist()
    return word_hashes, first_word


def _fold(word_hashes: U64Array, shingle_words: int) -> U64Array:
    """Shingle hashes of one run of word hashes: an FNV-style fold of each ``shingle_words`` consecutive words,
    finalized with fmix64, in blocks of ``_FOLD_WORDS``; fewer words than a shingle (but at least one) give a single
    shingle of them all, no words none."""
    n, k = len(word_hashes), shingle_words
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    if n < k:
        h1 = np.full(1, _FNV_OFFSET, dtype=np.uint64)
        for j in range(n):
            h1 = (h1 ^ word_hashes[j : j + 1]) * _FNV_PRIME
        return fmix64(h1)
    m = n - k + 1
    out = np.empty(m, dtype=np.uint64)
    for lo in range(0, m, _FOLD_WORDS):
        hi = min(m, lo + _FOLD_WORDS)
        h = np.full(hi - lo, _FNV_OFFSET, dtype=np.uint64)
        for j in range(k):
            h = (h ^ word_hashes[lo + j : hi + j]) * _FNV_PRIME
        out[lo:hi] = fmix64(h)
    return out


def _shingle_hashes_group(word_texts: Sequence[str], shingle_words: int) -> list[U64Array]:
    """Shingle hashes of each text of a group (at most about ``_GROUP_BYTES`` in all), computed in one vectorized
    pass: word hashes (``_word_hashes``) folded into shingles over the whole group, then cut per text (a shingle
    never spans two texts). A text with fewer than ``shingle_words`` words (but at least one) has a single shingle of
    all its words; a text without words has none."""
    parts = [t.encode("utf-8") for t in word_texts]
    word_hashes, first_word = _word_hashes(parts)
    k = shingle_words
    full = _fold(word_hashes, k) if len(word_hashes) >= k else np.empty(0, dtype=np.uint64)
    out: list[U64Array] = []
    for c in range(len(parts)):
        lo, hi = first_word[c], first_word[c + 1]
        if hi - lo >= k:
            out.append(full[lo : hi - k + 1])
        else:
            out.append(_fold(word_hashes[lo:hi], k))
    return out


def _segments(text: str) -> Iterator[str]:
    """``text`` (words separated by spaces) cut at spaces into pieces of at most ``_GROUP_BYTES`` characters, but
    for a word longer than that, which is a piece of its own (no space in it)."""
    i, n = 0, len(text)
    while i < n:
        end = i + _GROUP_BYTES
        if end >= n:
            yield text[i:]
            return
        cut = text.rfind(" ", i, end)
        if cut > i:
            yield text[i:cut]
            i = cut + 1
            continue
        found = _NOT_SPACE.search(text, i, end)  # the window holds no space but at i: skip the spaces...
        if found is None:
            i = end
            continue
        start = found.start()  # ...to the word that runs past the window
        cut = text.find(" ", start)
        cut = n if cut < 0 else cut
        yield text[start:cut]
        i = cut + 1


def _long_text_shingle_hashes(text: str, shingle_words: int) -> U64Array:
    """``_shingle_hashes_group([text])[0]`` for a text longer than ``_GROUP_BYTES``, with bounded passes: word
    hashes per segment (``_segments``; a word longer than a segment streamed through ``_long_word_hash_of_text``),
    each folded with the last ``shingle_words - 1`` words of the segments before it straight into the result, so
    nothing but the text's shingles is held at once (sized by its spaces, an upper bound of its words)."""
    k = shingle_words
    out = np.empty(max(1, text.count(" ") + 2 - k), dtype=np.uint64)
    filled = 0
    carry = np.empty(0, dtype=np.uint64)  # the last k - 1 words so far
    for segment in _segments(text):
        if len(segment) > max(_GROUP_BYTES, LONG_WORD_BYTES):  # one word, longer than a segment
            words = np.array([_long_word_hash_of_text(segment)], dtype=np.uint64)
        else:
            words = _word_hashes([segment.encode("utf-8")])[0]
        if not len(words):
            continue
        run = np.concatenate([carry, words]) if len(carry) else words
        if len(run) >= k:
            folded = _fold(run, k)
            out[filled:filled + len(folded)] = folded
            filled += len(folded)
        carry = run[max(0, len(run) - (k - 1)):] if k > 1 else np.empty(0, dtype=np.uint64)
    if not filled:  # fewer words than a shingle (or none) in the whole text
        return _fold(carry, k)
    return out[:filled]


def shingle_hashes(text: str, shingle_words: int) -> U64Array:
    """Sorted unique shingle hashes of one chunk's text (normalized here), as near-duplicate detection sees it."""
    return sorted_unique(batch_shingle_hashes([word_text(normalize(text))], shingle_words)[0])


def sorted_unique(values: U64Array, *, in_place: bool = False) -> U64Array:
    """The distinct values of a 64-bit hash array, sorted: a sort (of ``values`` itself with ``in_place``, which
    saves a copy of a big set), then a mask. numpy 2.4's ``np.unique`` hashes 64-bit integers instead, which takes
    seconds for a million distinct shingle hashes while holding the GIL; the sort takes milliseconds and releases
    it."""
    if in_place:
        values.sort()
        ordered = values
    else:
        ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


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
