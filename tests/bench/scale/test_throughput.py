"""The throughput benchmark's arithmetic (steady rates from progress events, the 100M plan from a rate) and its run
without Ray."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragtrim_bench.scale.throughput import ThroughputConfig, plan, plans, run, steady_rate


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


def test_plans_without_ray_take_the_local_engines_one_core_rates() -> None:
    result = {"audit": {"local": {"requests_per_s": 3000.0}, "ray": []},
              "index": {"local": {"passages_per_s": 40.0, "threads": 1}, "ray": []}}
    out = plans(result)
    assert out["audit"] == {"from_engine": "local", **plan(3000.0)}
    assert out["index"] == {"from_engine": "local", **plan(40.0)}
    # the local index with several threads is not one core's rate
    assert "index" not in plans({"index": {"local": {"passages_per_s": 90.0, "threads": None}, "ray": []}})


@pytest.mark.data
def test_the_audit_arm_runs_without_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_data: Path) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as on a host without the extra
    monkeypatch.setenv("RAGTRIM_DATA", str(shared_data.resolve()))  # the synthetic log is built from shared data
    monkeypatch.chdir(tmp_path)  # the generated log goes to ./.cache/scale
    result = run(ThroughputConfig(jobs=("audit",), audit_requests=300, ray=False))
    audit = result["audit"]
    assert audit["requests"] == 300 and audit["ray"] == [] and audit["local"]["requests_per_s"] > 0
    assert result["plan"]["audit"]["from_engine"] == "local" and "gpu" not in result
