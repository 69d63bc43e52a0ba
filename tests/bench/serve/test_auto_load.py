"""``ragtrim-bench serve auto_load``: real gateways in front of a real fake upstream, under a Poisson ladder."""

from __future__ import annotations

import pytest

from ragtrim_bench.serve.auto_load import ARMS, AutoLoadConfig, measure, step_requests


def test_every_arm_climbs_the_ladder_and_auto_records_each_choice(shared_data: object) -> None:
    config = AutoLoadConfig(rates=(3.0,), step_s=2.0, learn=2)
    arms = measure(config)["arms"]
    assert list(arms) == list(ARMS)
    for name, a in arms.items():
        (step,) = a["steps"]
        assert step["completed"] == step_requests(config)[0] == 12 and step["failed"] == 0, name
        assert a["at_slo"]["slo_ms"] == 500.0
        assert ("auto" in step) is (name == "auto")
    seen = sum(arms["auto"]["steps"][0]["auto"]["choices"].values())
    assert seen == 2 + 2 + 12  # the learning requests, the step's two warm-ups and its requests: one choice each
    assert arms["notrim"]["throughput_gain_vs_direct"] == pytest.approx(1.0, rel=0.5)


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="rising"):
        AutoLoadConfig(rates=(4.0, 2.0))
    with pytest.raises(ValueError, match="step_s"):
        AutoLoadConfig(step_s=0)
