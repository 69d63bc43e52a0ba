"""Pure statistics for benchmark reports: percentiles and latency summaries (unit-tested, no printing); the Wilson
interval and the McNemar test are the library's (``ragtrim._util.stats``), re-exported."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragtrim._util.stats import mcnemar_exact_p, wilson_interval
from ragtrim._util.stats import percentile as _percentile


def percentile(values: Sequence[float], q: float) -> float:
    """``ragtrim._stats.percentile`` (the one implementation), except that empty input gives NaN: a report shows
    "no data" rather than a made-up number."""
    return _percentile(values, q) if values else _checked_nan(q)


def _checked_nan(q: float) -> float:
    _percentile([0.0], q)  # the same q check and message
    return math.nan


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def summarize(values: Sequence[float], prefix: str, unit: str) -> dict[str, float]:
    """``{f"mean_{prefix}_{unit}", p50, p90, p95, p99, max}``: flat keys with the unit in the name."""
    return {
        f"mean_{prefix}_{unit}": mean(values),
        f"p50_{prefix}_{unit}": percentile(values, 50),
        f"p90_{prefix}_{unit}": percentile(values, 90),
        f"p95_{prefix}_{unit}": percentile(values, 95),
        f"p99_{prefix}_{unit}": percentile(values, 99),
        f"max_{prefix}_{unit}": max(values) if values else math.nan,
    }


def summarize_ms(values_ms: Sequence[float], prefix: str = "latency") -> dict[str, float]:
    return summarize(values_ms, prefix, "ms")


__all__ = ["mcnemar_exact_p", "mean", "percentile", "summarize", "summarize_ms", "wilson_interval"]
