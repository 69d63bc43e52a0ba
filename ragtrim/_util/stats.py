"""The one percentile of ragtrim and its benchmarks: linear interpolation between closest ranks (numpy's default).

Pure and dependency-free, so the planner can use it without importing the evaluation code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
