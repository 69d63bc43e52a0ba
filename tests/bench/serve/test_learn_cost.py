"""``ragtrim-bench serve learn_cost``: the per-request cost of learning the upstream's prefill cost."""

from __future__ import annotations

import pytest

from ragtrim_bench.serve.learn_cost import LearnCostConfig, measure, report


def test_learns_the_set_cost_and_times_both_calls() -> None:
    result = measure(LearnCostConfig(requests=60, octaves=4.0))
    assert result["learned_prefill_ms_per_token"] == pytest.approx(0.037, rel=0.2)
    assert result["observe_request_on_event_loop"]["max_call_ms"] >= 0
    assert "observe_request_on_event_loop" in report(result)


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="requests"):
        LearnCostConfig(requests=0)
    with pytest.raises(ValueError, match="octaves"):
        LearnCostConfig(octaves=0)
