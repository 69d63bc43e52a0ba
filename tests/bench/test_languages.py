"""The language benchmarks: their pure functions, the generated corpora and a tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError
from ragtrim_bench.languages import corpora
from ragtrim_bench.languages.cost import CostConfig, growth_steps, per_token_us
from ragtrim_bench.languages.token_ratios import ratio_summary


def test_per_token_us_is_the_median() -> None:
    assert per_token_us([0.001, 0.003, 0.002], [100, 100, 100]) == 20.0
    with pytest.raises(ConfigError):
        per_token_us([0.1], [])


def test_growth_steps() -> None:
    assert growth_steps([0.5, 2.0, 8.4]) == [4.0, 4.2]


def test_ratio_summary() -> None:
    out = ratio_summary(["abcd", "ef"], [4, 2], [2, 2])
    assert (out["cl100k_over_gemma3_total"], out["cl100k_over_gemma3_p50_per_text"]) == (1.5, 1.5)
    assert (out["chars_per_cl100k_token"], out["chars_per_gemma3_token"]) == (1.0, 1.5)


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="languages"):
        CostConfig(languages=("fr",))
    with pytest.raises(ConfigError, match="scorers"):
        CostConfig(scorers=("embedding",))


def test_generated_text_is_deterministic_and_never_repeats() -> None:
    a, b = corpora.chunks("ja", 2, 500, seed=0), corpora.chunks("ja", 2, 500, seed=0)
    assert a == b and a[0] != a[1] and len(a[0]) == 500
    assert corpora.text("zh", 300, seed=1) != corpora.text("zh", 300, seed=2)
    unpunct = corpora.text("zh-unpunct", 2000)
    assert len(unpunct) == 2000 and unpunct.isalpha()
    with pytest.raises(ConfigError):
        corpora.text("fr", 10)


def test_tiny_cost_run_writes_its_command(tmp_path: Path) -> None:
    from ragtrim_bench.languages.cost import main

    out = tmp_path / "cost.json"
    assert main(["--languages", "ja,zh", "--scorers", "bm25", "--requests", "1", "--growth", "",
                 "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["command"].endswith(f"--output {out}") and set(data["cold_per_token"]) == {"ja", "zh"}
    assert data["cold_per_token"]["ja"]["bm25_cpu_us_per_token"] > 0


def test_mcnemar_exact() -> None:
    from ragtrim_bench.languages.paired import mcnemar_exact

    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == 2 / 32
    assert mcnemar_exact(3, 3) == 1.0


def test_compare_pairs_the_same_requests() -> None:
    from ragtrim_bench.languages.paired import compare

    before = {"records": [{"row": "bm25", "column": "c", "split": "dev", "ratio": 4, "kept_bits": "1100"}]}
    after = {"records": [{"row": "bm25", "column": "c", "split": "dev", "ratio": 4, "kept_bits": "1011"}]}
    (line,) = compare(before, after)
    assert (line["gained"], line["lost"], line["recall_before"], line["recall_after"]) == (2, 1, 0.5, 0.75)
    after["records"][0]["kept_bits"] = "10"
    with pytest.raises(Exception, match="same requests"):
        compare(before, after)
