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
