"""Drop exact duplicates (same normalized text) and near duplicates (word-shingle Jaccard >= threshold).

Near-duplicate candidates come from seeded MinHash signatures with LSH banding; every candidate is confirmed with
the exact Jaccard of the two shingle sets, so a chunk is only ever dropped for a measured similarity.

How duplicates are decided:

* Chunks are visited best-first: pinned chunks, then by score (descending, unscored last), ties by input position
  (``keep="first"``: pinned, then input position). A visited chunk is dropped when it duplicates a chunk already
  *kept*; otherwise it is kept. Comparing only against kept chunks means no chaining (A~B and B~C does not drop C
  unless C~A) and the kept set never holds two chunks at or above the threshold (up to LSH misses, see below).
* Exact: the normalized text (``ragtrim.text.normalize_text``: NFKC, lower case, collapsed whitespace) is equal. Two empty chunks are exact
  duplicates of each other.
* Near: words are ``\\w+`` runs of the normalized text (punctuation is ignored); shingles are runs of
  ``shingle_words`` consecutive words; a chunk with fewer words has one shingle made of all its words; a chunk with
  no words is never a near duplicate. Shingles are hashed to 64 bits (FNV-style over crc32 word hashes), and the
  "exact" Jaccard is that of the hashed sets (a 64-bit collision would be needed to change it).
* Candidates: for up to ``PAIRWISE_MAX_CHUNKS`` chunks every kept chunk is a candidate (cheaper than MinHash at that
  size); above it, MinHash (datasketch's ``affine32`` scheme, same permutations for the same ``num_perm`` and
  ``seed``) with ``b`` bands of ``r`` rows, ``r`` the largest value for which a pair at exactly ``threshold``
  becomes a candidate with probability >= 0.995. Both paths confirm with the exact Jaccard, so they differ only in
  the rare pair LSH misses.
* Pinned chunks are never dropped; unpinned copies of them are.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import Literal

import numpy as np
import numpy.typing as npt

from ragtrim._validate import check_bool, check_choice, check_float, check_int
from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, Removal, StageOutput, TrimContext
from ragtrim.stages.base import Stage, register_stage
from ragtrim.stages.budget import priority_order
from ragtrim.tokens import TokenCounter

KeepPolicy = Literal["best", "first"]

PAIRWISE_MAX_CHUNKS = 48
"""Up to this many distinct chunks, compare each one with every kept chunk instead of building MinHash/LSH."""

LSH_MIN_RECALL_AT_THRESHOLD = 0.995
"""Band shape is chosen so that a pair exactly at the threshold becomes a candidate at least this often."""

_WORD = re.compile(r"\w+")
_U64 = np.uint64
_FNV_PRIME = _U64(0x100000001B3)
_FNV_OFFSET = _U64(0xCBF29CE484222325)
_POLY_BASE = _U64(0x9E3779B97F4A7C15)  # odd, so invertible modulo 2**64

_BLOCK_ROWS = 4096  # shingles per MinHash block: rows * num_perm * 4 bytes stays cache-sized (2 MB)
_MAX32 = np.uint32(0xFFFFFFFF)
_MAX_SET_SHINGLES = 50_000  # above this, Jaccard runs on sorted numpy arrays instead of Python sets (memory)

U32Array = npt.NDArray[np.uint32]
U64Array = npt.NDArray[np.uint64]


# -- shingling and hashing ----------------------------------------------------------------------------------------
def normalize(text: str) -> str:
    """Same result as ``ragtrim.text.normalize_text`` (NFKC, lower case, whitespace runs -> one space, stripped),
    about 5x faster: ``str.split`` and ``re``'s ``\\s`` use the same Unicode whitespace test."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


