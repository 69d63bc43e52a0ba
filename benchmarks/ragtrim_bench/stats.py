"""Pure statistics for benchmark reports: percentiles and latency summaries (unit-tested, no printing)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragtrim.errors import InputError


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default).

    Empty input gives NaN: a report shows "no data" rather than a made-up number.
    """
    if not 0 <= q <= 100:
        raise InputError(f"percentile q must be within [0, 100], got {q}")
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


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
