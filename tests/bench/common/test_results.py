"""The results folder and the one way to write a result (ragtrim_bench.common.results)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError
from ragtrim_bench.common import results
from ragtrim_bench.common.results import (
    RESULTS_ENV,
    command_line,
    json_safe,
    result_path,
    results_root,
    shown_path,
    topic_and_name,
    write_result,
)

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


class TestResultsRoot:
    def test_the_checkouts_results_folder(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv(RESULTS_ENV, raising=False)
        assert results_root() == BENCHMARKS / "results"

    def test_environment_variable_wins(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
        assert results_root() == tmp_path
        assert result_path("ragtrim_bench.pipeline.overhead") == tmp_path / "pipeline" / "overhead.json"
        assert result_path("ragtrim_bench.dedup.near_duplicates", "_quick") == tmp_path / "dedup" / (
            "near_duplicates_quick.json")
        assert result_path("ragtrim_bench.history.locomo", "_recall", ".png").name == "locomo_recall.png"

    def test_outside_a_checkout_asks_for_the_variable(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.delenv(RESULTS_ENV, raising=False)
        (tmp_path / "ragtrim_bench").mkdir()
        monkeypatch.setattr(results.resources, "files", lambda name: tmp_path / name)
        with pytest.raises(ConfigError, match=RESULTS_ENV):
            results_root()


class TestNames:
    def test_topic_and_name(self) -> None:
        assert topic_and_name("ragtrim_bench.relevance.qa_savings") == ("relevance", "qa_savings")
        for bad in ("ragtrim_bench.cli", "other.a.b", "ragtrim_bench.a.b.c"):
            with pytest.raises(ConfigError, match="ragtrim_bench.<topic>.<name>"):
                topic_and_name(bad)

    def test_command_line_reruns_the_benchmark(self) -> None:
        assert command_line("ragtrim_bench.pipeline.overhead", ["--calls", "3"]) == (
            "ragtrim-bench pipeline overhead --calls 3")
        assert command_line("ragtrim_bench.html.extraction", ["a b"]) == "ragtrim-bench html extraction 'a b'"

    def test_shown_path(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        assert shown_path(tmp_path / "x" / "y.json") == "x/y.json"
        assert shown_path(Path("/nowhere/z")) == "/nowhere/z"


class TestWriteResult:
    def test_records_command_and_host(self, tmp_path: Path) -> None:
        path = write_result(tmp_path / "t" / "r.json", {"tokens": 3, "ratio": math.nan, "pair": (1, 2)},
                            command="ragtrim-bench a b --x 1", packages=["numpy"])
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["tokens"] == 3 and data["ratio"] is None and data["pair"] == [1, 2]
        assert data["command"] == "ragtrim-bench a b --x 1"
        host = data["host"]
        assert host["cpu_count"] >= 1 and host["python"] and host["packages"]["numpy"]
        assert list(data)[-2:] == ["command", "host"]

    def test_rows_are_kept_under_rows(self, tmp_path: Path) -> None:
        data = json.loads(write_result(tmp_path / "r.json", [{"a": 1}], command="c").read_text(encoding="utf-8"))
        assert data["rows"] == [{"a": 1}]

    def test_a_result_may_not_set_command_or_host(self, tmp_path: Path) -> None:
        for key in ("command", "host"):
            with pytest.raises(ConfigError, match=key):
                write_result(tmp_path / "r.json", {key: 1}, command="c")

    def test_json_safe(self) -> None:
        assert json_safe({1: [math.inf, -math.inf, 0.5], "p": Path("a/b")}) == {"1": [None, None, 0.5], "p": "a/b"}
