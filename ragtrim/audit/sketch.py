"""Every document of the log, estimated from a bounded sample: a bottom-k sketch (KMV, "k minimum values": Bar-Yossef
et al. 2002; Beyer et al. 2007) of the distinct normalized documents.

The exact document table (``ragtrim.audit.duplicates``) follows the first ``max_docs`` documents of the log; past
that, how many distinct documents the log holds and how many of its tokens repeat earlier requests' documents are
estimated here. Each document is kept or not by a stable 64-bit hash of its normalized text alone, so a document in
the final sample was in it from its first piece on (its counts are complete), and the sample of two stretches of the
log is the ``k`` smallest of their two samples: merging is exact, whatever the order or the split.

Estimates, with ``tau`` the k-th smallest hash as a share of the hash space: distinct documents ``(k - 1) / tau``,
relative standard error at most ``1 / sqrt(k - 2)``; a sum over documents, the sum over the sampled documents below
``tau`` divided by ``tau`` (each was sampled with probability ``tau``), relative standard error from the sample.
With fewer than ``k`` documents every number is exact.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from typing import Any

SKETCH_K = 8192
"""Distinct documents sampled: a relative standard error of at most 1.1% for their count, about 1 MB per state."""
_SPACE = float(2**64)


def stable_key(text: str) -> int:
    """A document's 64-bit key, the same in every process (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


class DocumentSketch:
    """A bottom-k sample of distinct documents, each with its tokens and the requests that kept it."""

    def __init__(self, k: int = SKETCH_K) -> None:
        self.k = k
        self._docs: dict[int, list[int]] = {}  # key -> [tokens, requests that kept it]
        self._heap: list[int] = []  # the sampled keys, negated: the largest on top

    def add(self, key: int, tokens: int, kept: int) -> None:
        """A piece of document ``key`` (``tokens``); ``kept``: 1 when its request kept it (not a duplicate)."""
        doc = self._docs.get(key)
        if doc is None:
            if len(self._docs) >= self.k:
                if key > -self._heap[0]:
                    return
                del self._docs[-heapq.heappushpop(self._heap, -key)]
            else:
                heapq.heappush(self._heap, -key)
            doc = self._docs[key] = [tokens, 0]
        doc[1] += kept

    def absorb(self, later: DocumentSketch) -> None:
        """Add ``later``, the sketch of the next stretch of the log (the result is the sketch of both)."""
        for key, (tokens, requests) in later._docs.items():
            mine = self._docs.get(key)
            if mine is not None:
                mine[1] += requests
                continue
            self.add(key, tokens, 0)
            if key in self._docs:
                self._docs[key][1] = requests

    def _sum(self, values: dict[int, float]) -> tuple[float, float]:
        """(estimate, relative standard error) of the sum of a value over every document."""
        if len(self._docs) < self.k:
            return sum(values.values()), 0.0
        tau = -self._heap[0] / _SPACE
        below = [v for key, v in values.items() if key / _SPACE < tau]
        total = sum(below) / tau
        spread = math.sqrt((1 - tau) * sum(v * v for v in below)) / tau
        return total, spread / total if total else 0.0

    def to_dict(self, context_tokens: int) -> dict[str, Any]:
        exact = len(self._docs) < self.k
        if exact:
            distinct, distinct_rse = float(len(self._docs)), 0.0
        else:
            distinct, distinct_rse = (self.k - 1) / (-self._heap[0] / _SPACE), 1 / math.sqrt(self.k - 2)
        repeated, repeated_rse = self._sum({k: float(t * (r - 1)) for k, (t, r) in self._docs.items() if r > 1})
        again, again_rse = self._sum({k: 1.0 for k, (_, r) in self._docs.items() if r > 1})
        return {
            "method": f"bottom-k sample (KMV) of the log's distinct normalized documents, k = {self.k:,}; exact "
                      "below k documents",
            "exact": exact,
            "distinct_documents": round(distinct),
            "distinct_documents_rse": round(distinct_rse, 4),
            "documents_retrieved_again": round(again),
            "documents_retrieved_again_rse": round(again_rse, 4),
            "repeated_tokens": round(repeated),
            "repeated_tokens_rse": round(repeated_rse, 4),
            "repeated_share_of_context": round(repeated / context_tokens, 4) if context_tokens else 0.0,
            "rse": "relative standard error of the estimate (0 when exact); the truth is within 3 of them of it "
                   "with 99.7% probability",
        }
