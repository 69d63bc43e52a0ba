"""Pure statistics for benchmark reports: percentiles and latency summaries (unit-tested, no printing)."""

from __future__ import annotations

import math
from collections.abc import Sequence

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


def wilson_interval(successes: int, n: int, *, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a rate (95% by default): how far a recall measured on ``n`` requests may sit from
    the true one. ``n == 0`` gives NaNs."""
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar test of two methods judged on the same requests: ``only_a`` requests only A got right,
    ``only_b`` only B. The p-value of a difference at least this lopsided if neither were better (1.0 with none)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2 * tail)
