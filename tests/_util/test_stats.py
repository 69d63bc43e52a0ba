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


# -- the paired statistics of ragtrim gate ---------------------------------------------------------------------------
def test_mcnemar_hand_values() -> None:
    from ragtrim._util.stats import mcnemar_exact_p

    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(3, 3) == 1.0
    assert mcnemar_exact_p(6, 0) == 2 / 64  # all six discordant pairs one way
    assert mcnemar_exact_p(1, 4) == pytest.approx(2 * (1 + 5) / 32)  # P(X <= 1) of Binomial(5, 1/2), twice
    with pytest.raises(InputError, match="counts must be >= 0"):
        mcnemar_exact_p(-1, 2)


def test_wilson_interval() -> None:
    import math

    from ragtrim._util.stats import wilson_interval

    low, high = wilson_interval(291, 300)
    assert low == pytest.approx(0.94398, abs=1e-5) and high == pytest.approx(0.98414, abs=1e-5)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(0, 10)[0] == pytest.approx(0.0)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_paired_bootstrap_keeps_pairs_and_is_seeded() -> None:
    from ragtrim._util.stats import mean_difference, paired_bootstrap

    a = [1.0] * 50 + [0.0] * 50
    b = list(a)  # the same outcomes: every resample has the same means, so the interval is the point
    assert paired_bootstrap(a, b, mean_difference, rounds=200) == (0.0, 0.0, 0.0)
    c = [1.0] * 40 + [0.0] * 60  # ten items lost
    point, low, high = paired_bootstrap(a, c, mean_difference, rounds=500, seed=1)
    assert point == pytest.approx(-0.1)
    assert -0.17 < low < -0.1 < high < -0.04
    assert paired_bootstrap(a, c, mean_difference, rounds=500, seed=1) == (point, low, high)
    assert paired_bootstrap(a, c, mean_difference, rounds=0) == (point, point, point)


def test_paired_bootstrap_refuses_bad_input() -> None:
    from ragtrim._util.stats import mean_difference, paired_bootstrap

    with pytest.raises(InputError, match="same length"):
        paired_bootstrap([1.0], [1.0, 2.0], mean_difference)
    with pytest.raises(InputError, match="empty sample"):
        paired_bootstrap([], [], mean_difference)
    with pytest.raises(InputError, match="rounds must be >= 0"):
        paired_bootstrap([1.0], [1.0], mean_difference, rounds=-1)


def test_percentile_ratio() -> None:
    import math

    from ragtrim._util.stats import paired_bootstrap, percentile_ratio

    slow = [100.0, 120.0, 140.0, 160.0]
    fast = [50.0, 60.0, 70.0, 80.0]
    assert percentile_ratio(50)(slow, fast) == 2.0
    point, low, high = paired_bootstrap(slow, fast, percentile_ratio(50), rounds=300)
    assert point == 2.0 and low == 2.0 and high == 2.0  # every pair is exactly twice as fast
    assert percentile_ratio(50)([1.0], [0.0]) == math.inf
