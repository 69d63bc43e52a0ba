"""Every input error of ``ragtrim index`` and ``ragtrim trim`` exits 2 with one line on stderr that names the input
(the file, the file and line, stdin, or the flag) and never a traceback or "internal error"."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ragtrim.cli import main
from ragtrim.testing import FakeEmbedder
from ragtrim.vectors import index as index_mod
from ragtrim.vectors import store as store_mod

Files = dict[str, bytes]
FILES: Files = {
    "ok.jsonl": b'"The tower is 330 metres tall."\n',
    "latin1.jsonl": b'"ok"\n{"text": "caf\xe9"}\n',
    "latin1.txt": b"caf\xe9 au lait",
    "surrogate.jsonl": b'"ok"\n"half \\ud800 a character"\n',
    "surrogate_title.jsonl": b'{"title": "\\udfff", "text": "x"}\n',
    "notjson.jsonl": b'"ok"\n{not json\n',
    "deep.jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "list.jsonl": b"[1, 2]\n",
    "number.jsonl": b"5\n",
    "notext.jsonl": b'{"title": "x"}\n',
    "textnumber.jsonl": b'{"text": 5}\n',
    "afile": b"x",
    "notadb.sqlite3": b"this is not a database" * 100,
    # trim
    "ok.json": b'["The tower is 330 metres tall."]',
    "latin1.json": b'["caf\xe9"]',
    "surrogate.json": b'["a \\ud800 b"]',
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
    "notjson.json": b"{not json",
    "empty.json": b"  \n",
    "shape.json": b'{"chunks": "not a list"}',
    "chunks_number.json": b'{"chunks": 5}',
    "chunk_text.json": b'{"chunks": [{"text": 5}]}',
    "pinned.json": b'{"chunks": [{"text": "a", "pinned": "maybe"}]}',
    "budget.json": b'{"chunks": ["a"], "budget": -1}',
    "budget_str.json": b'{"chunks": ["a"], "budget": "x"}',
    "query.json": b'{"chunks": ["a"], "query": 5}',
    "history.json": b'{"chunks": ["a"], "history": 5}',
    "wrong.json": b'"just a string"',
    "config_list.json": b'[{"type": "budget", "max_tokens": 5}]',
}

Case = tuple[Callable[[Path], list[str]], str]

INDEX: list[Case] = [
    (lambda d: [str(d / "missing.jsonl")], "corpus file '{d}/missing.jsonl' does not exist"),
    (lambda d: [str(d / "latin1.jsonl")], "{d}/latin1.jsonl:2: not UTF-8 text"),
    (lambda d: [str(d / "latin1.txt")], "{d}/latin1.txt: not UTF-8 text"),
    (lambda d: [str(d / "surrogate.jsonl")], "{d}/surrogate.jsonl:2: holds a lone surrogate"),
    (lambda d: [str(d / "surrogate_title.jsonl"), "--title-field", "title"],
     "{d}/surrogate_title.jsonl:1: holds a lone surrogate"),
    (lambda d: [str(d / "notjson.jsonl")], "{d}/notjson.jsonl:2: not JSON"),
    (lambda d: [str(d / "deep.jsonl")], "{d}/deep.jsonl:1: not JSON"),
    (lambda d: [str(d / "list.jsonl")], "{d}/list.jsonl:1: a line must be a string or an object"),
    (lambda d: [str(d / "number.jsonl")], "{d}/number.jsonl:1: a line must be a string or an object"),
    (lambda d: [str(d / "notext.jsonl")], "{d}/notext.jsonl:1: no text field"),
    (lambda d: [str(d / "textnumber.jsonl")], "{d}/textnumber.jsonl:1: no text field"),
    (lambda d: [str(d / "ok.jsonl"), "--text-field", "body"], "{d}/ok.jsonl:1"),  # a string line: fine
    (lambda d: ["-"], "stdin:2: not UTF-8 text"),
    (lambda d: [str(d / "ok.jsonl"), "--max-mb", "inf"], "--max-mb must be a number of MiB"),
    (lambda d: [str(d / "ok.jsonl"), "--max-mb", "0.01"], "--max-mb must be a number of MiB"),
    (lambda d: [str(d / "ok.jsonl"), "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    (lambda d: [str(d / "ok.jsonl"), "--batch-size", "x"], "argument --batch-size: invalid int value"),
    (lambda d: [str(d / "ok.jsonl"), "--scorer", "nope"], "argument --scorer: invalid choice"),
    (lambda d: [str(d / "ok.jsonl"), "--store", str(d)], "vector store {d} is a directory"),
    (lambda d: [str(d / "ok.jsonl"), "--store", str(d / "afile" / "v.sqlite3")], "{d}/afile is a file, not a folder"),
    (lambda d: [str(d / "ok.jsonl"), "--store", str(d / "notadb.sqlite3")],
     "{d}/notadb.sqlite3 is not a ragtrim vector store"),
    (lambda d: [str(d / "ok.jsonl"), "--store", "redis://127.0.0.1:port/0"],
     "vector store URL redis://127.0.0.1:port/0 cannot be parsed: Port could not be cast to integer value as 'port'"),
    (lambda d: [str(d / "ok.jsonl"), "--store", "redis://[::1/0"],
     "vector store URL redis://[::1/0 cannot be parsed: Invalid IPv6 URL"),
    # an unparsable URL with a password is masked from its userinfo on: the reason still names the bad part
    (lambda d: [str(d / "ok.jsonl"), "--store", "redis://:pw@127.0.0.1:port/0"],
     "vector store URL redis://*** cannot be parsed: Port could not be cast to integer value as 'port'"),
]

TRIM: list[Case] = [
    (lambda d: [str(d / "missing.json")], "input '{d}/missing.json' does not exist"),
    (lambda d: [str(d)], "input '{d}' is a directory"),
    (lambda d: [str(d / "latin1.json")], "input '{d}/latin1.json' is not valid UTF-8"),
    (lambda d: [str(d / "surrogate.json")], "input holds a lone surrogate"),
    (lambda d: [str(d / "deep.json")], "input is nested too deeply"),
    (lambda d: [str(d / "notjson.json")], "input line 1 is not valid JSON"),
    (lambda d: [str(d / "empty.json")], "no input: pass a JSON list of chunks"),
    (lambda d: [str(d / "wrong.json")], "JSON input must be a list of chunks or an object with 'chunks'"),
    (lambda d: [str(d / "shape.json")], "input '{d}/shape.json': chunks must be a list of chunks"),
    (lambda d: [str(d / "chunks_number.json")], "input '{d}/chunks_number.json': chunks must be a list of chunks, got int"),
    (lambda d: [str(d / "chunk_text.json")], "input '{d}/chunk_text.json': chunk at index 0: 'text' must be str"),
    (lambda d: [str(d / "pinned.json")], "input '{d}/pinned.json': "),
    (lambda d: [str(d / "budget.json")], "input '{d}/budget.json': budget must be >= 0, got -1"),
    (lambda d: [str(d / "budget_str.json")], "input '{d}/budget_str.json': budget must be an int"),
    (lambda d: [str(d / "query.json")], "input '{d}/query.json': 'query' must be a string, got int"),
    (lambda d: [str(d / "history.json")], "input '{d}/history.json': history must be a list of messages, got int"),
    (lambda d: ["-"], "input stdin: chunks must be a list of chunks, got int"),
    (lambda d: [str(d / "ok.json"), "--config", str(d / "missing.json")], "pipeline config '{d}/missing.json' does not"),
    (lambda d: [str(d / "ok.json"), "--config", str(d / "latin1.json")], "pipeline config '{d}/latin1.json' is not valid"),
    (lambda d: [str(d / "ok.json"), "--config", str(d / "config_list.json"), "--tokenizer", "approx"],
     "pipeline config '{d}/config_list.json' must hold a JSON object"),
    (lambda d: [str(d / "ok.json"), "-b", "-5"], "budget must be >= 0, got -5"),
    (lambda d: [str(d / "ok.json"), "-b", "x"], "argument -b/--budget: invalid int value"),
    (lambda d: [str(d / "ok.json"), "--tokenizer", "nope"], "unknown tokenizer 'nope'"),
    (lambda d: [str(d / "ok.json"), "--tokenizer", "hf:/nonexistent"], "tokenizer file '/nonexistent' does not exist"),
]
STDIN = {"index": b'"ok"\n{"text": "\xe9t\xe9"}\n', "trim": b'{"chunks": 5}'}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, content in FILES.items():
        (tmp_path / name).write_bytes(content)
    monkeypatch.setattr(index_mod, "resolve_index_scorer", lambda scorer: FakeEmbedder(recipe="fake-v1"))
    monkeypatch.delenv("RAGTRIM_VECTOR_STORE", raising=False)
    monkeypatch.delenv("RAGTRIM_VECTOR_STORE_MAX_MB", raising=False)
    monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(tmp_path / "cache"))
    store_mod._DEFAULT = None
    return tmp_path


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragtrim: error: "), err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


def run(command: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(STDIN[command]), encoding="utf-8"))
    extra = ["--quiet"] if command == "index" else ["--scorer", "bm25"]
    code = main([command, *argv, *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("make", "message"), INDEX)
def test_index(folder: Path, make: Callable[[Path], list[str]], message: str, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> None:
    argv = make(folder)
    if "--text-field" in argv and "ok.jsonl" in argv[0]:  # the control: a string line needs no field
        assert run("index", argv + ["--store", str(folder / "v.sqlite3")], monkeypatch, capsys)[0] == 0
        return
    code, err = run("index", argv, monkeypatch, capsys)
    assert code == 2, err
    assert message.format(d=folder) in one_line(err)


@pytest.mark.parametrize(("make", "message"), TRIM)
def test_trim(folder: Path, make: Callable[[Path], list[str]], message: str, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run("trim", make(folder), monkeypatch, capsys)
    assert code == 2, err
    assert message.format(d=folder) in one_line(err)
