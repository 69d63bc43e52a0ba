"""ragtrim._util.stats.percentile: the one percentile the planner (and, after the merge, the benchmarks) use."""

from __future__ import annotations

import numpy as np
import pytest

from ragtrim._util.stats import percentile
from ragtrim.errors import InputError


@pytest.mark.parametrize("q", [0, 10, 25, 50, 90, 95, 99, 100])
def test_matches_numpy_linear(q: float) -> None:
    xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0, 5.0]
    assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_hand_values() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 0) == 1 and percentile([1, 2, 3, 4], 100) == 4
    assert percentile([10], 99) == 10
    assert percentile([4, 1, 3, 2], 25) == 1.75  # unsorted input


def test_empty_input_is_a_typed_error() -> None:
    with pytest.raises(InputError, match="percentile of an empty sequence is undefined"):
        percentile([], 50)


@pytest.mark.parametrize("q", [-1, 100.5, 101])
def test_q_out_of_range(q: float) -> None:
    with pytest.raises(InputError, match=r"q must be within \[0, 100\], got"):
        percentile([1.0], q)


def test_input_is_not_mutated() -> None:
    xs = [3, 1, 2]
    percentile(xs, 50)
    assert xs == [3, 1, 2]
