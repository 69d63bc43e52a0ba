"""Retrieved documents across the log: exact and near duplicates within a request (tokens ragtrim's dedup stage
removes), documents retrieved again by later requests, and the HTML boilerplate share (tokens ragtrim's HTML stage
removes). Each distinct document is cleaned, normalized and MinHashed once.

Counted in the pipeline's order, so that the two numbers add up to what its two stages remove: the HTML stage runs
first and cleans every HTML piece, copies included (boilerplate tokens of every piece); the dedup stage then sees
the cleaned text, so duplicates are found on it and weigh its cleaned tokens.

Near duplicates use the dedup stage's shingles and seeded MinHash (``ragtrim.dedup``) with LSH banding over
every distinct document of the log (up to ``max_docs``); a candidate counts when the signatures agree on at least
``threshold`` of their positions (an estimate of the word-shingle Jaccard; standard error about 0.035 at 0.8).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragtrim.audit.breakdown import CountCache, TopK
from ragtrim.audit.reader import AuditRequest

DEFAULT_MAX_DOCS = 200_000
PREVIEW_CHARS = 160


@dataclass(slots=True)
class _Doc:
    norm_key: int
    cluster: int
    tokens: int
    boilerplate_tokens: int
    is_html: bool
    clean_tokens: int = 0
    requests: int = 0
    last_request: int = -1
    first_request_id: str = ""
    preview: str = ""


@dataclass(frozen=True, slots=True)
class RequestDocs:
    """What one request's context holds: duplicate and boilerplate tokens, and tokens seen in earlier requests."""

    exact_duplicate_tokens: int
    near_duplicate_tokens: int
    boilerplate_tokens: int
    repeated_tokens: int


