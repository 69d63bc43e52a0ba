"""The cost benchmark's pure functions, its config, and a tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError
from ragtrim_bench.languages.cost import CostConfig, growth_steps, main, per_token_us


def test_per_token_us_is_the_median() -> None:
    assert per_token_us([0.001, 0.003, 0.002], [100, 100, 100]) == 20.0
    with pytest.raises(ConfigError):
        per_token_us([0.1], [])


def test_growth_steps() -> None:
    assert growth_steps([0.5, 2.0, 8.4]) == [4.0, 4.2]


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="languages"):
        CostConfig(languages=("fr",))
    with pytest.raises(ConfigError, match="scorers"):
        CostConfig(scorers=("embedding",))


def test_tiny_run_writes_its_command(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "cost.json"
    assert main(["--languages", "ja,zh", "--scorers", "bm25", "--requests", "1", "--growth", "",
                 "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["command"] == f"ragtrim-bench languages cost --languages ja,zh --scorers bm25 --requests 1 --growth '' --output {out}"
    assert set(data["cold_per_token"]) == {"ja", "zh"} and data["cold_per_token"]["ja"]["bm25_cpu_us_per_token"] > 0
