"""ragtrim_bench.gate.example: the example report's arms and a short run of it against real fake-upstream processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.gate.arms import load_arms
from ragtrim_bench.gate import example


def test_flags_merge() -> None:
    assert example._flags(["--base-ms", "20", "--per-1k-ms", "37"], ["--base-ms", "60", "--needs"]) == [
        "--base-ms", "60", "--per-1k-ms", "37", "--needs"]


def test_the_arms_file_reads_back(tmp_path: Path) -> None:
    (tmp_path / "arms.toml").write_text(example.arms_toml({"bf16": 8001, "slow": 8002}), encoding="utf-8")
    f = load_arms(tmp_path / "arms.toml")
    assert [a.name for a in f.arms] == ["bf16", "slow", "trim_4x"] and f.baseline == "bf16"
    assert f.arms[2].url == f.arms[0].url and f.arms[2].trim is not None
    assert f.arms[2].thresholds == example.TRIM_THRESHOLDS and f.thresholds == {"min_ttft_gain": 0.9}


@pytest.mark.data
def test_a_short_run(shared_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="the fake upstreams need the serve extra")
    assert example.main(["--questions", "12", "--documents", "3", "--only", "same,short_context", "--out",
                         str(tmp_path / "out"), "--work", str(tmp_path / "work")]) == 0
    result = json.loads((tmp_path / "out" / "example.json").read_text())
    assert result["command"].startswith("ragtrim-bench gate example --questions 12")
    assert set(result["changes"]) == {"same", "short_context"} and result["changes"]["short_context"] == "fail"
    report = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert report["text_included"] is False and report["golden"]["items"] == 12
    assert report["arms"]["short_context"]["requests"]["errors_by_kind"] == {"http_400": 2}
    assert report["changes"]["same"]["comparison"]["accuracy"]["drop"] == 0.0
    assert (tmp_path / "out" / "gate.html").is_file() and (tmp_path / "work" / "golden.jsonl").is_file()
