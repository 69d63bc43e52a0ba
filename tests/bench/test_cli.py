"""``ragtrim-bench <topic> <name> [args]``: the one way to start a benchmark (the same as ``python -m``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ragtrim_bench.cli import benchmarks, listing, main


def test_lists_topics_and_their_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ragtrim-bench <topic> <name>")
    assert "pipeline:\n" in out and "  overhead " in out and "relevance:\n" in out and "  qa_savings " in out
    assert main(["dedup"]) == 0
    assert capsys.readouterr().out == listing("dedup") + "\n"


def test_helpers_are_not_listed() -> None:
    found = benchmarks()
    assert "qa" not in found["relevance"] and "hostile_inputs" not in found["pipeline"]
    assert "load" not in found["serve"] and "answers" not in found.get("common", {})


@pytest.mark.parametrize(("argv", "message"), [
    (["nope"], "no benchmark topic 'nope'"),
    (["nope", "x"], "no benchmark topic 'nope'"),
    (["pipeline", "nope"], "no benchmark 'nope' in pipeline; choose from: "),
])
def test_unknown_names_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragtrim-bench: error: ") and message in err


def test_dispatch_passes_the_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["pipeline", "overhead", "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ragtrim-bench pipeline overhead [-h] [--calls CALLS]")


def test_python_dash_m_runs_the_same_module() -> None:
    out = subprocess.run([sys.executable, "-m", "ragtrim_bench.pipeline.overhead", "--help"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert "--calls CALLS" in out and "results/pipeline/overhead.json" in out
