"""The host a benchmark ran on (ragtrim_bench.common.host)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ragtrim_bench.common.host import environment, git_commit, host_metadata, package_versions


def test_metadata_fields() -> None:
    host = host_metadata(["no-such-distribution-xyz"])
    assert host["cpu_count"] == os.cpu_count()
    assert isinstance(host["cpu_model"], str) and host["cpu_model"]
    assert host["load_average"] is None or len(host["load_average"]) == 3
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", host["python"])
    assert host["packages"]["ragtrim"] and host["packages"]["no-such-distribution-xyz"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", host["date_utc"])


def test_git_commit_of_this_checkout_and_outside_one(tmp_path: Path) -> None:
    commit = git_commit(Path(__file__).parent)
    assert commit is None or re.fullmatch(r"[0-9a-f]{40}(-dirty)?", commit)
    assert git_commit(tmp_path) is None


def test_package_versions() -> None:
    assert package_versions(["numpy", "nope-nope"]) == {"numpy": package_versions(["numpy"])["numpy"],
                                                        "nope-nope": None}


def test_the_environment_that_changes_ragtrim_is_recorded_without_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGTRIM_FAST_COUNT", "off")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("RAGTRIM_VECTOR_STORE", "redis://:hunter2secret@store:6379/0")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    recorded = environment()
    assert "RAGTRIM_FAST_COUNT=off" in recorded and "CUDA_VISIBLE_DEVICES=" in recorded
    assert not any("UNRELATED" in v for v in recorded)
    assert not any("hunter2secret" in v for v in recorded)
    assert any(v.startswith("RAGTRIM_VECTOR_STORE=redis://") for v in recorded)
    assert host_metadata()["environment"] == recorded
