"""Serving metrics from request records (pure functions, unit-tested on hand-made records).

Key names follow vLLM's serving benchmark: ``p99_ttft_ms``, ``request_throughput``, ``goodput`` ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragtrim_bench.common.stats import mean, summarize
from ragtrim_bench.gpu.records import RequestRecord


def _dist(values: Sequence[float], name: str) -> dict[str, float]:
    """Mean, p50, p95 and p99 in ms (the keys vLLM's serving benchmark reports)."""
    return {k: v for k, v in summarize(values, name, "ms").items() if not k.startswith(("p90_", "max_"))}


def summarize_records(
    records: Sequence[RequestRecord], *, duration_s: float, ttft_slo_ms: float | None = None
) -> dict[str, Any]:
    """Latency distributions, throughput and goodput for one run of ``duration_s`` seconds (wall time of the run)."""
    ok = [r for r in records if r.success]
    itl = [x for r in ok for x in r.itl_ms]
    out: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "duration_s": duration_s,
        "total_prompt_tokens": sum(r.prompt_tokens for r in ok),
        "total_output_tokens": sum(r.output_tokens for r in ok),
        "mean_prompt_tokens": mean([r.prompt_tokens for r in ok]),
        "request_throughput": len(ok) / duration_s if duration_s > 0 else 0.0,
        "output_throughput": sum(r.output_tokens for r in ok) / duration_s if duration_s > 0 else 0.0,
        "total_token_throughput": sum(r.prompt_tokens + r.output_tokens for r in ok) / duration_s if duration_s > 0 else 0.0,
        **_dist([r.ttft_ms for r in ok], "ttft"),
        **_dist([r.tpot_ms for r in ok if r.output_tokens > 1], "tpot"),
        **_dist(itl, "itl"),
        **_dist([r.e2e_ms for r in ok], "e2el"),
    }
    if ttft_slo_ms is not None:
        good = [r for r in ok if r.ttft_ms <= ttft_slo_ms]
        out["ttft_slo_ms"] = ttft_slo_ms
        out["goodput"] = len(good) / duration_s if duration_s > 0 else 0.0
        out["slo_attainment"] = len(good) / len(records) if records else 0.0
    return out


def throughput_at_slo(
    ladder: Sequence[dict[str, Any]], *, slo_ms: float, key: str = "p95_ttft_ms"
) -> dict[str, Any]:
    """Highest measured request throughput among ladder steps whose ``key`` stays within ``slo_ms``.

    ``ladder`` holds summaries of runs at increasing request rates. Returns the rate and throughput of the best
    passing step, or zeros when no step passes.
    """
    passing = [s for s in ladder if s.get(key, float("inf")) <= slo_ms and s.get("failed", 0) == 0]
    if not passing:
        return {"slo_ms": slo_ms, "slo_key": key, "request_rate": 0.0, "request_throughput": 0.0}
    best = max(passing, key=lambda s: s["request_throughput"])
    return {
        "slo_ms": slo_ms,
        "slo_key": key,
        "request_rate": best.get("request_rate", 0.0),
        "request_throughput": best["request_throughput"],
    }
