"""Drop exact duplicates (same normalized text) and near duplicates (word-shingle Jaccard >= threshold).

Near-duplicate candidates come from seeded MinHash signatures with LSH banding; every candidate is confirmed with
the exact Jaccard of the two shingle sets, so a chunk is only ever dropped for a measured similarity.

How duplicates are decided:

* Chunks are visited best-first: pinned chunks, then by score (descending, unscored last), ties by input position
  (``keep="first"``: pinned, then input position). A visited chunk is dropped when it duplicates a chunk already
  *kept*; otherwise it is kept. Comparing only against kept chunks means no chaining (A~B and B~C does not drop C
  unless C~A) and the kept set never holds two chunks at or above the threshold (up to LSH misses, see below).
* Exact: the normalized text (``ragtrim.text.normalize_text``: NFKC, lower case, collapsed whitespace) is equal. Two
  empty chunks are exact duplicates of each other. Template lines (below) play no part here.
* Near: words are ``\\w+`` runs of the normalized text (punctuation is ignored). Shingles never cross a line break:
  each line (``str.splitlines``) is shingled on its own into runs of ``shingle_words`` consecutive words, and a line
  with fewer words contributes one shingle of all its words; a chunk with no words is never a near duplicate.
* Template lines (site-template detection): a line whose words recur verbatim in at least ``template_min_chunks``
  distinct chunks of the batch (distinct normalized texts, so exact copies do not inflate the count) and that has
  at most ``template_max_words`` words is boilerplate ("Read more", "Skip to main content"). Its shingles are left
  out of the sets near-duplicate detection compares (the text itself is untouched), so two copies of a passage
  with different headers and footers from a shared pool are judged on their content. A chunk whose lines are all
  template lines keeps its full shingle set. A line that occurs once in the batch is always content.
* Shingle identity: in small batches (pure Python path) the hash of the word tuple; otherwise a 64-bit vectorized
  hash (FNV-style over per-word hashes). Either way only a 64-bit collision could change a Jaccard value.
* Candidates: for up to ``PAIRWISE_MAX_CHUNKS`` chunks every kept chunk is a candidate (an inverted index gives the
  exact intersection sizes); above it, MinHash (datasketch's ``affine32`` scheme, same permutations for the same
  ``num_perm`` and ``seed``) with ``b`` bands of ``r`` rows, ``r`` the largest value for which a pair at exactly
  ``threshold`` becomes a candidate with probability >= 0.995. Both paths confirm with the exact Jaccard, so they
  differ only in the rare pair LSH misses.
* Caps: with LSH, each bucket remembers at most ``LSH_MAX_BUCKET_CHUNKS`` kept chunks and each chunk is checked
  against at most ``LSH_MAX_CANDIDATES`` of them, so candidate generation stays linear on streams of similar but
  distinct chunks. Ordinary batches never reach the caps; when they bind, pairs go unchecked (the chunks concerned
  are counted in ``info["near_candidates_capped"]``), which can only keep a duplicate, never drop a chunk.
* Pinned chunks are never dropped; unpinned copies of them are.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain
from typing import ClassVar, Literal, cast, get_args

import numpy as np
import numpy.typing as npt

from ragtrim._validate import Boolean, Constraints, Interval, Options
from ragtrim.components import component
from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, Removal, StageOutput, TrimContext
from ragtrim.stages.base import Stage, register_stage
from ragtrim.stages.budget import priority_order
from ragtrim.text import normalize_text
from ragtrim.tokens import TokenCounter

KeepPolicy = Literal["best", "first"]

PAIRWISE_MAX_CHUNKS = 48
"""Up to this many distinct chunks, compare each one with every kept chunk instead of building MinHash/LSH."""

PYTHON_PATH_MAX_CHARS = 500_000
"""Up to this many characters in a small batch, shingles are Python sets built without numpy (no array set-up cost);
above it, the vectorized 64-bit hashing keeps memory bounded."""

LSH_MIN_RECALL_AT_THRESHOLD = 0.995
"""Band shape is chosen so that a pair exactly at the threshold becomes a candidate at least this often."""

LSH_MAX_BUCKET_CHUNKS = 32
"""An LSH bucket remembers at most this many kept chunks (the first ones visited). Similar but distinct chunks (one
text with a few words changed, thousands of times) share buckets, and without a cap every chunk met every kept one:
4,000 such chunks took 34 s, 8,000 took 139 s."""

LSH_MAX_CANDIDATES = 32
"""At most this many kept chunks per chunk get the exact Jaccard check: those sharing the most LSH bands with it
(an estimate of similarity; ties by visit order). A chunk is dropped only for a measured Jaccard, so the caps can
miss a near duplicate on such streams, never drop a chunk wrongly. ``info["near_candidates_capped"]`` counts the
chunks whose comparisons a cap cut short."""

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
    """``ragtrim.text.normalize_text``: NFKC, lower case, whitespace runs -> one space, stripped."""
    return normalize_text(text)


def _nfkc_lower(text: str) -> str:
    """NFKC and lower case: ``" ".join(_nfkc_lower(t).split()) == normalize_text(t)``; its lines are the lines."""
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


def line_words(text: str) -> list[list[str]]:
    """The words of each line of ``text`` (NFKC, lower-cased) that has any: shingles never cross these lines."""
    return [w for w in map(words_of, _nfkc_lower(text).splitlines()) if w]


def _line_shingles(words: list[str], shingle_words: int) -> Iterable[tuple[str, ...]]:
    if len(words) < shingle_words:
        return (tuple(words),)
    return zip(*(words[j:] for j in range(shingle_words)))


def line_shingles(text: str, shingle_words: int) -> set[tuple[str, ...]]:
    """The word shingles of ``text`` as near-duplicate detection forms them (no template discounting): each line
    shingled on its own, a line shorter than ``shingle_words`` giving one shingle of all its words."""
    return {sh for words in line_words(text) for sh in _line_shingles(words, shingle_words)}


def template_lines(chunk_lines: Iterable[Sequence[Sequence[str]]], *, min_chunks: int,
                   max_words: int) -> frozenset[tuple[str, ...]]:
    """Lines (word tuples) of at most ``max_words`` words found in at least ``min_chunks`` of the given chunks
    (each chunk's lines as word lists; a line counts once per chunk)."""
    counts: Counter[tuple[str, ...]] = Counter()
    for lines in chunk_lines:
        counts.update({tuple(w) for w in lines if len(w) <= max_words})
    return frozenset(line for line, n in counts.items() if n >= min_chunks)


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
ShingleSet = frozenset[int] | set[int] | U64Array


@register_stage
@component
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
        template_min_chunks: a line found in at least this many distinct chunks of the batch (and no longer than
            ``template_max_words``) is a template line, left out of near-duplicate comparison; ``None`` disables.
        template_max_words: longest line (in words) that can be a template line.

    Each dropped chunk gets a removal with reason ``exact_duplicate`` or ``near_duplicate``, ``kept_id`` naming the
    chunk it duplicated, and a detail such as ``"jaccard 0.91 with chunk 17"`` (plus ``", 2 template lines not
    compared"`` when template lines of either chunk were left out). Output keeps the input order.
    """

    name = "dedup"

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "threshold": [Interval(float, 0.0, 1.0, closed="right")],
        "num_perm": [Interval(int, 8, 4096)],
        "shingle_words": [Interval(int, 1, 32)],
        "seed": [Interval(int, 0, 2**32 - 1)],
        "exact": [Boolean()],
        "near": [Boolean()],
        "keep": [Options(get_args(KeepPolicy))],
        # 2 would call any line shared by a pair of chunks "template": exactly the evidence near-duplicate
        # detection needs, so the smallest useful value is 3.
        "template_min_chunks": [Interval(int, 3, None), None],
        "template_max_words": [Interval(int, 1, None)],
    }

    threshold: float = 0.8
    num_perm: int = 128
    shingle_words: int = 3
    seed: int = 1
    exact: bool = True
    near: bool = True
    keep: KeepPolicy = "best"
    template_min_chunks: int | None = 3
    template_max_words: int = 20

    def _check_params(self) -> None:
        if not self.exact and not self.near:
            raise ConfigError("exact and near are both False, so the stage would do nothing; set one of them True")

    def _visit_order(self, chunks: tuple[Chunk, ...]) -> list[int]:
        order = priority_order(chunks, "score" if self.keep == "best" else "position")
        return sorted(order, key=lambda i: not chunks[i].pinned)  # stable: pinned first, order kept within

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        n = len(chunks)
        order = self._visit_order(chunks)
        dropped: dict[int, Removal] = {}

        # Exact duplicates first: they need no shingles. NFKC + lower once per chunk; lines come from the same form.
        folded = [_nfkc_lower(c.text) for c in chunks]
        norms = [" ".join(f.split()) for f in folded]
        exact_kept: dict[str, int] = {}
        survivors: list[int] = []  # visit order, exact duplicates removed
        distinct: list[int] = []  # one chunk per normalized text: template lines are counted over these
        for i in order:
            first = exact_kept.get(norms[i])
            if first is None:
                exact_kept[norms[i]] = i
                distinct.append(i)
            elif self.exact and not chunks[i].pinned:
                kept = chunks[first]
                dropped[i] = Removal(chunks[i].id, self.name, "exact_duplicate", chunks[i].token_count or 0,
                                     f"same normalized text as chunk {kept.id}", kept_id=kept.id)
                continue
            survivors.append(i)

        method = "none"
        n_template = capped = 0
        if self.near and len(survivors) > 1:
            method, n_template, capped = self._near(chunks, folded, survivors, distinct, dropped)
        out = tuple(c for i, c in enumerate(chunks) if i not in dropped)
        removals = tuple(dropped[i] for i in sorted(dropped))
        exact_n = sum(r.reason == "exact_duplicate" for r in removals)
        return StageOutput(
            context.with_chunks(out),
            removals,
            info={"exact_duplicates": exact_n, "near_duplicates": len(removals) - exact_n,
                  "near_method": method, "template_lines": n_template, "chunks_in": n,
                  "near_candidates_capped": capped},
        )

    def _shingle_sets(self, folded: list[str], survivors: list[int], distinct: list[int],
                      small_batch: bool) -> tuple[dict[int, ShingleSet], dict[int, int], int]:
        """Per survivor: its near-duplicate shingles (template lines left out), how many template lines it had,
        and the number of distinct template lines in the batch."""
        k = self.shingle_words
        max_words = self.template_max_words
        use_template = self.template_min_chunks is not None and len(distinct) >= self.template_min_chunks

        def split_lines(text: str) -> list[tuple[str, tuple[str, ...] | None]]:
            # (words joined by spaces, the word tuple when the line is short enough to be a template line)
            out: list[tuple[str, tuple[str, ...] | None]] = []
            for line in text.splitlines():
                wt = word_text(line)
                if not use_template:
                    if wt and not wt.isspace():
                        out.append((wt, None))
                    continue
                head = wt.split(maxsplit=max_words)  # never splits a long line beyond its first words
                if head:
                    out.append((wt, tuple(head) if len(head) <= max_words else None))
            return out

        lines = {i: split_lines(folded[i]) for i in survivors}
        template: frozenset[tuple[str, ...]] = frozenset()
        if use_template:
            # Counted over distinct normalized texts: exact copies (even pinned ones) do not add evidence.
            template = template_lines(([key for _, key in lines[i] if key] for i in distinct if i in lines),
                                      min_chunks=cast(int, self.template_min_chunks), max_words=max_words)
        ignored: dict[int, int] = {}
        content: dict[int, list[str]] = {}
        for i, own in lines.items():
            kept = [wt for wt, key in own if key is None or key not in template] if template else []
            if kept and len(kept) < len(own):
                content[i], ignored[i] = kept, len(own) - len(kept)
            else:  # nothing left out, or only template lines: the full set
                content[i], ignored[i] = [wt for wt, _ in own], 0

        sets: dict[int, ShingleSet] = {}
        if small_batch and sum(len(folded[i]) for i in survivors) <= PYTHON_PATH_MAX_CHARS:
            # No numpy for small inputs: array set-up costs more than hashing a few thousand word tuples.
            for i, texts in content.items():
                sets[i] = set(map(hash, chain.from_iterable(_line_shingles(t.split(), k) for t in texts)))
            return sets, ignored, len(template)
        line_texts: list[str] = []
        bounds: dict[int, tuple[int, int]] = {}
        for i in survivors:
            start = len(line_texts)
            line_texts.extend(content[i])
            bounds[i] = (start, len(line_texts))
        per_line = batch_shingle_hashes(line_texts, k)
        empty = np.empty(0, dtype=np.uint64)
        for i, (a, b) in bounds.items():
            sets[i] = per_line[a] if b - a == 1 else (np.concatenate(per_line[a:b]) if b > a else empty)
        return sets, ignored, len(template)

    def _near(self, chunks: tuple[Chunk, ...], folded: list[str], survivors: list[int], distinct: list[int],
              dropped: dict[int, Removal]) -> tuple[str, int, int]:
        small_batch = len(survivors) <= PAIRWISE_MAX_CHUNKS
        raw, ignored, n_template = self._shingle_sets(folded, survivors, distinct, small_batch)
        exact_sets: dict[int, ShingleSet] = {}

        def shingles(t: int) -> ShingleSet:
            got = exact_sets.get(t)
            if got is None:
                h = raw[t]
                if isinstance(h, (set, frozenset)):
                    got = h
                else:  # Python sets are fastest to intersect; sorted arrays keep a 10 MB chunk's set small.
                    got = np.unique(h) if len(h) > _MAX_SET_SHINGLES else frozenset(h.tolist())
                exact_sets[t] = got
            return got

        def similarity(i: int, j: int) -> float:
            a, b = shingles(i), shingles(j)
            small, large = sorted((len(a), len(b)))
            if small < self.threshold * large:  # Jaccard <= small/large: cannot reach the threshold
                return 0.0
            if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
                return jaccard(a, b)
            return sorted_jaccard(np.unique(np.fromiter(a, np.uint64)) if not isinstance(a, np.ndarray) else a,
                                  np.unique(np.fromiter(b, np.uint64)) if not isinstance(b, np.ndarray) else b)

        pure_python = isinstance(raw[survivors[0]], set)
        prefix_index: dict[int, list[int]] = {}
        prefixes: dict[int, list[int]] = {}

        def prefix(t: int) -> list[int]:
            # Prefix filtering (Chaudhuri et al. 2006; Bayardo et al.'s All-Pairs): with every set sorted in one
            # global order, J(a, b) >= threshold implies |a & b| >= ceil(threshold * |a|), so the first
            # |a| - ceil(threshold * |a|) + 1 elements of a and of b share one. Exact: no pair above it is missed.
            got = prefixes.get(t)
            if got is None:
                h = raw[t]
                need = math.ceil(self.threshold * len(h) - 1e-9)  # rounding can only lengthen the prefix
                got = prefixes[t] = sorted(cast(set[int], h))[: len(h) - need + 1]
            return got

        rank = {i: r for r, i in enumerate(survivors)}
        # Candidate sources. Tiny batches (pure Python path): every kept chunk. Small batches: an inverted index shingle -> kept chunks gives every kept chunk that
        # shares a shingle, with the exact intersection size (all pairs, no MinHash). Big batches: LSH buckets.
        index: dict[int, list[int]] = {}
        giants: list[int] = []  # kept chunks too big for the index; compared directly (size bound prunes most)
        buckets: dict[int, list[int]] = {}
        bucket_ids: dict[int, list[int]] = {}
        if not small_batch:
            bands, rows = lsh_bands(self.threshold, self.num_perm)
            arrays = [cast(U64Array, raw[i]) for i in survivors]  # big batches always take the numpy path
            sig = minhash_signatures(arrays, self.num_perm, self.seed)
            bucket_ids = dict(zip(survivors, lsh_buckets(sig, bands, rows, self.seed), strict=True))

        capped = [0]  # chunks compared with fewer kept chunks than their buckets held, because of a cap
        overflow: set[int] = set()  # buckets that were full when a kept chunk should have joined them

        def candidates(i: int) -> list[tuple[int, float]]:
            if pure_python:  # prefix filter: only kept chunks sharing a prefix shingle can reach the threshold
                found_p: set[int] = set()
                for sh in prefix(i):
                    found_p.update(prefix_index.get(sh, ()))
                return [(j, similarity(i, j)) for j in found_p]
            if not small_batch:
                shared_bands = Counter(chain.from_iterable(filter(None, map(buckets.get, bucket_ids[i]))))
                found = list(shared_bands)
                if len(found) > LSH_MAX_CANDIDATES:
                    found.sort(key=lambda j: (-shared_bands[j], rank[j]))
                    found = found[:LSH_MAX_CANDIDATES]
                    capped[0] += 1
                elif overflow and any(bid in overflow for bid in bucket_ids[i]):
                    capped[0] += 1
                return [(j, similarity(i, j)) for j in found]
            own = shingles(i)
            if isinstance(own, np.ndarray):  # a giant chunk: compare with every kept chunk
                return [(j, similarity(i, j)) for j in kept]
            shared = Counter(chain.from_iterable(filter(None, map(index.get, own))))
            out = [(j, c / (len(own) + len(shingles(j)) - c)) for j, c in shared.items()]
            return out + [(j, similarity(i, j)) for j in giants]

        kept: list[int] = []
        for i in survivors:
            if not len(raw[i]):
                kept.append(i)
                continue
            best_j, best_sim = -1, -1.0
            for j, sim in candidates(i):
                # Ties go to the earliest-visited kept chunk.
                if sim >= self.threshold and (sim > best_sim or (sim == best_sim and rank[j] < rank[best_j])):
                    best_j, best_sim = j, sim
            if best_j >= 0 and not chunks[i].pinned:
                kept_chunk = chunks[best_j]
                detail = f"jaccard {best_sim:.2f} with chunk {kept_chunk.id}"
                n_ignored = ignored[i] + ignored[best_j]
                if n_ignored:
                    detail += f", {n_ignored} template line{'s' if n_ignored > 1 else ''} not compared"
                dropped[i] = Removal(chunks[i].id, self.name, "near_duplicate", chunks[i].token_count or 0,
                                     detail, kept_id=kept_chunk.id)
                continue
            kept.append(i)
            if not small_batch:
                for bid in bucket_ids[i]:
                    members = buckets.setdefault(bid, [])
                    if len(members) < LSH_MAX_BUCKET_CHUNKS:
                        members.append(i)
                    else:
                        overflow.add(bid)
                continue
            if pure_python:
                for sh in prefix(i):
                    prefix_index.setdefault(sh, []).append(i)
                continue
            own = shingles(i)
            if isinstance(own, np.ndarray):
                giants.append(i)
            else:
                for sh in own:
                    index.setdefault(sh, []).append(i)
        return ("exact_pairwise" if small_batch else "minhash_lsh"), n_template, capped[0]
