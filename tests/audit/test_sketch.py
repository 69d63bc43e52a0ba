"""The bottom-k document sketch: exact below k, merged exactly whatever the split, and its estimates within 3 of
their stated relative standard errors of the truth on logs of thousands of documents."""

from __future__ import annotations

import itertools
import random

import pytest

from ragtrim.audit.config import AuditConfig
from ragtrim.audit.core import run_audit
from ragtrim.audit.sketch import DocumentSketch, stable_key
from tests.audit.logs import write_log


def stream(n_docs: int, seed: int) -> list[tuple[int, int, int]]:
    """(key, tokens, kept) pieces of ``n_docs`` documents: retrieval counts from a heavy-tailed law (most documents
    once, a few hundreds of times), some duplicate copies, in a shuffled order."""
    rng = random.Random(seed)
    pieces = []
    for i in range(n_docs):
        key, tokens = stable_key(f"document {i} of seed {seed}"), rng.randrange(40, 400)
        retrieved = min(500, int(rng.paretovariate(1.3)))
        pieces += [(key, tokens, 1)] * retrieved + [(key, tokens, 0)] * rng.choice([0, 0, 0, 1, 2])
    rng.shuffle(pieces)
    return pieces


def truth(pieces: list[tuple[int, int, int]]) -> dict[str, float]:
    docs: dict[int, list[int]] = {}
    for key, tokens, kept in pieces:
        docs.setdefault(key, [tokens, 0])[1] += kept
    return {"distinct_documents": len(docs),
            "repeated_tokens": sum(t * (r - 1) for t, r in docs.values() if r > 1),
            "documents_retrieved_again": sum(1 for _, r in docs.values() if r > 1)}


def sketch_of(pieces: list[tuple[int, int, int]], k: int) -> DocumentSketch:
    s = DocumentSketch(k)
    for piece in pieces:
        s.add(*piece)
    return s


def test_exact_below_k() -> None:
    pieces = stream(300, seed=1)
    d = sketch_of(pieces, 1000).to_dict(10**6)
    assert d["exact"] and d["distinct_documents_rse"] == d["repeated_tokens_rse"] == 0
    assert {k: d[k] for k in truth(pieces)} == truth(pieces)


def test_merged_in_parts_equals_one_pass() -> None:
    pieces = stream(3000, seed=2)
    one = sketch_of(pieces, 64)
    for cuts in ([1000], [10, 5000, 5001, 9000], list(range(500, len(pieces), 500))):
        bounds = [0, *cuts, len(pieces)]
        parts = [sketch_of(pieces[a:b], 64) for a, b in itertools.pairwise(bounds)]
        merged = parts[0]
        for p in parts[1:]:
            merged.absorb(p)
        assert merged.to_dict(1) == one.to_dict(1) and not one.to_dict(1)["exact"]


@pytest.mark.parametrize(("n_docs", "k", "seed"), [(20_000, 512, 3), (20_000, 2048, 4), (60_000, 1024, 5),
                                                   (8_000, 4096, 6), (40_000, 256, 7)])
def test_estimates_are_within_three_standard_errors(n_docs: int, k: int, seed: int) -> None:
    """The stated bound: an estimate is within 3 relative standard errors of the truth (99.7% for a normal error);
    the count's error is at most 1/sqrt(k - 2)."""
    pieces = stream(n_docs, seed)
    exact = truth(pieces)
    d = sketch_of(pieces, k).to_dict(10**9)
    assert not d["exact"] and d["distinct_documents_rse"] == pytest.approx(1 / (k - 2) ** 0.5, abs=1e-4)
    for name, value in exact.items():
        assert abs(d[name] - value) <= 3 * d[f"{name}_rse"] * d[name], (name, d[name], value, d[f"{name}_rse"])


def test_the_report_gives_the_sketch_beside_the_exact_table(tmp_path: object) -> None:
    from pathlib import Path

    log = write_log(Path(str(tmp_path)) / "log.jsonl", 300, seed=8)
    docs = run_audit(log, AuditConfig(savings=None))["documents"]
    whole = docs["across_requests"]["whole_log"]
    assert whole["exact"] and whole["distinct_documents"] == docs["distinct_documents"]
    assert 0 < whole["repeated_share_of_context"] < 1
