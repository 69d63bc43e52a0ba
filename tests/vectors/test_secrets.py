"""No Redis password reaches a user through ``ragtrim index`` or a trim that uses the vector store: a fresh password
is planted in every URL form (``user:password@``, ``:password@``, ``?password=``) and every output of every path is
scanned for it: stdout (the JSON report), stderr (errors, the progress bar, warnings) and the log records at DEBUG,
tracebacks included. A real redis-server that requires a password answers (or refuses) the store."""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Self
from urllib.parse import quote

import pytest

pytest.importorskip("redis")

from ragtrim.cli import main
from ragtrim.testing import FakeEmbedder
from ragtrim.vectors import index as index_mod
from ragtrim.vectors import store as store_mod
from tests.serve.conftest import free_port

SERVER_PASSWORD = "Srv-" + secrets.token_hex(8)
FORMS: dict[str, Callable[[str, int], str]] = {
    "user:password@": lambda pw, port: f"redis://default:{pw}@127.0.0.1:{port}/0",
    ":password@": lambda pw, port: f"redis://:{pw}@127.0.0.1:{port}/0",
    "?password=": lambda pw, port: f"redis://127.0.0.1:{port}/0?password={pw}",
}


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[int]:
    """A redis-server that requires ``SERVER_PASSWORD``; yields its port."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    port, folder = free_port(), tempfile.mkdtemp(prefix="ragtrim-redis-")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", folder, "--requirepass", SERVER_PASSWORD], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as c:
                c.sendall(b"PING\r\n")
                if c.recv(64).startswith(b"-NOAUTH"):
                    break
        except OSError:
            if time.monotonic() > deadline:
                proc.terminate()
                raise
            time.sleep(0.02)
    yield port
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_default_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("RAGTRIM_VECTOR_STORE", raising=False)
    monkeypatch.delenv("RAGTRIM_VECTOR_STORE_MAX_MB", raising=False)
    monkeypatch.setattr(index_mod, "resolve_index_scorer", lambda scorer: FakeEmbedder(recipe="fake-v1"))
    store_mod._DEFAULT = None
    yield
    store_mod._DEFAULT = None


def planted() -> str:
    """A password never seen before by this process (so nothing registered earlier can hide a leak of it)."""
    return "Pw-" + secrets.token_hex(10)


def assert_nowhere(password: str, *outputs: str) -> None:
    for form in {password, quote(password, safe="")}:
        for text in outputs:
            assert form not in text, text


class Captured:
    """Everything one run showed: stdout, stderr and every log record (DEBUG and up, any logger) as formatted."""

    def __init__(self, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
        self.capsys, self.caplog = capsys, caplog

    def __enter__(self) -> Self:
        self.capsys.readouterr()
        self.caplog.clear()
        self.caplog.set_level(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        out = self.capsys.readouterr()
        self.stdout, self.stderr = out.out, out.err
        self.logs = self.caplog.text + "".join(r.getMessage() for r in self.caplog.records)


CORPUS_LINES = '"the tower by the river"\n"the bridge over the bay"\n'


@pytest.mark.parametrize("form", list(FORMS))
class TestIndex:
    def run(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
            args: list[str], expect: int) -> Captured:
        corpus = tmp_path / "c.jsonl"
        corpus.write_text(CORPUS_LINES)
        with Captured(capsys, caplog) as seen:
            code = main(["index", str(corpus), *args])
        assert code == expect, seen.stderr
        return seen

    def test_the_report_and_the_progress_bar(self, form: str, locked_redis: int, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              caplog: pytest.LogCaptureFixture) -> None:
        url = FORMS[form](SERVER_PASSWORD, locked_redis)
        seen = self.run(tmp_path, capsys, caplog, ["--store", url], 0)  # the progress bar is on
        report = json.loads(seen.stdout)
        assert report["passages"] == 2 and "***" in report["store"]
        assert_nowhere(SERVER_PASSWORD, seen.stdout, seen.stderr, seen.logs)

    def test_the_environment(self, form: str, locked_redis: int, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE", FORMS[form](SERVER_PASSWORD, locked_redis))
        seen = self.run(tmp_path, capsys, caplog, [], 0)
        assert_nowhere(SERVER_PASSWORD, seen.stdout, seen.stderr, seen.logs)
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE_MAX_MB", "inf")
        seen = self.run(tmp_path, capsys, caplog, ["--quiet"], 2)
        assert_nowhere(SERVER_PASSWORD, seen.stdout, seen.stderr, seen.logs)

    @pytest.mark.parametrize("case", ["wrong password", "redis down", "bad port", "bad size"])
    def test_every_error(self, form: str, case: str, locked_redis: int, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
        password = planted()
        port = free_port() if case == "redis down" else locked_redis
        url = FORMS[form](password, port)
        if case == "bad port":
            url = url.replace(f":{port}/", ":port/")
        args = ["--store", url, "--quiet"] + (["--max-mb", "inf"] if case == "bad size" else [])
        seen = self.run(tmp_path, capsys, caplog, args, 2 if case in ("bad size", "bad port") else 1)
        assert seen.stderr.startswith("ragtrim: error: ")
        assert_nowhere(password, seen.stdout, seen.stderr, seen.logs)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("case", ["wrong password", "redis down", "bad port", "right password"])
@pytest.mark.parametrize("where", ["argument", "environment"])
def test_a_trim_that_falls_back_shows_no_password(form: str, case: str, where: str, locked_redis: int,
                                                    capsys: pytest.CaptureFixture[str],
                                                    caplog: pytest.LogCaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter

    password = SERVER_PASSWORD if case == "right password" else planted()
    port = free_port() if case == "redis down" else locked_redis
    url = FORMS[form](password, port)
    if case == "bad port":
        url = url.replace(f":{port}/", ":port/")
    if where == "environment":
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE", url)
    scorer = FakeEmbedder(recipe="fake-v1", vector_store=url if where == "argument" else "default")
    with Captured(capsys, caplog) as seen:
        result = Pipeline([RelevanceFilter(scorer=scorer, top_k=None)], tokenizer="whitespace").run(
            ["the tower by the river", "the bridge over the bay"], query="tower")
        store_mod.flush_stores(10)
        print(json.dumps(result.to_dict()), store_mod.store_stats())
    assert len(result.chunks) == 2
    if case != "right password":
        assert "vector store" in seen.logs  # the fallback was logged (without the password)
    assert_nowhere(password, seen.stdout, seen.stderr, seen.logs)
