"""The token-savings benchmark behind ``ragtrim bench``: run pipelines over requests and measure what they save.

A request is ``{"id", "query", "answers": [...], "chunks": [...]}`` (the format of the shipped example requests,
``example_requests()``). Measurement and aggregation live here; ``ragtrim.cli`` prints.
"""

from __future__ import annotations

import math
import re
import string
import time
import tracemalloc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim._util.jsonl import iter_jsonl
from ragtrim._util.stats import percentile
from ragtrim.caches import clear_caches
from ragtrim.errors import InputError
from ragtrim.pipeline import Pipeline

EXAMPLE_REQUESTS = "data/example_requests.jsonl"
"""The example corpus's requests inside the package (built by ``examples/build_corpus.py``)."""


def example_requests() -> Path:
    """The shipped example requests file (12 requests over the example pages; ``ragtrim bench``'s default)."""
    return Path(str(resources.files("ragtrim").joinpath(EXAMPLE_REQUESTS)))


# -- answer matching ------------------------------------------------------------------------------------------------
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, strip ASCII punctuation and the articles a/an/the, collapse whitespace (SQuAD's order)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def normalized_answers(answers: Iterable[str]) -> list[str]:
    """The answers, normalized, without those that normalize to nothing."""
    # An answer that normalizes to "" ("The") would match everything; it carries no signal, so skip it.
    return [n for n in (normalize_answer(a) for a in answers) if n]


def answer_in_text(answers: Iterable[str], text: str) -> bool:
    """True when some normalized answer occurs in the normalized ``text`` as a run of whole words.

    Whole-word matching (unlike the plain substring test of "Lost in the Middle") keeps "1" from matching "1990", so
    a trimmed context is credited only for a real answer occurrence.
    """
    haystack = f" {normalize_answer(text)} "
    return any(f" {a} " in haystack for a in normalized_answers(answers))


@dataclass(frozen=True)
class SavingsRequest:
    id: str
    query: str
    chunks: tuple[Any, ...]
    answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class SavingsRecord:
    """One request under one method. ``error`` is set instead of raising, so one bad request never hides the rest."""

    method: str
    request_id: str
    tokens_before: int = 0
    tokens_after: int = 0
    chunks_before: int = 0
    chunks_after: int = 0
    latency_ms: float = 0.0
    cpu_s: float = 0.0
    """CPU seconds of this process (all threads) spent in the call."""
    answer_kept: bool | None = None
    stage_tokens_saved: Mapping[str, int] = field(default_factory=dict)
    stage_ms: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None


def load_requests(path: str | Path) -> list[SavingsRequest]:
    """Read JSONL (optionally .gz) requests; each line needs ``query`` and ``chunks``."""
    out: list[SavingsRequest] = []
    for n, obj in iter_jsonl(path, what="requests file"):
        if not isinstance(obj, dict) or not isinstance(obj.get("chunks"), list):
            raise InputError(f"{path}:{n}: each line must be an object with a 'chunks' list (and 'query')")
        if not isinstance(obj.get("answers", []), list):
            raise InputError(f"{path}:{n}: 'answers' must be a list of strings")
        out.append(
            SavingsRequest(
                id=str(obj.get("id", n)),
                query=str(obj.get("query", "")),
                chunks=tuple(obj["chunks"]),
                answers=tuple(str(a) for a in obj.get("answers", ())),
            )
        )
    return out


def measure(
    method: str,
    pipeline: Pipeline,
    requests: Sequence[SavingsRequest],
    *,
    progress: Callable[[Iterable[SavingsRequest]], Iterable[SavingsRequest]] | None = None,
    cold: bool = True,
) -> list[SavingsRecord]:
    """Run ``pipeline`` on every request (after one warm-up call that loads models) and return per-request records.

    ``cold``: every cache is emptied before each request (``ragtrim.caches.clear_caches``), so no request reuses
    token counts, sentence splits or embeddings computed for an earlier one, or for an earlier method on the same
    request. Off, the latencies are warm: what a repeat of the same passages costs.
    """
    if requests:
        pipeline.run(requests[0].chunks, query=requests[0].query)  # warm-up: lazy loads
    records: list[SavingsRecord] = []
    for req in progress(requests) if progress else requests:
        if cold:
            clear_caches()
        started, cpu_started = time.perf_counter(), time.process_time()
        try:
            result = pipeline.run(req.chunks, query=req.query)
        except Exception as exc:  # noqa: BLE001 - recorded, not raised: the report shows failures per method
            records.append(SavingsRecord(method, req.id, error=f"{type(exc).__name__}: {exc}"))
            continue
        latency_ms = (time.perf_counter() - started) * 1000
        cpu_s = time.process_time() - cpu_started
        records.append(
            SavingsRecord(
                method=method,
                request_id=req.id,
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                chunks_before=len(req.chunks),
                chunks_after=len(result.chunks),
                latency_ms=latency_ms,
                cpu_s=cpu_s,
                answer_kept=answer_in_text(req.answers, result.text) if req.answers else None,
                stage_tokens_saved={r.stage: r.tokens_saved for r in result.trace},
                stage_ms={r.stage: r.seconds * 1000 for r in result.trace},
            )
        )
    return records


def peak_memory_mib(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``fn`` under tracemalloc; return its result and the peak Python heap in MiB."""
    tracemalloc.start()
    try:
        value = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return value, peak / 2**20


def aggregate(records: Sequence[SavingsRecord]) -> dict[str, Any]:
    """Flat summary of one method's records (units in key names)."""
    ok = [r for r in records if r.error is None]
    before = sum(r.tokens_before for r in ok)
    after = sum(r.tokens_after for r in ok)
    lat = [r.latency_ms for r in ok]
    judged = [r.answer_kept for r in ok if r.answer_kept is not None]
    stages: dict[str, int] = {}
    stage_ms: dict[str, list[float]] = {}
    for r in ok:
        for k, v in r.stage_tokens_saved.items():
            stages[k] = stages.get(k, 0) + v
        for k, ms in r.stage_ms.items():
            stage_ms.setdefault(k, []).append(ms)
    return {
        "method": records[0].method if records else "",
        "requests": len(records),
        "errors": len(records) - len(ok),
        "mean_tokens_before": before / len(ok) if ok else 0.0,
        "mean_tokens_after": after / len(ok) if ok else 0.0,
        "tokens_saved": before - after,
        "compression_ratio": before / after if after else float("inf") if before else 1.0,
        "answer_recall": sum(judged) / len(judged) if judged else None,
        "p50_latency_ms": _percentile(lat, 50),
        "p95_latency_ms": _percentile(lat, 95),
        "p99_latency_ms": _percentile(lat, 99),
        "mean_latency_ms": float(np.mean(lat)) if lat else math.nan,
        "mean_cpu_s_per_request": float(np.mean([r.cpu_s for r in ok])) if ok else math.nan,
        "stage_tokens_saved": stages,
        "stage_p50_ms": {k: _percentile(v, 50) for k, v in stage_ms.items()},
    }


def _percentile(values: Sequence[float], q: float) -> float:
    """``ragtrim._util.stats.percentile``; no values: NaN, shown as "n/a"."""
    return percentile(values, q) if values else math.nan
