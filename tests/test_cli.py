"""The CLI end to end on small inputs (BM25 scoring so no model loads)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from ragtrim.cli import main


def run(argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_trim_json_list(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    chunks = ["<nav>Home</nav><p>The tower is 330 metres tall.</p>", "The tower is 330 metres tall."]
    rc, out, _ = run(["trim", "-q", "how tall", "-b", "50", "--scorer", "bm25"], json.dumps(chunks), monkeypatch, capsys)
    assert rc == 0
    d = json.loads(out)
    assert [c["text"] for c in d["chunks"]] == ["The tower is 330 metres tall."]
    assert {r["reason"] for t in d["trace"] for r in t["removals"]} >= {"boilerplate", "exact_duplicate"}


def test_trim_jsonl_requests(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    lines = "\n".join(json.dumps({"query": q, "chunks": ["a b c.", "d e f."], "budget": 3}) for q in ("x", "y"))
    rc, out, _ = run(["trim", "--tokenizer", "whitespace", "--scorer", "bm25"], lines, monkeypatch, capsys)
    assert rc == 0
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["query"] for r in results] == ["x", "y"] and all(r["tokens_after"] <= 3 for r in results)


def test_trim_bad_input_is_a_clean_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["trim", "-b", "-1", "--scorer", "bm25"], '["a"]', monkeypatch, capsys)
    assert rc == 2 and "max_tokens must be >= 0, got -1" in err
    rc, _, err = run(["trim"], "{not json", monkeypatch, capsys)
    assert rc == 2 and "not valid JSON" in err


def test_bench_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    rc, text, _ = run(["bench", "--limit", "2", "--budgets", "300", "--scorer", "bm25", "-o", str(out)], "",
                      monkeypatch, capsys)
    assert rc == 0 and "default @ 300 tokens" in text
    d = json.loads(out.read_text())
    assert d["requests"] == 2 and d["methods"][1]["mean_tokens_after"] <= 300


def test_plan_is_wired(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    config = Path(__file__).parent / "fixtures" / "configs" / "gemma-3-12b-text.json"
    rc, out, _ = run(["plan", "--config", str(config), "--gpu-mem-gib", "141", "--input-p50", "2000",
                      "--input-p95", "3000", "--output-p95", "32", "--json"], "", monkeypatch, capsys)
    assert rc == 0 and "kv_capacity_tokens" in out
