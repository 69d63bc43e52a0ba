"""``ragtrim gate``'s command line: exit codes (2 for usage, 3 for the output folder), threshold precedence, and
the two builders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.cli import build_parser, main
from ragtrim.gate import cli as gate_cli
from ragtrim.gate.golden import GoldenItem, load_golden, write_golden

ARMS = ["--arm", "a=http://127.0.0.1:9/v1", "--arm", "b=http://127.0.0.1:9/v1", "--model", "m"]


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    write_golden([GoldenItem(id="q", question="q?", answers=("x",))], tmp_path / "g.jsonl")
    return tmp_path / "g.jsonl"


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--help"]) == 0
    assert "run" in capsys.readouterr().out
    assert main(["gate", "run", "--help"]) == 0
    assert "--max-accuracy-drop" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    ([], "give the arms"),
    (["--arm", "a=http://127.0.0.1:9/v1", "--model", "m"], "at least two arms"),
    ([*ARMS, "--baseline", "c"], "baseline 'c' is not an arm"),
    ([*ARMS, "--max-accuracy-drop", "2"], "max_accuracy_drop must be a share"),
    ([*ARMS, "--max-accuracy-drop", "lots"], "expected a number or 'none'"),
    ([*ARMS, "--limit", "0"], "--limit must be >= 1"),
    ([*ARMS, "--concurrency", "0"], "concurrency must be an integer >= 1"),
])
def test_usage_errors_exit_2(golden: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                             message: str) -> None:
    assert main(["gate", "run", str(golden), "--out", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_bad_golden_sets_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "run", str(tmp_path / "missing.jsonl"), *ARMS]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"question": "q", "answer": "typo"}\n', encoding="utf-8")
    assert main(["gate", "run", str(tmp_path / "bad.jsonl"), *ARMS]) == 2
    assert "bad.jsonl:1: unknown key 'answer'" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    assert main(["gate", "run", str(tmp_path / "empty.jsonl"), *ARMS, "--out", str(tmp_path / "o")]) == 2
    assert "holds no item" in capsys.readouterr().err


def test_an_unwritable_out_exits_3(golden: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert main(["gate", "run", str(golden), *ARMS, "--out", str(tmp_path / "file")]) == 3
    assert "it is a file" in capsys.readouterr().err


def test_threshold_precedence(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text("max_accuracy_drop = 0.05\nmin_ttft_gain = 1.2\n", encoding="utf-8")
    args = build_parser().parse_args(["gate", "run", "g.jsonl", "--thresholds", str(tmp_path / "t.toml"),
                                      "--min-ttft-gain", "1.5", "--max-format-drop", "none", "--rule", "confident"])
    t = gate_cli._thresholds(args, {"max_accuracy_drop": 0.02, "max_refusal_drop": 0.03})
    assert (t.max_accuracy_drop, t.max_refusal_drop, t.min_ttft_gain, t.max_format_drop, t.rule) == (
        0.05, 0.03, 1.5, None, "confident")
    (tmp_path / "bad.json").write_text(json.dumps({"max_drop": 1}), encoding="utf-8")
    args = build_parser().parse_args(["gate", "run", "g.jsonl", "--thresholds", str(tmp_path / "bad.json")])
    with pytest.raises(Exception, match="unknown key"):
        gate_cli._thresholds(args, {})


def test_squad_builder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [
        {"context": f"Paragraph {p}.", "qas": [{"id": f"p{p}", "question": f"q{p}?", "is_impossible": p == 0,
                                                "answers": [] if p == 0 else [{"text": f"a{p}", "answer_start": 0}]}]}
        for p in range(3)]}]}
    (tmp_path / "s.json").write_text(json.dumps(data), encoding="utf-8")
    assert main(["gate", "squad", str(tmp_path / "s.json"), "-o", str(tmp_path / "g.jsonl"), "--json",
                 "--documents", "2"]) == 0
    assert "wrote 3 items" in capsys.readouterr().out
    items = load_golden(tmp_path / "g.jsonl")
    assert [i.answerable for i in items] == [False, True, True] and all(len(i.documents) == 2 for i in items)
    assert main(["gate", "squad", str(tmp_path / "s.json"), "-o", str(tmp_path / "x.jsonl"), "--articles",
                 "Nope"]) == 2


def test_log_builder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [{"request_id": f"r{i}", "outcome": "ok",
              "request": {"model": "m", "messages": [{"role": "user", "content": f"question {i}?"}]}}
             for i in range(5)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert main(["gate", "log", str(tmp_path / "log.jsonl"), "-o", str(tmp_path / "g.jsonl"), "--sample", "3"]) == 0
    out = capsys.readouterr().out
    assert "wrote 3 items" in out and "question|0-256: 3 of 5" in out
    assert len(load_golden(tmp_path / "g.jsonl")) == 3
