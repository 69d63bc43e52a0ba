"""The shingle hashing of ``ragtrim.dedup.shingles`` before it worked in bounded pieces (one vectorized pass over each
group, whatever its size), kept to show that the bounded version gives the same hashes for ordinary text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragtrim.dedup.shingles import U64Array, fmix64

_U64 = np.uint64
_FNV_PRIME = _U64(0x100000001B3)
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_POLY_BASE = _U64(0x9E3779B97F4A7C15)


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


