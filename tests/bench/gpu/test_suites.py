"""The GPU driver's process handling and specs, on the CPU (ragtrim_bench.gpu.suites)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from ragtrim_bench.gpu import suites


@pytest.fixture(scope="module")
def run_gpu() -> ModuleType:
    return suites


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it holds no memory
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and process groups")
def test_kill_group_ends_grandchildren(run_gpu: ModuleType, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], start_new_session=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    assert _alive(child)
    run_gpu._kill_group(proc)
    assert proc.poll() is not None
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def test_specs_are_well_formed(run_gpu: ModuleType) -> None:
    names: list[str] = []
    for suite in "abc":
        for spec in run_gpu.specs_for(suite, Path("/p")):
            names.append(spec["name"])
            assert spec["engine"]["model"] and spec["engine"]["max_model_len"] >= 4096
            for task in spec["tasks"]:
                assert task["type"] in {"accuracy", "single", "ladder"}
    assert len(names) == len(set(names))
    with pytest.raises(SystemExit):
        run_gpu.specs_for("z", Path("/p"))


def test_gpu_wait_is_limited_to_the_visible_gpus(run_gpu: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert run_gpu.visible_gpu_args() == ["-i", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0, 1")
    assert run_gpu.visible_gpu_args() == ["-i", "0,1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234abcd")  # UUIDs: ask about every GPU rather than guess
    assert run_gpu.visible_gpu_args() == []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert run_gpu.visible_gpu_args() == []


def test_only_rejects_unknown_spec_names(run_gpu: ModuleType, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_gpu, "prepare_models", lambda: {"model_dir_s": 0.0})
    monkeypatch.setattr(sys, "argv", ["run_gpu.py", "--suite", "c", "--only", "12b_baseline,12b_typo",
                                      "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="12b_typo"):
        run_gpu.main()
