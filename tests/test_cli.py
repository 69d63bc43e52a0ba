"""The CLI end to end on small inputs (BM25 scoring so no model loads)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

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
    assert rc == 2 and "budget must be >= 0, got -1" in err
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


# -- every failure is one line on stderr and a documented exit code ----------------------------
def run_bytes(argv: list[str], stdin: bytes, monkeypatch: pytest.MonkeyPatch,
              capsysbinary: pytest.CaptureFixture[bytes]) -> tuple[int, bytes, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape"))
    rc = main(argv)
    out = capsysbinary.readouterr()
    return rc, out.out, out.err.decode("utf-8")


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragtrim: error: "), err
    assert "Traceback" not in err
    return lines[0]


BM25 = ["--scorer", "bm25"]


@pytest.mark.parametrize(
    ("make", "code", "message"),
    [
        (lambda d: ["trim", str(d / "missing.json")], 2, "does not exist"),
        (lambda d: ["trim", str(d)], 2, "is a directory"),
        (lambda d: ["trim", str(d / "latin1.json")], 2, "is not valid UTF-8"),
        (lambda d: ["trim", str(d / "deep.json")], 2, "nested too deeply"),
        (lambda d: ["trim", str(d / "surrogate.json")], 2, "lone surrogate"),
        (lambda d: ["trim", str(d / "ok.json"), "-o", str(d)], 3, "it is a directory"),
        (lambda d: ["trim", str(d / "ok.json"), "-o", str(d / "ok.json" / "x")], 3, "cannot write output"),
        (lambda d: ["trim", str(d / "ok.json"), "--config", str(d / "list.json"), "--tokenizer", "approx"], 2,
         "must hold a JSON object"),
        (lambda d: ["trim", str(d / "ok.json"), "--config", str(d / "deep.json")], 2, "nested too deeply"),
        (lambda d: ["trim", str(d / "ok.json"), "--tokenizer", "o200k_base"], 2, "not available offline"),
        (lambda d: ["trim", str(d / "ok.json"), "-b", "x"], 2, "invalid int value"),
        (lambda d: ["bench", "--requests", str(d / "binary.jsonl"), "--limit", "1"], 2, "not UTF-8"),
        (lambda d: ["bench", "--requests", str(d / "deep.json"), "--limit", "1"], 2, "nested too deeply"),
        (lambda d: ["bench", "--budgets", "a,b"], 2, "comma-separated integers"),
        (lambda d: ["nonsense"], 2, "invalid choice"),
    ],
)
def test_failures_are_one_line_with_a_code(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           make: Any, code: int, message: str) -> None:
    (tmp_path / "ok.json").write_text('["The tower is 330 metres tall."]', encoding="utf-8")
    (tmp_path / "latin1.json").write_bytes('["café"]'.encode("latin-1"))
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (tmp_path / "surrogate.json").write_text('["a \\ud800 b"]', encoding="utf-8")
    (tmp_path / "list.json").write_text('[{"type": "budget", "max_tokens": 5}]', encoding="utf-8")
    (tmp_path / "binary.jsonl").write_bytes(bytes(range(256)) * 10)
    rc = main([*make(tmp_path), *BM25] if make(tmp_path)[0] != "nonsense" else make(tmp_path))
    assert rc == code
    assert message in _one_line_error(capsys.readouterr().err)


def test_latin1_on_stdin_is_an_error_not_bad_json(monkeypatch: pytest.MonkeyPatch,
                                                  capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    rc, out, err = run_bytes(["trim", *BM25], '["café au lait"]'.encode("latin-1"), monkeypatch, capsysbinary)
    assert rc == 2 and out == b""  # exited 0 with invalid UTF-8 JSON before
    assert "not valid UTF-8" in _one_line_error(err)


def test_output_is_utf8_json(monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    rc, out, _ = run_bytes(["trim", *BM25], '["café – 東京"]'.encode(), monkeypatch, capsysbinary)
    assert rc == 0 and json.loads(out.decode("utf-8"))["chunks"][0]["text"] == "café – 東京"


def test_jsonl_bad_requests_get_error_records_in_place(monkeypatch: pytest.MonkeyPatch,
                                                       capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    lines = [
        json.dumps({"query": "tower", "chunks": ["The tower is tall."], "budget": 5}),
        "{bad json",
        '{"query": "q", "chunks": ["x \\ud800"]}',  # crashed the run and lost all output before
        json.dumps({"query": "q", "chunks": [{"text": "a", "pinned": "maybe"}]}),
        json.dumps({"query": "q", "chunks": ["ok."], "budget": -3}),
        "[" * 100_000 + "]" * 100_000,
        "",
        json.dumps({"query": "q", "chunks": ["last one."]}),
    ]
    rc, out, err = run_bytes(["trim", "--tokenizer", "whitespace", *BM25], "\n".join(lines).encode(), monkeypatch,
                             capsysbinary)
    assert rc == 1  # some failed
    records = [json.loads(line) for line in out.decode("utf-8").splitlines()]
    assert [r.get("error", {}).get("type") for r in records] == [
        None, "InputError", "InputError", "InputError", "ConfigError", "InputError", None]
    assert [r["line"] for r in records if "error" in r] == [2, 3, 4, 5, 6]
    assert records[0]["chunks"][0]["text"] == "The tower is tall." and records[-1]["chunks"][0]["text"] == "last one."
    assert len(err.strip().splitlines()) == 5 and all(x.startswith("ragtrim: error: input line ") for x in
                                                      err.strip().splitlines())


def test_single_request_failure_is_exit_1(monkeypatch: pytest.MonkeyPatch,
                                          capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    body = json.dumps({"chunks": [{"text": "a b c d", "pinned": True}], "budget": 2})
    rc, out, err = run_bytes(["trim", "--tokenizer", "whitespace", *BM25], body.encode(), monkeypatch, capsysbinary)
    assert rc == 1 and out == b"" and "pinned chunks need" in _one_line_error(err)


def test_exit_codes_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["trim", "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "exit codes:" in out and "one or more requests failed" in out and "could not be written" in out


def test_config_cannot_name_an_arbitrary_tokenizer_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("RAGTRIM_TOKENIZER_DIRS", raising=False)
    secret = tmp_path / "secret.json"
    secret.write_text('{"version": "SECRET"}', encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"tokenizer": f"hf:{secret}", "stages": [{"type": "budget", "max_tokens": 5}]}),
                      encoding="utf-8")
    chunks = tmp_path / "in.json"
    chunks.write_text('["a b c"]', encoding="utf-8")
    assert main(["trim", str(chunks), "--config", str(config)]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "not under a directory the operator allowed" in err and "SECRET" not in err
    # --tokenizer is the operator's: it replaces the config's, which is never read
    assert main(["trim", str(chunks), "--config", str(config), "--tokenizer", "whitespace"]) == 0
    assert json.loads(capsys.readouterr().out)["tokenizer"] == "whitespace"


# -- the command as a stranger meets it: version, one error prefix, help, --text, the guide -------------------------
def _commands() -> dict[str, Any]:
    from ragtrim.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return dict(sub.choices)  # type: ignore[attr-defined]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ragtrim {importlib.metadata.version('ragtrim')}\n"


@pytest.mark.parametrize("argv", [
    ["trim", "-b", "x"], ["bench", "--limit", "x"], ["prepare", "--tokenizer", "nope"], ["serve"], ["index"],
    ["plan", "--gpu-mem-gib", "x"], ["audit"], ["docs", "a", "b"], ["nope"],
    ["plan", "--config", "/does/not/exist", "--gpu-mem-gib", "80", "--input-p95", "10", "--output-p95", "5"],
    ["docs", "no-such-page"],
])
def test_every_failure_is_one_line_with_one_prefix(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ragtrim: error: ") and err.count("ragtrim:") == 1, err


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_subcommand_has_a_description_defaults_and_an_example(name: str) -> None:
    parser = _commands()[name]
    text = parser.format_help()
    assert parser.description, f"ragtrim {name} has no description"
    assert "examples:\n  ragtrim " in text or "examples:\n  " in text, f"ragtrim {name} --help has no example"
    for action in parser._actions:
        if action.option_strings and action.default not in (None, False, "==SUPPRESS==") and action.dest != "help":
            shown = parser._get_formatter()._get_help_string(action) or ""  # type: ignore[attr-defined]
            assert "default" in shown, f"ragtrim {name} {action.option_strings[0]} does not say its default"
    assert "docs/" not in text, f"ragtrim {name} --help points at a path a wheel user does not have"


def test_help_points_at_the_guide() -> None:
    for name in ("trim", "serve", "plan", "audit", "prepare", "index"):
        assert "full guide: ragtrim docs " in _commands()[name].format_help(), name


def test_trim_text_prints_only_the_trimmed_text(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    chunks = ["<nav>Home</nav><p>The tower is 330 metres tall.</p>", "The tower is 330 metres tall.",
              "Paris is in France."]
    rc, out, err = run(["trim", "-q", "how tall is the tower", "-b", "8", "--scorer", "bm25", "--text"],
                       json.dumps(chunks), monkeypatch, capsys)
    assert rc == 0 and err == ""
    assert out == "The tower is 330 metres tall.\n"


def test_trim_text_refuses_jsonl(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    lines = "\n".join(json.dumps({"query": q, "chunks": ["a b c."]}) for q in ("x", "y"))
    rc, out, err = run(["trim", "--scorer", "bm25", "--text"], lines, monkeypatch, capsys)
    assert rc == 2 and out == "" and "--text prints the trimmed text of one request" in err


def test_docs_lists_and_prints_the_guide(capsys: pytest.CaptureFixture[str]) -> None:
    docs = Path(__file__).resolve().parents[1] / "docs"
    assert main(["docs"]) == 0
    listing = capsys.readouterr().out
    assert all(f"  {page.stem} " in listing for page in docs.glob("*.md"))
    assert main(["docs", "serve"]) == 0
    assert capsys.readouterr().out == (docs / "serve.md").read_text(encoding="utf-8")