class DocumentAnalysis:
    def __init__(self, counts: CountCache, *, threshold: float = 0.8, num_perm: int = 128, shingle_words: int = 3,
                 seed: int = 1, max_docs: int = DEFAULT_MAX_DOCS, keep_text: bool = True, html: bool = True) -> None:
        from ragtrim.dedup.minhash import lsh_bands

        self.counts = counts
        self.threshold = threshold
        self.num_perm = num_perm
        self.shingle_words = shingle_words
        self.seed = seed
        self.max_docs = max_docs
        self.keep_text = keep_text
        self.html = html
        self.bands, self.rows = lsh_bands(threshold, num_perm)
        self._docs: dict[int, _Doc] = {}  # raw text hash -> doc
        self._by_norm: dict[int, _Doc] = {}
        self._band_index: list[dict[bytes, int]] = [{} for _ in range(self.bands)]  # band key -> doc index
        self._signatures: Any = None  # numpy (capacity, num_perm) uint32, rows by doc index
        self._indexed = 0
        self._cleaner: Any = None
        self._cluster_of: list[int] = []  # doc index -> cluster
        self._clusters = 0
        self.request_seq = 0
        self.pieces = 0
        self.context_tokens = 0
        self.exact_duplicate_tokens = 0
        self.near_duplicate_tokens = 0
        self.exact_duplicate_pieces = 0
        self.near_duplicate_pieces = 0
        self.repeated_tokens = 0
        self.boilerplate_tokens = 0
        self.html_pieces = 0
        self.html_tokens = 0
        self.untracked_pieces = 0
        self.top_duplicates = TopK()
        self.top_boilerplate = TopK()

    # -- per document, once ---------------------------------------------------------------------------------------
    def _new_docs(self, texts: dict[int, str], tokens: dict[int, int]) -> None:
        from ragtrim.dedup.minhash import minhash_signatures
        from ragtrim.dedup.shingles import batch_shingle_hashes, sorted_unique, word_text
        from ragtrim.html.markup import looks_like_html
        from ragtrim.text.sentences import normalize_text

        fresh: list[tuple[int, _Doc, str]] = []  # docs whose normalized text is new: they need a signature
        cleaned: dict[int, str] = {}
        for raw_key, text in texts.items():
            if self.html and looks_like_html(text):
                cleaned[raw_key] = self._clean(text)
        clean_counts = dict(zip(cleaned, self.counts.counts(list(cleaned.values())), strict=True)) if cleaned else {}
        for raw_key, text in texts.items():
            clean = cleaned.get(raw_key, text)
            normalized = normalize_text(clean)
            norm_key = hash(normalized)
            same = self._by_norm.get(norm_key)
            raw_tokens = tokens[raw_key]
            clean_tokens = clean_counts.get(raw_key, raw_tokens)
            # A piece the HTML stage would leave as it is (no markup to render) is not HTML for the report either.
            is_html = raw_key in cleaned and clean != text
            doc = _Doc(norm_key, same.cluster if same else -1, raw_tokens, max(0, raw_tokens - clean_tokens),
                       is_html, clean_tokens)
            if self.keep_text:
                doc.preview = text[:PREVIEW_CHARS]
            self._docs[raw_key] = doc
            if same is None:
                self._by_norm[norm_key] = doc
                fresh.append((raw_key, doc, word_text(normalized)))
        if not fresh:
            return
        sets = [sorted_unique(h) for h in batch_shingle_hashes([w for _, _, w in fresh], self.shingle_words)]
        sigs = minhash_signatures(sets, self.num_perm, self.seed)
        for (_, doc, _), sig, shingles in zip(fresh, sigs, sets, strict=True):
            doc.cluster = self._near_cluster(sig, len(shingles) > 0)

    def _clean(self, text: str) -> str:
        if self._cleaner is None:
            from ragtrim.stages.html import HtmlCleaner

            self._cleaner = HtmlCleaner()
        return str(self._cleaner.clean(text).text)

    def _near_cluster(self, sig: Any, has_words: bool) -> int:
        """The cluster of the first indexed document this signature is a near duplicate of, else a new cluster."""
        import numpy as np

        keys = [sig[b * self.rows:(b + 1) * self.rows].tobytes() for b in range(self.bands)] if has_words else []
        best, best_agree = -1, self.threshold
        for band, key in enumerate(keys):
            other = self._band_index[band].get(key)
            if other is not None:
                agree = float(np.mean(self._signatures[other] == sig))
                if agree > best_agree or (agree == best_agree and (best < 0 or other < best)):
                    best, best_agree = other, agree
        cluster = self._new_cluster() if best < 0 else self._cluster_of[best]
        if self._indexed >= self.max_docs or not has_words:
            return cluster
        index = self._indexed
        if self._signatures is None or index >= len(self._signatures):
            grown = np.empty((max(1024, 2 * index), self.num_perm), dtype=np.uint32)
            if self._signatures is not None:
                grown[:index] = self._signatures[:index]
            self._signatures = grown
        self._signatures[index] = sig
        self._indexed += 1
        for band, key in enumerate(keys):
            self._band_index[band].setdefault(key, index)
        self._cluster_of.append(cluster)
        return cluster

    def _new_cluster(self) -> int:
        self._clusters += 1
        return self._clusters

    # -- per request -----------------------------------------------------------------------------------------------
    def add_batch(self, requests: Sequence[AuditRequest], seg_counts: Sequence[Sequence[int]]) -> list[RequestDocs]:
        new_texts: dict[int, str] = {}
        new_tokens: dict[int, int] = {}
        for req, counts in zip(requests, seg_counts, strict=True):
            for seg, n in zip(req.segments, counts, strict=True):
                if seg.part == "context":
                    k = hash(seg.text)
                    if k not in self._docs and k not in new_texts and len(self._docs) + len(new_texts) < self.max_docs:
                        new_texts[k] = seg.text
                        new_tokens[k] = n
        if new_texts:
            self._new_docs(new_texts, new_tokens)
        return [self._request(req, counts) for req, counts in zip(requests, seg_counts, strict=True)]

    def _request(self, req: AuditRequest, counts: Sequence[int]) -> RequestDocs:
        self.request_seq += 1
        seen_clusters: set[int] = set()
        seen_norms: set[int] = set()
        exact = near = boiler = repeated = 0
        for seg, n in zip(req.segments, counts, strict=True):
            if seg.part != "context":
                continue
            self.pieces += 1
            self.context_tokens += n
            doc = self._docs.get(hash(seg.text))
            if doc is None:  # past max_docs: counted, not analysed
                self.untracked_pieces += 1
                continue
            if doc.is_html:  # the HTML stage cleans every piece, copies included
                self.html_pieces += 1
                self.html_tokens += n
                boiler += doc.boilerplate_tokens
            if doc.norm_key in seen_norms:  # then dedup drops the cleaned copy
                exact += doc.clean_tokens
                self.exact_duplicate_pieces += 1
                continue
            if doc.cluster in seen_clusters:
                near += doc.clean_tokens
                self.near_duplicate_pieces += 1
                continue
            seen_norms.add(doc.norm_key)
            seen_clusters.add(doc.cluster)
            if doc.last_request >= 0:
                repeated += n
            if doc.last_request != self.request_seq:
                doc.requests += 1
                doc.last_request = self.request_seq
                if not doc.first_request_id:
                    doc.first_request_id = req.request_id
        self.exact_duplicate_tokens += exact
        self.near_duplicate_tokens += near
        self.boilerplate_tokens += boiler
        self.repeated_tokens += repeated
        if exact + near:
            self.top_duplicates.offer(exact + near, req.request_id, {"line": req.line})
        if boiler:
            self.top_boilerplate.offer(boiler, req.request_id, {"line": req.line})
        return RequestDocs(exact, near, boiler, repeated)

    def to_dict(self, prompt_tokens: int) -> dict[str, Any]:
        def share(x: int, of: int) -> float:
            return round(x / of, 4) if of else 0.0

        docs = list(self._docs.values())
        top_docs = sorted((d for d in docs if d.requests > 1), key=lambda d: (-d.requests * d.tokens, d.first_request_id))
        return {
            "context_pieces": self.pieces,
            "context_tokens": self.context_tokens,
            "distinct_documents": len(self._by_norm),
            "near_duplicate_clusters": self._clusters,
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
                "repeated_tokens": self.repeated_tokens,
                "repeated_share_of_context": share(self.repeated_tokens, self.context_tokens),
                "most_retrieved": [
                    {"first_request_id": d.first_request_id, "requests": d.requests, "tokens": d.tokens,
                     **({"preview": d.preview} if self.keep_text else {})} for d in top_docs[:10]],
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
                       "documents_indexed": self._indexed, "untracked_pieces": self.untracked_pieces},
        }
