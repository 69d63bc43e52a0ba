"""Retrieved documents across the log: exact and near duplicates within a request (tokens ragtrim's dedup stage
removes), documents retrieved again by later requests, and the HTML boilerplate share (tokens ragtrim's HTML stage
removes). Each distinct document is cleaned, normalized and MinHashed once per process (``DocumentCache``).

Counted in the pipeline's order, so that the two numbers add up to what its two stages remove: the HTML stage runs
first and cleans every HTML piece, copies included (boilerplate tokens of every piece); the dedup stage then sees
the cleaned text, so duplicates are found on it and weigh its cleaned tokens.

Near duplicates are found as the dedup stage finds them, within one request: a piece whose MinHash signature (the
stage's shingles and seeds, ``ragtrim.dedup``) shares an LSH band with a piece kept before it in the request and
agrees with it on at least ``threshold`` of its positions (an estimate of the word-shingle Jaccard; standard error
about 0.035 at 0.8). Every number of a request depends on that request alone, so stretches of the log read apart
add up exactly. Across requests, the first ``max_docs`` distinct documents of the log are followed (how often each
is retrieved again), and ``near_duplicate_clusters`` groups them, in log order, with the same signatures; every
document of the log is estimated from a bounded sample (``ragtrim.audit.sketch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ragtrim.audit.breakdown import CountCache, Position, TopK
from ragtrim.audit.reader import AuditRequest
from ragtrim.audit.sketch import DocumentSketch, stable_key

DEFAULT_MAX_DOCS = 200_000
PREVIEW_CHARS = 160


@dataclass(frozen=True, slots=True)
class DocInfo:
    """What the audit needs of one distinct piece text: its normalized text's key, tokens before and after the HTML
    stage, and its LSH band keys and MinHash signature (none for a text without words)."""

    norm_key: int
    tokens: int
    clean_tokens: int
    boilerplate_tokens: int
    is_html: bool
    bands: tuple[bytes, ...]
    signature: Any  # numpy uint32 (num_perm,), or None
    sketch_key: int  # the normalized text's stable key (``ragtrim.audit.sketch``)


@dataclass(slots=True)
class _Entry:
    """A followed document: its tokens, requests that kept it, pieces it appeared as, the first request that kept it."""

    norm_key: int
    tokens: int
    signature: bytes | None  # the MinHash signature's bytes (its LSH bands are slices of it): cheap to send
    preview: str = ""
    requests: int = 0
    pieces: int = 0
    first_request_id: str = ""
    first_position: Position | None = None


@dataclass(frozen=True, slots=True)
class RequestDocs:
    """What one request's context holds: duplicate and boilerplate tokens, and tokens seen in earlier requests."""

    exact_duplicate_tokens: int
    near_duplicate_tokens: int
    boilerplate_tokens: int
    repeated_tokens: int


