"""``ragtrim-bench serve prepare_cost``: the gateway's preparation of a request beside the trim inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtrim_bench.serve.prepare_cost import PrepareCostConfig, main


def test_times_both_on_the_harness_prompts(shared_data: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import json

    out = tmp_path / "prepare_cost.json"
    assert main(["--scorer", "bm25", "--requests", "3", "-o", str(out)]) == 0
    result = json.loads(out.read_text())["results"]
    assert result["gateway_preparation"]["p50_request_ms"] > 0 and result["trim_alone"]["p50_request_ms"] > 0
    assert result["added_mean_ms"] == pytest.approx(result["gateway_preparation"]["mean_request_ms"]
                                                    - result["trim_alone"]["mean_request_ms"])
    assert "the gateway adds" in capsys.readouterr().out


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="requests"):
        PrepareCostConfig(requests=0)
    with pytest.raises(ValueError, match="budget"):
        PrepareCostConfig(budget=1.5)
