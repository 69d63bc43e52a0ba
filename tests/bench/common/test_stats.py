from __future__ import annotations

import math

import numpy as np
import pytest

from ragtrim.errors import InputError
from ragtrim_bench.common.stats import mean, percentile, summarize_ms


class TestPercentile:
    @pytest.mark.parametrize("q", [0, 25, 50, 90, 95, 99, 100])
    def test_matches_numpy_linear(self, q: float) -> None:
        xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))

    def test_hand_values(self) -> None:
        assert percentile([1, 2, 3, 4], 50) == 2.5
        assert percentile([10], 99) == 10

    def test_empty_is_nan(self) -> None:
        assert math.isnan(percentile([], 50)) and math.isnan(mean([]))

    def test_bad_q(self) -> None:
        with pytest.raises(InputError, match="within"):
            percentile([1], 101)

    def test_summary_keys_carry_units(self) -> None:
        s = summarize_ms([1.0, 2.0, 3.0])
        assert s["p50_latency_ms"] == 2.0 and s["max_latency_ms"] == 3.0 and s["mean_latency_ms"] == 2.0


def test_wilson_interval() -> None:
    from ragtrim_bench.common.stats import wilson_interval

    low, high = wilson_interval(291, 300)  # 0.97 on 300 requests: about +-0.02
    assert low == pytest.approx(0.94398, abs=1e-4) and high == pytest.approx(0.98414, abs=1e-4)
    assert wilson_interval(300, 300)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_mcnemar_exact_p() -> None:
    from ragtrim_bench.common.stats import mcnemar_exact_p

    assert mcnemar_exact_p(0, 0) == 1.0 and mcnemar_exact_p(5, 5) == 1.0
    assert mcnemar_exact_p(0, 6) == 2 / 64  # all six discordant pairs one way
    assert mcnemar_exact_p(2, 10) == pytest.approx(2 * (1 + 12 + 66) / 4096)  # scipy's binomtest: 0.0386