class DocumentCache:
    """Per process: each distinct piece text analysed once (cleaned, counted, normalized, MinHashed), keyed by the
    text's hash. Bounded: past ``max_entries`` the oldest half is forgotten (and analysed again when seen again)."""

    def __init__(self, counts: CountCache, *, num_perm: int = 128, shingle_words: int = 3, seed: int = 1,
                 threshold: float = 0.8, html: bool = True, max_entries: int = DEFAULT_MAX_DOCS) -> None:
        from ragtrim.dedup.minhash import lsh_bands

        self.counts = counts
        self.num_perm = num_perm
        self.shingle_words = shingle_words
        self.seed = seed
        self.html = html
        self.max_entries = max_entries
        self.bands, self.rows = lsh_bands(threshold, num_perm)
        self._info: dict[int, DocInfo] = {}
        self._signed: dict[int, tuple[tuple[bytes, ...], Any]] = {}  # normalized text's key -> bands, signature
        self._cleaner: Any = None

    def get(self, raw_key: int) -> DocInfo:
        return self._info[raw_key]

    def ensure(self, texts: dict[int, str], tokens: dict[int, int]) -> None:
        """Analyse those of ``texts`` (raw key -> text; ``tokens``: their counts) not analysed yet."""
        from ragtrim.html.markup import looks_like_html
        from ragtrim.text.sentences import normalize_text

        new = {k: t for k, t in texts.items() if k not in self._info}
        if not new:
            return
        cleaned: dict[int, str] = {}
        for raw_key, text in new.items():
            if self.html and looks_like_html(text):
                cleaned[raw_key] = self._clean(text)
        clean_counts = dict(zip(cleaned, self.counts.counts(list(cleaned.values())), strict=True)) if cleaned else {}
        normalized = {k: normalize_text(cleaned.get(k, t)) for k, t in new.items()}
        self._sign({hash(n): n for n in normalized.values()})
        for raw_key, text in new.items():
            norm_key = hash(normalized[raw_key])
            bands, signature = self._signed[norm_key]
            raw_tokens = tokens[raw_key]
            clean_tokens = clean_counts.get(raw_key, raw_tokens)
            # A piece the HTML stage would leave as it is (no markup to render) is not HTML for the report either.
            is_html = raw_key in cleaned and cleaned[raw_key] != text
            self._info[raw_key] = DocInfo(norm_key, raw_tokens, clean_tokens, max(0, raw_tokens - clean_tokens),
                                          is_html, bands, signature, stable_key(normalized[raw_key]))
        for cache in (self._info, self._signed):
            if len(cache) > self.max_entries:
                for k in list(islice(cache, len(cache) // 2)):
                    del cache[k]

    def _sign(self, normalized: dict[int, str]) -> None:
        from ragtrim.dedup.minhash import minhash_signatures
        from ragtrim.dedup.shingles import batch_shingle_hashes, sorted_unique, word_text

        fresh = {k: word_text(n) for k, n in normalized.items() if k not in self._signed}
        if not fresh:
            return
        sets = [sorted_unique(h) for h in batch_shingle_hashes(list(fresh.values()), self.shingle_words)]
        sigs = minhash_signatures(sets, self.num_perm, self.seed)
        rows = self.rows
        for k, sig, shingles in zip(fresh, sigs, sets, strict=True):
            if len(shingles) == 0:
                self._signed[k] = ((), None)
                continue
            self._signed[k] = (band_keys(sig.tobytes(), self.bands, rows), sig)

    def _clean(self, text: str) -> str:
        if self._cleaner is None:
            from ragtrim.stages.html import HtmlCleaner

            self._cleaner = HtmlCleaner()
        return str(self._cleaner.clean(text).text)


def band_keys(signature: bytes, bands: int, rows: int) -> tuple[bytes, ...]:
    """The LSH band keys of a signature (uint32 bytes): each band's number, then its rows, so that equal rows of
    two different bands are different keys."""
    width = 4 * rows
    return tuple(bytes((b,)) + signature[b * width:(b + 1) * width] for b in range(bands))


def agreement(a: Any, b: Any) -> float:
    """The share of positions where two MinHash signatures agree."""
    import numpy as np

    return float(np.mean(a == b))


class DocumentAnalysis:
    """The document numbers of a stretch of the log; ``absorb`` appends the next stretch's exactly.

    ``mergeable``: this stretch is to be absorbed by the one before it, so every document it sees is followed
    (signatures and previews only for its first ``max_docs``, the only ones the merged table can take), and
    ``absorb`` keeps the first ``max_docs`` of both in log order."""

    def __init__(self, *, threshold: float = 0.8, max_docs: int = DEFAULT_MAX_DOCS, keep_text: bool = True,
                 mergeable: bool = False, num_perm: int = 128, shingle_words: int = 3, seed: int = 1) -> None:
        from ragtrim.dedup.minhash import lsh_bands

        self.threshold = threshold
        self.max_docs = max_docs
        self.keep_text = keep_text
        self.mergeable = mergeable
        self.num_perm = num_perm
        self.shingle_words = shingle_words
        self.seed = seed
        self.bands, self.rows = lsh_bands(threshold, num_perm)
        self._table: dict[int, _Entry] = {}  # raw text hash -> the followed document
        self.pieces = 0
        self.context_tokens = 0
        self.exact_duplicate_tokens = 0
        self.near_duplicate_tokens = 0
        self.exact_duplicate_pieces = 0
        self.near_duplicate_pieces = 0
        self.boilerplate_tokens = 0
        self.html_pieces = 0
        self.html_tokens = 0
        self.untracked_pieces = 0
        self.top_duplicates = TopK()
        self.top_boilerplate = TopK()
        self.sketch = DocumentSketch()

    def cache(self, counts: CountCache, *, html: bool = True) -> DocumentCache:
        """A ``DocumentCache`` with this analysis's MinHash parameters."""
        return DocumentCache(counts, num_perm=self.num_perm, shingle_words=self.shingle_words, seed=self.seed,
                             threshold=self.threshold, html=html, max_entries=max(self.max_docs, 1024))

    def add_batch(self, requests: Sequence[AuditRequest], seg_counts: Sequence[Sequence[int]], cache: DocumentCache,
                  positions: Sequence[Position] | None = None) -> list[RequestDocs]:
        texts: dict[int, str] = {}
        tokens: dict[int, int] = {}
        for req, counts in zip(requests, seg_counts, strict=True):
            for seg, n in zip(req.segments, counts, strict=True):
                if seg.part == "context":
                    k = hash(seg.text)
                    if k not in texts:
                        texts[k] = seg.text
                        tokens[k] = n
        cache.ensure(texts, tokens)
        where = positions if positions is not None else [(0, r.line) for r in requests]
        return [self._request(req, counts, cache, texts, pos)
                for req, counts, pos in zip(requests, seg_counts, where, strict=True)]

    def _entry(self, raw_key: int, info: DocInfo, text: str) -> _Entry | None:
        entry = self._table.get(raw_key)
        if entry is not None:
            return entry
        if len(self._table) >= self.max_docs and not self.mergeable:
            return None
        full = len(self._table) >= self.max_docs  # mergeable: counted, but no merged table can take it
        signature = None if full or info.signature is None else info.signature.tobytes()
        entry = _Entry(info.norm_key, info.tokens, signature, text[:PREVIEW_CHARS] if self.keep_text and not full else "")
        self._table[raw_key] = entry
        return entry

    def _request(self, req: AuditRequest, counts: Sequence[int], cache: DocumentCache, texts: dict[int, str],
                 position: Position) -> RequestDocs:
        seen_norms: set[int] = set()
        kept: list[DocInfo] = []
        kept_bands: set[bytes] = set()  # every band key of the pieces kept so far: most pieces share none
        exact = near = boiler = repeated = 0
        threshold = self.threshold
        for seg, n in zip(req.segments, counts, strict=True):
            if seg.part != "context":
                continue
            self.pieces += 1
            self.context_tokens += n
            raw_key = hash(seg.text)
            info = cache.get(raw_key)
            entry = self._entry(raw_key, info, texts[raw_key])
            if entry is None:
                self.untracked_pieces += 1
            else:
                entry.pieces += 1
            if info.is_html:  # the HTML stage cleans every piece, copies included
                self.html_pieces += 1
                self.html_tokens += n
                boiler += info.boilerplate_tokens
            if info.norm_key in seen_norms:  # then dedup drops the cleaned copy
                exact += info.clean_tokens
                self.exact_duplicate_pieces += 1
                self.sketch.add(info.sketch_key, info.tokens, 0)
                continue
            if not kept_bands.isdisjoint(info.bands) and any(
                    not set(k.bands).isdisjoint(info.bands) and agreement(k.signature, info.signature) >= threshold
                    for k in kept):
                near += info.clean_tokens
                self.near_duplicate_pieces += 1
                self.sketch.add(info.sketch_key, info.tokens, 0)
                continue
            self.sketch.add(info.sketch_key, info.tokens, 1)
            seen_norms.add(info.norm_key)
            kept_bands.update(info.bands)
            kept.append(info)
            if entry is not None:
                if entry.requests:
                    repeated += n
                entry.requests += 1
                if entry.first_position is None:
                    entry.first_request_id, entry.first_position = req.request_id, position
        self.exact_duplicate_tokens += exact
        self.near_duplicate_tokens += near
        self.boilerplate_tokens += boiler
        if exact + near:
            self.top_duplicates.offer(exact + near, req.request_id, {"line": req.line}, position)
        if boiler:
            self.top_boilerplate.offer(boiler, req.request_id, {"line": req.line}, position)
        return RequestDocs(exact, near, boiler, repeated)

    def absorb(self, later: DocumentAnalysis) -> None:
        """Append ``later``, the next stretch of the log (``mergeable``): counts add up; its documents join the
        table in their order while it has room, and are counted as untracked pieces beyond it."""
        for name in ("pieces", "context_tokens", "exact_duplicate_tokens", "near_duplicate_tokens",
                     "exact_duplicate_pieces", "near_duplicate_pieces", "boilerplate_tokens", "html_pieces",
                     "html_tokens", "untracked_pieces"):
            setattr(self, name, getattr(self, name) + getattr(later, name))
        self.top_duplicates.absorb(later.top_duplicates)
        self.top_boilerplate.absorb(later.top_boilerplate)
        self.sketch.absorb(later.sketch)
        table = self._table
        for raw_key, theirs in later._table.items():
            mine = table.get(raw_key)
            if mine is not None:
                mine.requests += theirs.requests
                mine.pieces += theirs.pieces
                if mine.first_position is None:
                    mine.first_request_id, mine.first_position = theirs.first_request_id, theirs.first_position
            elif len(table) < self.max_docs:
                table[raw_key] = theirs
            else:
                self.untracked_pieces += theirs.pieces

    def _clusters(self) -> tuple[int, int, int]:
        """(distinct normalized documents, near-duplicate clusters, documents indexed) of the followed documents,
        in log order: a document starts a cluster unless it shares an LSH band with an earlier one and agrees with
        it on at least ``threshold`` of the signature (a text without words is a cluster of its own)."""
        import numpy as np

        seen: set[int] = set()
        first_in_band: dict[bytes, int] = {}
        signatures: list[Any] = []
        clusters = 0
        for e in self._table.values():
            if e.norm_key in seen:
                continue
            seen.add(e.norm_key)
            if e.signature is None:
                clusters += 1
                continue
            signature = np.frombuffer(e.signature, dtype=np.uint32)
            bands = band_keys(e.signature, self.bands, self.rows)
            candidates = sorted({first_in_band[k] for k in bands if k in first_in_band})
            if not any(agreement(signatures[i], signature) >= self.threshold for i in candidates):
                clusters += 1
            for k in bands:
                first_in_band.setdefault(k, len(signatures))
            signatures.append(signature)
        return len(seen), clusters, len(signatures)

    @property
    def repeated_tokens(self) -> int:
        """Tokens of pieces whose document an earlier request kept too (followed documents only)."""
        return sum(e.tokens * (e.requests - 1) for e in self._table.values() if e.requests > 1)

    def to_dict(self, prompt_tokens: int) -> dict[str, Any]:
        def share(x: int, of: int) -> float:
            return round(x / of, 4) if of else 0.0

        distinct, clusters, indexed = self._clusters()
        repeated = self.repeated_tokens
        top_docs = sorted((e for e in self._table.values() if e.requests > 1),
                          key=lambda e: (-e.requests * e.tokens, e.first_request_id, e.first_position))
        return {
            "context_pieces": self.pieces,
            "context_tokens": self.context_tokens,
            "distinct_documents": distinct,
            "near_duplicate_clusters": clusters,
            "within_request": {
                "exact_duplicate_pieces": self.exact_duplicate_pieces,
                "exact_duplicate_tokens": self.exact_duplicate_tokens,
                "exact_duplicate_share_of_context": share(self.exact_duplicate_tokens, self.context_tokens),
                "exact_duplicate_share_of_prompt": share(self.exact_duplicate_tokens, prompt_tokens),
                "near_duplicate_pieces": self.near_duplicate_pieces,
                "near_duplicate_tokens": self.near_duplicate_tokens,
                "near_duplicate_share_of_context": share(self.near_duplicate_tokens, self.context_tokens),
                "near_duplicate_share_of_prompt": share(self.near_duplicate_tokens, prompt_tokens),
                "counted_as": "tokens of the copy after HTML cleanup (what the dedup stage removes after the HTML "
                              "stage)",
                "duplicate_share_of_context": share(self.exact_duplicate_tokens + self.near_duplicate_tokens,
                                                    self.context_tokens),
                "duplicate_share_of_prompt": share(self.exact_duplicate_tokens + self.near_duplicate_tokens,
                                                   prompt_tokens),
            },
            "across_requests": {
                "repeated_tokens": repeated,
                "repeated_share_of_context": share(repeated, self.context_tokens),
                "most_retrieved": [
                    {"first_request_id": e.first_request_id, "requests": e.requests, "tokens": e.tokens,
                     **({"preview": e.preview} if self.keep_text else {})} for e in top_docs[:10]],
                "whole_log": self.sketch.to_dict(self.context_tokens),
            },
            "html": {
                "html_pieces": self.html_pieces,
                "html_tokens": self.html_tokens,
                "boilerplate_tokens": self.boilerplate_tokens,
                "counted_as": "every HTML piece, duplicates included (the HTML stage runs before dedup)",
                "boilerplate_share_of_context": share(self.boilerplate_tokens, self.context_tokens),
                "boilerplate_share_of_prompt": share(self.boilerplate_tokens, prompt_tokens),
            },
            "top_requests": {"duplicates": self.top_duplicates.items(), "boilerplate": self.top_boilerplate.items()},
            "method": {"near_threshold": self.threshold, "num_perm": self.num_perm, "shingle_words": self.shingle_words,
                       "lsh_bands": self.bands, "lsh_rows": self.rows, "max_docs": self.max_docs,
                       "documents_indexed": indexed, "untracked_pieces": self.untracked_pieces,
                       "near_duplicates": "within a request, as the dedup stage finds them"},
        }
