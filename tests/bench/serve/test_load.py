"""The serve benchmarks' load helpers (ragtrim_bench.serve.load)."""

from __future__ import annotations

import math

from ragtrim_bench.serve.load import jain_index


def test_jain_index() -> None:
    assert jain_index([5, 5, 5, 5]) == 1.0
    assert jain_index([1, 0, 0, 0]) == 0.25
    assert jain_index([11, 3, 3, 3]) == 400 / (4 * (121 + 27))
    assert jain_index([0, 0]) == 1.0
    assert math.isnan(jain_index([]))
