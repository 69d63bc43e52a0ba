"""ragtrim_bench.gate.gpu_arms: the H200 run's engines and arms, and (model-marked) a rehearsal of the whole run on
this machine, with fake upstreams in place of vLLM and no training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.gate.arms import load_arms
from ragtrim_bench.gate import gpu_arms


def test_engines_and_commands() -> None:
    names = [n for n, _ in gpu_arms.engines(Path("/r"), Path("/g.gguf"), 3072)]
    assert names == ["bf16", "max_len_short", "fp8_kv", "gguf_q4_k_m"]
    cmd = gpu_arms.serve_command(["/r", "--max-model-len", "3072"], 8301, 0.2)
    assert cmd[1:5] == ["-m", "vllm.entrypoints.cli.main", "serve", "/r"]
    # the change's flag comes after the common one, so it wins
    assert cmd.index("3072") > cmd.index("4096") and "--enforce-eager" in cmd and "--kv-cache-dtype" not in cmd


def test_the_arms_file_follows_the_recommended_order(tmp_path: Path) -> None:
    (tmp_path / "arms.toml").write_text(gpu_arms.arms_toml(["bf16", "fp8_kv", "gguf_q4_k_m"]), encoding="utf-8")
    f = load_arms(tmp_path / "arms.toml")
    assert f.baseline == "bf16" and [a.name for a in f.arms] == ["bf16", "trim_4x", "fp8_kv", "gguf_q4_k_m"]
    trim = f.arms[1]
    assert trim.url == f.arms[0].url and trim.trim is not None and trim.trim.budget == 0.25
    assert trim.thresholds == gpu_arms.TRIM_THRESHOLDS and all(a.options == gpu_arms.ARM_OPTIONS for a in f.arms)
    assert f.arms[2].url.endswith(":8302/v1")  # each engine on its own port


@pytest.mark.model
@pytest.mark.data
def test_a_rehearsal_of_the_run(shared_data: Path, tmp_path: Path) -> None:
    """Every step but training and vLLM: the base model dir from the GGUF, the golden set, four fake engines
    started one after another, the gate, and what goes back to $OUT."""
    assert gpu_arms.main(["--rehearse", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
                          "--budget-s", "900"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "gate.html", "gate.json", "gate_gpu.json", "logs.tar.gz", "results.jsonl"]
    run = json.loads((tmp_path / "out" / "gate_gpu.json").read_text())
    assert run["engines_up"] == ["bf16", "max_len_short", "fp8_kv", "gguf_q4_k_m"] and run["engines_failed"] == {}
    assert set(run["deltas"]) == {"trim_4x", "max_len_short", "fp8_kv", "gguf_q4_k_m"}
    report = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert report["golden"]["items"] == 300 and report["text_included"] is False
    assert report["arms"]["fp8_kv"]["accuracy"]["rate"] == 1.0  # the same fake reader behind every engine
