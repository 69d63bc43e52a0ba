"""The throughput benchmark's arithmetic: steady rates from progress events, and the 100M plan from a rate."""

from __future__ import annotations

import pytest

from ragtrim_bench.scale.throughput import plan, plans, steady_rate


def test_steady_rate_leaves_out_start_up() -> None:
    # 10 s of start-up before the first batch, then 100 items a second
    assert steady_rate([(10.0, 50), (11.0, 150), (13.0, 350)]) == 100.0
    assert steady_rate([(1.0, 5)]) is None and steady_rate([]) is None
    assert steady_rate([(2.0, 5), (2.0, 9)]) is None


def test_plan_hours() -> None:
    p = plan(1000.0, items=36_000_000, workers=(1, 10))
    assert p == {"per_worker_per_s": 1000.0, "worker_hours": 10.0, "hours_by_workers": {"1": 10.0, "10": 1.0}}


def test_plans_take_the_best_per_worker_rate() -> None:
    result = {"audit": {"ray": [{"workers": 1, "steady_requests_per_s": 900.0},
                                {"workers": 2, "steady_requests_per_s": 1000.0}]},
              "index": {"ray": [{"workers": 2, "steady_passages_per_s": None}]},
              "gpu": {"gpus": 1, "steady_passages_per_s": 5000.0}}
    out = plans(result)
    assert out["audit"]["from_workers"] == 1 and out["audit"]["per_worker_per_s"] == 900.0
    assert "index" not in out
    assert out["index_gpu"]["worker_hours"] == pytest.approx(100_000_000 / 5000 / 3600, abs=0.1)