# Every ASCII character that is neither a word character (``\w``) nor whitespace becomes a space, so that
# ``translate(...).split()`` equals ``_WORD.findall`` on ASCII text at a fraction of the cost.
_ASCII_NON_WORD = str.maketrans(
    {c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_" or c.isspace())}
)


def word_text(normalized: str) -> str:
    """Normalized text with every non-word character turned into a space: its ``split()`` is the ``\\w+`` words."""
    if normalized.isascii():
        return normalized.translate(_ASCII_NON_WORD)
    return " ".join(_WORD.findall(normalized))


def words_of(normalized: str) -> list[str]:
    """The words near-duplicate detection compares: the ``\\w+`` runs of normalized text."""
    return word_text(normalized).split()


def _fmix64(h: U64Array) -> U64Array:
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
        word_hashes = _fmix64(summed ^ lengths.astype(np.uint64))
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
        full = _fmix64(h)
    out: list[U64Array] = []
    for c in range(len(parts)):
        lo, hi = first_word[c], first_word[c + 1]
        if hi - lo >= k:
            out.append(full[lo : hi - k + 1])
        elif hi > lo:  # fewer words than a shingle: one shingle of them all
            h1 = np.full(1, _FNV_OFFSET, dtype=np.uint64)
            for j in range(lo, hi):
                h1 = (h1 ^ word_hashes[j : j + 1]) * _FNV_PRIME
            out.append(_fmix64(h1))
        else:
            out.append(np.empty(0, dtype=np.uint64))
    return out


def shingle_hashes(text: str, shingle_words: int) -> U64Array:
    """Sorted unique shingle hashes of one chunk's text (normalized here), as near-duplicate detection sees it."""
    return np.unique(batch_shingle_hashes([word_text(normalize(text))], shingle_words)[0])


def jaccard(a: frozenset[int] | set[int], b: frozenset[int] | set[int]) -> float:
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


# -- MinHash and LSH ----------------------------------------------------------------------------------------------
@lru_cache(maxsize=16)
def minhash_permutations(num_perm: int, seed: int) -> tuple[U32Array, U32Array]:
    """datasketch's ``affine32`` permutation parameters ``(a, b)`` for ``MinHash(num_perm, seed)``."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    a.setflags(write=False)
    b.setflags(write=False)
    return a, b


def _fmix32(h: U32Array) -> U32Array:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def minhash_signatures(hash_sets: Sequence[U64Array], num_perm: int, seed: int) -> U32Array:
    """One MinHash signature per hash set, shape ``(len(hash_sets), num_perm)``.

    Each 64-bit shingle hash is cut to its low 32 bits and fed to datasketch's ``affine32`` scheme, so a row equals
    ``MinHash(num_perm, seed, hashfunc=identity)`` updated with those 32-bit values. Empty sets keep the all-max
    signature. Work runs in blocks of at most ``_BLOCK_ROWS`` shingles laid out permutation-major (each chunk's
    minimum is a contiguous reduction), so memory stays bounded even for a 10 MB chunk.
    """
    a, b = minhash_permutations(num_perm, seed)
    a_col, b_col = a[:, None], b[:, None]
    n = len(hash_sets)
    sig = np.full((n, num_perm), _MAX32, dtype=np.uint32)
    total = sum(len(h) for h in hash_sets)
    buf = np.empty((num_perm, min(total, _BLOCK_ROWS)), dtype=np.uint32)

    def permute(h64: U64Array) -> U32Array:
        view = buf[:, : len(h64)]
        np.multiply(a_col, _fmix32(h64.astype(np.uint32)), out=view)
        np.add(view, b_col, out=view)
        return view

    i = 0
    while i < n:
        if len(hash_sets[i]) > _BLOCK_ROWS:  # one big chunk: running minimum over sub-blocks
            for s in range(0, len(hash_sets[i]), _BLOCK_ROWS):
                np.minimum(sig[i], permute(hash_sets[i][s : s + _BLOCK_ROWS]).min(axis=1), out=sig[i])
            i += 1
            continue
        rows = 0
        j = i
        while j < n and rows + len(hash_sets[j]) <= _BLOCK_ROWS:
            rows += len(hash_sets[j])
            j += 1
        members = [t for t in range(i, j) if len(hash_sets[t])]
        if members:
            starts = np.cumsum([0] + [len(hash_sets[t]) for t in members[:-1]])
            block = permute(np.concatenate([hash_sets[t] for t in members]))
            sig[members] = np.minimum.reduceat(block, starts, axis=1).T
        i = j
    return sig


@lru_cache(maxsize=64)
def lsh_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """``(bands, rows)``: the most rows per band (fewest false candidates) whose candidate probability at
    ``threshold`` is still >= ``LSH_MIN_RECALL_AT_THRESHOLD``; ``bands * rows <= num_perm``."""
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if 1.0 - (1.0 - threshold**rows) ** bands >= LSH_MIN_RECALL_AT_THRESHOLD:
            best = (bands, rows)
    return best


def lsh_buckets(signatures: U32Array, bands: int, rows: int, seed: int) -> list[list[int]]:
    """For each signature, the ids of the LSH buckets it shares with at least one other signature."""
    n = signatures.shape[0]
    if n == 0:
        return []
    gen = np.random.RandomState(seed)
    mult = gen.randint(1, 1 << 62, rows, dtype=np.uint64) * _U64(2) + _U64(1)
    ids = np.empty((n, bands), dtype=np.int64)
    offset = 0
    for band in range(bands):
        block = signatures[:, band * rows : (band + 1) * rows].astype(np.uint64)
        keys = _fmix64((block * mult).sum(axis=1, dtype=np.uint64))
        _, inverse = np.unique(keys, return_inverse=True)
        ids[:, band] = inverse.reshape(-1) + offset
        offset += int(inverse.max()) + 1
    shared = np.bincount(ids.reshape(-1), minlength=offset)[ids] > 1
    return [ids[i][shared[i]].tolist() for i in range(n)]


# -- the stage ----------------------------------------------------------------------------------------------------
@register_stage
class DuplicateFilter(Stage):
    """Drop exact and near-duplicate chunks, keeping the best-scored (or first) copy.

    Parameters:
        threshold: word-shingle Jaccard at or above which two chunks are near duplicates (0 < threshold <= 1).
        num_perm: MinHash permutations (more: fewer LSH misses, slower).
        shingle_words: words per shingle.
        seed: seed of the MinHash permutations and LSH band hashing (same seed, same result).
        exact: drop chunks whose normalized text equals a kept chunk's.
        near: drop chunks whose shingle Jaccard with a kept chunk is >= ``threshold``.
        keep: ``"best"`` keeps the highest-scored copy (unscored count as worst; ties by position);
            ``"first"`` keeps the earliest copy.

    Each dropped chunk gets a removal with reason ``exact_duplicate`` or ``near_duplicate``, ``kept_id`` naming the
    chunk it duplicated, and a detail such as ``"jaccard 0.91 with chunk 17"``. Output keeps the input order.
    """

    name = "dedup"

    def __init__(
        self,
        *,
        threshold: float = 0.8,
        num_perm: int = 128,
        shingle_words: int = 3,
        seed: int = 1,
        exact: bool = True,
        near: bool = True,
        keep: KeepPolicy = "best",
    ) -> None:
        check_float("threshold", threshold, minimum=0.0, maximum=1.0, min_exclusive=True)
        check_int("num_perm", num_perm, minimum=8, maximum=4096)
        check_int("shingle_words", shingle_words, minimum=1, maximum=32)
        check_int("seed", seed, minimum=0, maximum=2**32 - 1)
        check_bool("exact", exact)
        check_bool("near", near)
        check_choice("keep", keep, ("best", "first"))
        if not exact and not near:
            raise ConfigError("exact and near are both False, so the stage would do nothing; set one of them True")
        self.threshold = threshold
        self.num_perm = num_perm
        self.shingle_words = shingle_words
        self.seed = seed
        self.exact = exact
        self.near = near
        self.keep = keep

    def _visit_order(self, chunks: tuple[Chunk, ...]) -> list[int]:
        order = priority_order(chunks, "score" if self.keep == "best" else "position")
        return sorted(order, key=lambda i: not chunks[i].pinned)  # stable: pinned first, order kept within

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        n = len(chunks)
        order = self._visit_order(chunks)
        dropped: dict[int, Removal] = {}

        # Exact duplicates first: they need no shingles.
        norms = [normalize(c.text) for c in chunks]
        exact_kept: dict[str, int] = {}
        survivors: list[int] = []  # visit order, exact duplicates removed
        for i in order:
            first = exact_kept.get(norms[i]) if self.exact else None
            if first is not None and not chunks[i].pinned:
                kept = chunks[first]
                dropped[i] = Removal(chunks[i].id, self.name, "exact_duplicate", chunks[i].token_count or 0,
                                     f"same normalized text as chunk {kept.id}", kept_id=kept.id)
                continue
            exact_kept.setdefault(norms[i], i)
            survivors.append(i)

        method = "none"
        if self.near and len(survivors) > 1:
            method = self._near(chunks, norms, survivors, dropped)
        out = tuple(c for i, c in enumerate(chunks) if i not in dropped)
        removals = tuple(dropped[i] for i in sorted(dropped))
        exact_n = sum(r.reason == "exact_duplicate" for r in removals)
        return StageOutput(
            context.with_chunks(out),
            removals,
            info={"exact_duplicates": exact_n, "near_duplicates": len(removals) - exact_n,
                  "near_method": method, "chunks_in": n},
        )

    def _near(self, chunks: tuple[Chunk, ...], norms: list[str], survivors: list[int],
              dropped: dict[int, Removal]) -> str:
        raw = batch_shingle_hashes([word_text(norms[i]) for i in survivors], self.shingle_words)
        hashes = dict(zip(survivors, raw, strict=True))
        exact_sets: dict[int, frozenset[int] | U64Array] = {}

        def shingles(t: int) -> frozenset[int] | U64Array:
            got = exact_sets.get(t)
            if got is None:
                h = hashes[t]
                # Python sets are fastest to intersect; sorted arrays keep a 10 MB chunk's set small.
                got = exact_sets[t] = np.unique(h) if len(h) > _MAX_SET_SHINGLES else frozenset(h.tolist())
            return got

        def similarity(i: int, j: int) -> float:
            a, b = shingles(i), shingles(j)
            small, large = sorted((len(a), len(b)))
            if small < self.threshold * large:  # Jaccard <= small/large: cannot reach the threshold
                return 0.0
            if isinstance(a, frozenset) and isinstance(b, frozenset):
                return jaccard(a, b)
            return sorted_jaccard(np.unique(np.fromiter(a, np.uint64)) if isinstance(a, frozenset) else a,
                                  np.unique(np.fromiter(b, np.uint64)) if isinstance(b, frozenset) else b)

        small_batch = len(survivors) <= PAIRWISE_MAX_CHUNKS
        rank = {i: r for r, i in enumerate(survivors)}
        # Candidate sources. Small batches: an inverted index shingle -> kept chunks gives every kept chunk that
        # shares a shingle, with the exact intersection size (all pairs, no MinHash). Big batches: LSH buckets.
        index: dict[int, list[int]] = {}
        giants: list[int] = []  # kept chunks too big for the index; compared directly (size bound prunes most)
        buckets: dict[int, list[int]] = {}
        bucket_ids: dict[int, list[int]] = {}
        if not small_batch:
            bands, rows = lsh_bands(self.threshold, self.num_perm)
            sig = minhash_signatures([hashes[i] for i in survivors], self.num_perm, self.seed)
            bucket_ids = dict(zip(survivors, lsh_buckets(sig, bands, rows, self.seed), strict=True))

        def candidates(i: int) -> list[tuple[int, float]]:
            if not small_batch:
                found: set[int] = set()
                for bid in bucket_ids[i]:
                    found.update(buckets.get(bid, ()))
                return [(j, similarity(i, j)) for j in found]
            own = shingles(i)
            if not isinstance(own, frozenset):  # a giant chunk: compare with every kept chunk
                return [(j, similarity(i, j)) for j in kept]
            shared = Counter(chain.from_iterable(filter(None, map(index.get, own))))
            out = [(j, c / (len(own) + len(shingles(j)) - c)) for j, c in shared.items()]
            return out + [(j, similarity(i, j)) for j in giants]

        kept: list[int] = []
        for i in survivors:
            if not len(hashes[i]):
                kept.append(i)
                continue
            best_j, best_sim = -1, -1.0
            for j, sim in candidates(i):
                # Ties go to the earliest-visited kept chunk.
                if sim >= self.threshold and (sim > best_sim or (sim == best_sim and rank[j] < rank[best_j])):
                    best_j, best_sim = j, sim
            if best_j >= 0 and not chunks[i].pinned:
                kept_chunk = chunks[best_j]
                dropped[i] = Removal(chunks[i].id, self.name, "near_duplicate", chunks[i].token_count or 0,
                                     f"jaccard {best_sim:.2f} with chunk {kept_chunk.id}", kept_id=kept_chunk.id)
                continue
            kept.append(i)
            if not small_batch:
                for bid in bucket_ids[i]:
                    buckets.setdefault(bid, []).append(i)
                continue
            own = shingles(i)
            if isinstance(own, frozenset):
                for sh in own:
                    index.setdefault(sh, []).append(i)
            else:
                giants.append(i)
        return "exact_pairwise" if small_batch else "minhash_lsh"
