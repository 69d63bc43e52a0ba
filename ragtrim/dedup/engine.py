"""Near-duplicate search over one batch of texts: shingle sets with template lines left out, one class per
candidate strategy, and the greedy pass that keeps each text or matches it to one already kept.

The ``DuplicateFilter`` stage (``ragtrim.stages.dedup``) picks the strategy and the visit order and writes the trace;
this module knows nothing of chunks, scores or removals. A text is matched only for a measured (exact) Jaccard.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Literal, Protocol, TypeVar, cast

import numpy as np

from ragtrim._util.lru import bounded_cache
from ragtrim.dedup.minhash import lsh_bands, lsh_buckets, minhash_signatures
from ragtrim.dedup.pieces import exact_key
from ragtrim.dedup.shingles import (
    SHINGLE_CHARS,
    SPACELESS_CHARS_PER_WORD,
    U64Array,
    batch_shingle_hashes,
    jaccard,
    line_tokens,
    nfkc_lower,
    sorted_jaccard,
    sorted_unique,
    template_lines,
    word_shingles,
    word_text,
)

CandidateStrategy = Literal["prefix_filter", "inverted_index", "minhash_lsh"]
"""``prefix_filter``: pure-Python sets, All-Pairs prefix filtering (small batches of short texts);
``inverted_index``: 64-bit hashes and an index shingle -> kept texts (small batches of long texts);
``minhash_lsh``: MinHash signatures and LSH buckets (big batches). The first two miss no pair."""

LSH_MAX_BUCKET_CHUNKS = 32
"""An LSH bucket remembers at most this many kept chunks (the first ones visited). Similar but distinct chunks (one
text with a few words changed, thousands of times) share buckets, and without a cap every chunk met every kept one:
4,000 such chunks took 34 s, 8,000 took 139 s."""

LSH_MAX_CANDIDATES = 32
"""At most this many kept chunks per chunk get the exact Jaccard check: those sharing the most LSH bands with it
(an estimate of similarity; ties by visit order). A chunk is dropped only for a measured Jaccard, so the caps can
miss a near duplicate on such streams, never drop a chunk wrongly. ``info["near_candidates_capped"]`` counts the
chunks whose comparisons a cap cut short."""

_TOKEN = re.compile(r"\S+")
_MAX_SET_SHINGLES = 50_000  # above this, Jaccard runs on sorted numpy arrays instead of Python sets (memory)

ShingleSet = frozenset[int] | set[int] | U64Array
T = TypeVar("T")


# -- shingle sets -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShingleSets:
    """Per text: its near-duplicate shingles (template lines left out), how many template lines it had, and the
    lines those shingles came from (NFKC, lower-cased), which the value check reads."""

    sets: dict[int, ShingleSet]
    ignored_lines: dict[int, int]
    template_lines: int
    """Distinct template lines in the batch."""
    content_lines: dict[int, tuple[str, ...]] = field(default_factory=dict)


_Line = tuple[str, str, tuple[str, ...] | None, bool]
"""A line as ``build_shingle_sets`` reads it: its text, its tokens joined by spaces
(``ragtrim.dedup.shingles.line_tokens``), its key as a template-line candidate (None: too long to be one), and whether
its tokens are Han/Kana characters (shingled by ``shingle_chars``) rather than words. Plain tuples: a batch holds
tens of thousands of lines."""


_HEAD_SPLIT_MAX_CHARS = 4096
"""Up to this many characters a line's first words come from one ``str.split(None, limit)``; a longer line's from a
scan that stops after them (the split would copy the rest of the line)."""


def _read_lines(folded: str, max_words: int) -> tuple[_Line, ...]:
    """The lines of ``folded`` that have tokens, each with its template-line key (None for a line of more than
    ``max_words`` words; a Han/Kana line's words are its characters / ``SPACELESS_CHARS_PER_WORD``)."""
    out: list[_Line] = []
    for line in folded.splitlines():
        if line.isascii():
            tokens, chars = word_text(line), False
        else:
            tokens, chars = line_tokens(line)
        key = _line_head(tokens, max_words * SPACELESS_CHARS_PER_WORD if chars else max_words)
        if key != ():
            out.append((line, tokens, key, chars))
    return tuple(out)


def _content_mask(lines: Sequence[_Line], template: frozenset[tuple[str, ...]]) -> list[bool] | None:
    """Which of ``lines`` near-duplicate detection compares: those that are not ``template`` lines, as a mask, or None
    for all of them (no template line among them, or nothing but template lines: the full set)."""
    if not template:
        return None
    mask = [ln[2] is None or ln[2] not in template for ln in lines]
    return mask if any(mask) and not all(mask) else None


def _masked(items: Sequence[T], mask: list[bool] | None) -> Sequence[T]:
    """The items ``mask`` keeps (all of them for None)."""
    return items if mask is None else [item for item, keep in zip(items, mask, strict=True) if keep]


def _line_head(tokens: str, limit: int) -> tuple[str, ...] | None:
    """The tokens of a line (joined by spaces) as a template-line key: all of them when there are at most ``limit``,
    else None; ``()`` when there are none."""
    if len(tokens) <= _HEAD_SPLIT_MAX_CHARS:
        head = tokens.split(None, limit)  # ``limit`` + 1 items exactly when there are more than ``limit`` tokens
    else:
        head = [m.group() for m in islice(_TOKEN.finditer(tokens), limit + 1)]
    return tuple(head) if len(head) <= limit else None


def _weigh_analysis(args: tuple[object, ...], value: tuple[tuple[_Line, ...], tuple[tuple[int, ...], ...]]) -> int:
    # The key text; per line its text, tokens and tuple, and a key's words (at most 64 bytes each, short lines
    # only); per shingle a hash (an int and its slot).
    lines, hashes = value
    size = sys.getsizeof(args[0]) + sys.getsizeof(lines) + sys.getsizeof(hashes)
    for (line, tokens, key, _), own in zip(lines, hashes, strict=True):
        size += sys.getsizeof(line) + sys.getsizeof(tokens) + 120 + (64 * len(key) if key else 0) + 48 * len(own)
    return size


ANALYSIS_MAX_BYTES = 16 * 2**20
"""Size of each per-text cache of this module (about 8,000 NQ-sized passages' folded forms, 4,000 passages' lines)."""

ANALYSIS_MAX_ENTRY_BYTES = 1 << 16
"""The largest entry of the per-text caches of this module (about 30,000 characters of ASCII text for the folded
form, fewer for the lines): a passage met again is found there, while a whole page, rarely met twice, is analysed
again rather than hold memory."""


@bounded_cache(max_entries=16384, max_bytes=ANALYSIS_MAX_BYTES, max_entry_bytes=ANALYSIS_MAX_ENTRY_BYTES,
               weigh=_weigh_analysis)
def _analysed_lines(folded: str, max_words: int, shingle_words: int,
                    shingle_chars: int) -> tuple[tuple[_Line, ...], tuple[tuple[int, ...], ...]]:
    """The lines of ``folded`` that have tokens, each with its template-line key (``max_words``: the longest key in
    words), and each line's shingle hashes: what a small batch reads of one text, the same whatever the other texts
    of the batch are (cached: a passage met again costs one lookup)."""
    lines = _read_lines(folded, max_words)
    return lines, tuple(tuple(map(hash, word_shingles(tokens.split(), shingle_chars if chars else shingle_words)))
                        for _, tokens, _, chars in lines)


@bounded_cache(max_entries=16384, max_bytes=ANALYSIS_MAX_BYTES, max_entry_bytes=ANALYSIS_MAX_ENTRY_BYTES,
               weigh=lambda args, _: 2 * sys.getsizeof(args[0]) + 120)
def folded_and_key(text: str) -> tuple[str, bytes]:
    """``text`` in NFKC and lower case (``ragtrim.dedup.shingles.nfkc_lower``) and its exact-duplicate key
    (``ragtrim.dedup.pieces.exact_key``), cached."""
    folded = nfkc_lower(text)
    return folded, exact_key(folded)


def clear_line_cache() -> None:
    """Forget the folded texts and analysed lines (``ragtrim.caches.clear_caches`` calls this)."""
    folded_and_key.cache_clear()
    _analysed_lines.cache_clear()


def build_shingle_sets(folded: Sequence[str], members: Sequence[int], distinct: Collection[int], *,
                       shingle_words: int, template_min_chunks: int | None, template_max_words: int,
                       python_sets: bool, shingle_chars: int = SHINGLE_CHARS) -> ShingleSets:
    """Shingle sets of ``folded[i]`` (NFKC, lower-cased text) for each ``i`` in ``members``.

    Each line is shingled on its own: by ``shingle_words`` words, or by ``shingle_chars`` characters when its letters
    are mostly Han/Kana (``ragtrim.dedup.shingles.line_tokens``). Template lines are counted over ``distinct`` (one
    member per normalized text); a Han/Kana line's length in words is its characters / ``SPACELESS_CHARS_PER_WORD``.
    ``python_sets``: sets of Python hashes of token tuples (no numpy set-up cost; the ``prefix_filter`` strategy needs
    them), else unsorted arrays of 64-bit hashes.
    """
    max_words = template_max_words
    if python_sets:  # each text's lines and their shingle hashes, cached
        analysed = {i: _analysed_lines(folded[i], max_words, shingle_words, shingle_chars) for i in members}
        lines = {i: own for i, (own, _) in analysed.items()}
    else:
        lines = {i: _read_lines(folded[i], max_words) for i in members}
    template: frozenset[tuple[str, ...]] = frozenset()
    if template_min_chunks is not None and len(distinct) >= template_min_chunks:
        # Counted over distinct normalized texts: exact copies (even pinned ones) do not add evidence. Each line's
        # own limit was applied when its key was made; this one only has to let every key through.
        template = template_lines(([ln[2] for ln in lines[i] if ln[2]] for i in distinct if i in lines),
                                  min_chunks=template_min_chunks, max_words=max_words * SPACELESS_CHARS_PER_WORD)
    # Per text, which lines are compared: None for all of them (no template line, or nothing but template lines).
    kept = {i: _content_mask(own, template) for i, own in lines.items()}
    ignored = {i: mask.count(False) if mask else 0 for i, mask in kept.items()}
    content = {i: _masked(own, kept[i]) for i, own in lines.items()}
    content_lines = {i: tuple(ln[0] for ln in own) for i, own in content.items()}
    sets: dict[int, ShingleSet] = {}
    if python_sets:
        for i, (_, hashes) in analysed.items():
            sets[i] = set(chain.from_iterable(_masked(hashes, kept[i])))
        return ShingleSets(sets, ignored, len(template), content_lines)
    empty = np.empty(0, dtype=np.uint64)
    if not any(ln[3] for own in lines.values() for ln in own):  # every line by words: one batch
        line_texts: list[str] = []
        bounds: dict[int, tuple[int, int]] = {}
        for i in members:
            start = len(line_texts)
            line_texts.extend(ln[1] for ln in content[i])
            bounds[i] = (start, len(line_texts))
        per_line = batch_shingle_hashes(line_texts, shingle_words)
        for i, (a, b) in bounds.items():
            sets[i] = per_line[a] if b - a == 1 else (np.concatenate(per_line[a:b]) if b > a else empty)
        return ShingleSets(sets, ignored, len(template), content_lines)
    # Word lines and character lines are hashed in two batches (one shingle length each), then put back in order.
    by_k: dict[int, list[str]] = {}
    where: dict[int, list[tuple[int, int]]] = {}  # member -> (shingle length, index in that batch) per line
    for i in members:
        spots = where[i] = []
        for ln in content[i]:
            k = shingle_chars if ln[3] else shingle_words
            batch = by_k.setdefault(k, [])
            spots.append((k, len(batch)))
            batch.append(ln[1])
    hashed = {k: batch_shingle_hashes(texts, k) for k, texts in by_k.items()}
    for i, spots in where.items():
        parts = [hashed[k][j] for k, j in spots]
        sets[i] = parts[0] if len(parts) == 1 else (np.concatenate(parts) if parts else empty)
    return ShingleSets(sets, ignored, len(template), content_lines)


class ExactJaccard:
    """Exact Jaccard of two members' shingle sets; each set is turned once into its fastest exact form."""

    def __init__(self, sets: Mapping[int, ShingleSet], threshold: float) -> None:
        self.raw = sets
        self.threshold = threshold
        self._exact: dict[int, ShingleSet] = {}

    def shingles(self, t: int) -> ShingleSet:
        got = self._exact.get(t)
        if got is None:
            h = self.raw[t]
            if isinstance(h, (set, frozenset)):
                got = h
            else:  # Python sets are fastest to intersect; sorted arrays keep a 10 MB chunk's set small (the
                # shingle arrays are this search's own, from build_shingle_sets: sorted where they lie)
                got = sorted_unique(h, in_place=True) if len(h) > _MAX_SET_SHINGLES else frozenset(h.tolist())
            self._exact[t] = got
        return got

    def __call__(self, i: int, j: int) -> float:
        a, b = self.shingles(i), self.shingles(j)
        small, large = sorted((len(a), len(b)))
        if small < self.threshold * large:  # Jaccard <= small/large: cannot reach the threshold
            return 0.0
        if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
            return jaccard(a, b)
        return sorted_jaccard(sorted_unique(np.fromiter(a, np.uint64)) if not isinstance(a, np.ndarray) else a,
                              sorted_unique(np.fromiter(b, np.uint64)) if not isinstance(b, np.ndarray) else b)


# -- candidate strategies -----------------------------------------------------------------------------------------
class CandidateIndex(Protocol):
    """Kept texts that may be near duplicates of a new one, each with its Jaccard (0.0 when it cannot reach the
    threshold). ``add`` registers a kept text; ``capped`` counts texts whose comparisons a cap cut short."""

    capped: int

    def candidates(self, i: int) -> list[tuple[int, float]]: ...

    def add(self, i: int) -> None: ...


class PrefixFilterCandidates:
    """Prefix filtering (Chaudhuri et al. 2006; Bayardo et al.'s All-Pairs) over Python sets of shingle hashes.

    With every set sorted in one global order, J(a, b) >= threshold implies |a & b| >= ceil(threshold * |a|), so the
    first |a| - ceil(threshold * |a|) + 1 elements of a and of b share one. Exact: no pair above it is missed.
    """

    def __init__(self, similarity: ExactJaccard) -> None:
        self.similarity = similarity
        self.capped = 0
        self._index: dict[int, list[int]] = {}
        self._prefixes: dict[int, list[int]] = {}

    def _prefix(self, t: int) -> list[int]:
        got = self._prefixes.get(t)
        if got is None:
            h = self.similarity.raw[t]
            need = math.ceil(self.similarity.threshold * len(h) - 1e-9)  # rounding can only lengthen the prefix
            got = self._prefixes[t] = sorted(cast(set[int], h))[: len(h) - need + 1]
        return got

    def candidates(self, i: int) -> list[tuple[int, float]]:
        found: set[int] = set()
        for sh in self._prefix(i):
            found.update(self._index.get(sh, ()))
        return [(j, self.similarity(i, j)) for j in found]

    def add(self, i: int) -> None:
        for sh in self._prefix(i):
            self._index.setdefault(sh, []).append(i)


class InvertedIndexCandidates:
    """An inverted index shingle -> kept texts: every kept text that shares a shingle, with the exact intersection
    size (all pairs, no MinHash). Texts too big for Python sets ("giants") are compared directly."""

    def __init__(self, similarity: ExactJaccard) -> None:
        self.similarity = similarity
        self.capped = 0
        self._index: dict[int, list[int]] = {}
        self._giants: list[int] = []  # kept texts too big for the index; the size bound prunes most comparisons
        self._kept: list[int] = []

    def candidates(self, i: int) -> list[tuple[int, float]]:
        similarity = self.similarity
        own = similarity.shingles(i)
        if isinstance(own, np.ndarray):  # a giant text: compare with every kept text
            return [(j, similarity(i, j)) for j in self._kept]
        shared = Counter(chain.from_iterable(filter(None, map(self._index.get, own))))
        out = [(j, c / (len(own) + len(similarity.shingles(j)) - c)) for j, c in shared.items()]
        return out + [(j, similarity(i, j)) for j in self._giants]

    def add(self, i: int) -> None:
        self._kept.append(i)
        own = self.similarity.shingles(i)
        if isinstance(own, np.ndarray):
            self._giants.append(i)
            return
        for sh in own:
            self._index.setdefault(sh, []).append(i)


class LshCandidates:
    """MinHash signatures cut into LSH bands; kept texts sharing a band bucket are candidates.

    ``b`` bands of ``r`` rows (``ragtrim.dedup.minhash.lsh_bands``). A bucket remembers at most ``LSH_MAX_BUCKET_CHUNKS``
    kept texts and a text gets at most ``LSH_MAX_CANDIDATES`` exact checks, those sharing the most bands first
    (ties by visit order), so streams of similar but distinct texts stay linear.
    """

    def __init__(self, similarity: ExactJaccard, order: Sequence[int], *, num_perm: int, seed: int) -> None:
        self.similarity = similarity
        self.capped = 0
        bands, rows = lsh_bands(similarity.threshold, num_perm)
        arrays = [cast(U64Array, similarity.raw[i]) for i in order]  # LSH always takes 64-bit hash arrays
        sig = minhash_signatures(arrays, num_perm, seed)
        self._bucket_ids = dict(zip(order, lsh_buckets(sig, bands, rows, seed), strict=True))
        self._rank = {i: r for r, i in enumerate(order)}
        self._buckets: dict[int, list[int]] = {}
        self._overflow: set[int] = set()  # buckets that were full when a kept text should have joined them

    def candidates(self, i: int) -> list[tuple[int, float]]:
        own_ids = self._bucket_ids[i]
        shared_bands = Counter(chain.from_iterable(filter(None, map(self._buckets.get, own_ids))))
        found = list(shared_bands)
        if len(found) > LSH_MAX_CANDIDATES:
            rank = self._rank
            found.sort(key=lambda j: (-shared_bands[j], rank[j]))
            found = found[:LSH_MAX_CANDIDATES]
            self.capped += 1
        elif self._overflow and any(bid in self._overflow for bid in own_ids):
            self.capped += 1
        return [(j, self.similarity(i, j)) for j in found]

    def add(self, i: int) -> None:
        for bid in self._bucket_ids[i]:
            members = self._buckets.setdefault(bid, [])
            if len(members) < LSH_MAX_BUCKET_CHUNKS:
                members.append(i)
            else:
                self._overflow.add(bid)


def candidate_index(strategy: CandidateStrategy, similarity: ExactJaccard, order: Sequence[int], *,
                    num_perm: int, seed: int) -> CandidateIndex:
    """The candidate index of ``strategy`` over the members of ``order``."""
    if strategy == "prefix_filter":
        return PrefixFilterCandidates(similarity)
    if strategy == "inverted_index":
        return InvertedIndexCandidates(similarity)
    return LshCandidates(similarity, order, num_perm=num_perm, seed=seed)


# -- the greedy pass ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NearDuplicate:
    """``index`` duplicates the kept text ``kept`` (the most similar one; ties to the earliest visited)."""

    index: int
    kept: int
    jaccard: float


@dataclass(frozen=True)
class BlockedMatch:
    """``index`` reached ``threshold`` with the kept text ``other`` but was kept: ``conflict`` said why (for the value
    check: the numbers, dates, versions or amounts the two disagree on). Only recorded when no other kept text
    matched it without a conflict."""

    index: int
    other: int
    jaccard: float
    reason: str


@dataclass(frozen=True)
class NearDuplicateSearch:
    duplicates: tuple[NearDuplicate, ...]
    capped: int
    """Texts whose comparisons an LSH cap cut short (0 for the exact strategies)."""
    blocked: tuple[BlockedMatch, ...] = ()
    """Texts kept only because ``conflict`` refused every match at or above the threshold."""


ConflictCheck = Callable[[int, int], str | None]
"""``conflict(i, j)``: why text ``i`` must not be merged into the kept text ``j`` although their Jaccard reaches the
threshold, or None when it may."""


def find_near_duplicates(sets: Mapping[int, ShingleSet], order: Sequence[int], *, threshold: float,
                         strategy: CandidateStrategy, num_perm: int = 128, seed: int = 1,
                         protected: Collection[int] = (), conflict: ConflictCheck | None = None) -> NearDuplicateSearch:
    """Visit ``order``; a text whose Jaccard with a kept text is >= ``threshold`` is a duplicate of the most similar
    one (ties to the earliest visited), else it is kept. With ``conflict``, a match it refuses is skipped and the next
    most similar kept text tried; a text whose every match is refused is kept and listed in ``blocked``.
    ``protected`` texts are always kept (but still matched against later ones). A text with no shingles is kept and
    matches nothing. ``sets`` must be Python sets for ``prefix_filter``, 64-bit hash arrays for ``minhash_lsh``
    (``build_shingle_sets`` makes either)."""
    if not order:
        return NearDuplicateSearch((), 0)
    similarity = ExactJaccard(sets, threshold)
    index = candidate_index(strategy, similarity, order, num_perm=num_perm, seed=seed)
    rank = {i: r for r, i in enumerate(order)}
    found: list[NearDuplicate] = []
    blocked: list[BlockedMatch] = []
    for i in order:
        if not len(sets[i]):
            continue
        matches = [(j, sim) for j, sim in index.candidates(i) if sim >= threshold]
        if matches and i not in protected:
            matches.sort(key=lambda m: (-m[1], rank[m[0]]))  # most similar first, ties to the earliest visited
            refused: BlockedMatch | None = None
            for j, sim in matches:
                why = conflict(i, j) if conflict is not None else None
                if why is None:
                    found.append(NearDuplicate(i, j, sim))
                    break
                if refused is None:
                    refused = BlockedMatch(i, j, sim, why)
            else:
                if refused is not None:
                    blocked.append(refused)
                index.add(i)
            continue
        index.add(i)
    return NearDuplicateSearch(tuple(found), index.capped, tuple(blocked))
