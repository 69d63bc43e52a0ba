"""The statistics of ragtrim and its benchmarks: one percentile (linear interpolation between closest ranks, numpy's
default), the Wilson interval of a rate, the exact McNemar test of paired right/wrong outcomes, and a paired bootstrap.

Pure and dependency-free, so the planner and the gate can use them without importing the evaluation code.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from ragtrim.errors import InputError


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (``q`` in [0, 100]) of ``values``, interpolated linearly (numpy's default method).

    Empty input raises ``InputError``: there is no percentile of nothing, and a NaN would travel silently into
    plans and JSON results (where it is not even valid JSON). A report that wants to show "no data" checks for
    empty input itself.
    """
    if not 0 <= q <= 100:
        raise InputError(f"percentile q must be within [0, 100], got {q}")
    if not values:
        raise InputError("percentile of an empty sequence is undefined; give at least one value")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def wilson_interval(successes: int, n: int, *, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a rate (95% by default): how far a rate measured on ``n`` trials may sit from
    the true one. ``n == 0`` gives NaNs."""
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar test of two methods judged on the same items: ``only_a`` items only A got right,
    ``only_b`` only B. The p-value of a split at least this lopsided if neither were better (1.0 with none)."""
    if only_a < 0 or only_b < 0:
        raise InputError(f"McNemar counts must be >= 0, got {only_a} and {only_b}")
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2 * tail)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float], Sequence[float]], float],
    *,
    rounds: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """``(statistic(a, b), low, high)``: the statistic and its bootstrap percentile interval at ``level``, from
    ``rounds`` resamples of the pairs ``(a[i], b[i])`` (the same items drawn for both, so the pairing is kept).

    ``a`` and ``b`` must have the same length, at least 1; ``rounds=0`` gives the statistic as both ends. The draws
    depend only on ``seed`` and the length, so two statistics of one run resample the same items."""
    if len(a) != len(b):
        raise InputError(f"paired samples must have the same length, got {len(a)} and {len(b)}")
    if not a:
        raise InputError("bootstrap of an empty sample is undefined; give at least one pair")
    if rounds < 0:
        raise InputError(f"rounds must be >= 0, got {rounds}")
    if not 0 < level < 1:
        raise InputError(f"level must be in (0, 1), got {level}")
    point = statistic(a, b)
    if rounds == 0:
        return point, point, point
    rng = random.Random(seed)
    n = len(a)
    positions = range(n)
    draws = []
    for _ in range(rounds):
        idx = rng.choices(positions, k=n)
        draws.append(statistic([a[i] for i in idx], [b[i] for i in idx]))
    finite = [d for d in draws if math.isfinite(d)]
    if not finite:
        return point, math.nan, math.nan
    tail = (1 - level) / 2 * 100
    return point, percentile(finite, tail), percentile(finite, 100 - tail)


def mean_difference(a: Sequence[float], b: Sequence[float]) -> float:
    """``mean(b) - mean(a)``: what B gains over A (negative: B loses), for ``paired_bootstrap``."""
    return sum(b) / len(b) - sum(a) / len(a)


def percentile_ratio(q: float) -> Callable[[Sequence[float], Sequence[float]], float]:
    """A statistic for ``paired_bootstrap``: ``percentile(a, q) / percentile(b, q)``, how many times smaller B's
    ``q``-th percentile is than A's (a speed-up above 1). A zero denominator gives infinity."""
    def ratio(a: Sequence[float], b: Sequence[float]) -> float:
        den = percentile(b, q)
        return percentile(a, q) / den if den > 0 else math.inf

    return ratio
