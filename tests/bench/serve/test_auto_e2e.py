"""``ragtrim-bench serve auto_e2e``: real gateways in front of a real fake upstream, on real sockets."""

from __future__ import annotations

import pytest

from ragtrim_bench.serve.auto_e2e import AutoE2EConfig, measure, report


def test_auto_learns_the_upstream_and_stops_cleaning_only(shared_data: object) -> None:
    """After its learning requests, the auto gateway knows the upstream's prefill cost per token (the fake sleeps
    37 ms per 1,000 prompt tokens) and chooses by it; before, it only cleaned."""
    config = AutoE2EConfig(per_1k_ms=(37.0,), requests=2, learn=24, arms=("direct", "notrim", "auto"))
    result = measure(config)
    speed = result["speeds"][0]
    assert speed["auto"]["learned_prefill_ms_per_token"] == pytest.approx(0.037, rel=0.3)
    choices = speed["auto"]["choices"]
    assert choices.get("clean:not_learned", 0) >= 20
    assert sum(n for key, n in choices.items() if not key.endswith(":not_learned")) >= 2
    assert all(a["failed"] == 0 and a["n"] == 2 for a in speed["arms"].values())
    assert "auto chose" in report(result)


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="direct"):
        AutoE2EConfig(arms=("auto",))
    with pytest.raises(ValueError, match="requests"):
        AutoE2EConfig(requests=1)
