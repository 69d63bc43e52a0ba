"""The gateway's ``[trim] vector_store``: parsed and checked, applied to the process's default store, and shared by
replicas through one Redis."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError
from ragtrim.serve.config import parse_config
from ragtrim.vectors import store as store_mod
from ragtrim.vectors.store import default_store_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _reset_default() -> Iterator[None]:
    yield
    store_mod._DEFAULT = None


def config(**trim: object) -> dict[str, object]:
    return {"upstream": {"url": "http://127.0.0.1:9/v1"}, "trim": trim}


def test_defaults_and_values() -> None:
    c = parse_config(config())
    assert (c.trim.vector_store, c.trim.vector_store_max_mb) == ("default", None)
    c = parse_config(config(vector_store="redis://r:6379/2", vector_store_max_mb=512))
    assert (c.trim.vector_store, c.trim.vector_store_max_mb) == ("redis://r:6379/2", 512.0)


@pytest.mark.parametrize(("trim", "message"), [
    ({"vector_store": 5}, "trim.vector_store must be"),
    ({"vector_store": " "}, "trim.vector_store must be \"default\", \"off\", a file path or a redis:// URL"),
    ({"vector_store_max_mb": 0}, (r"trim.vector_store_max_mb must be a number of MiB from 1 to 1048576 \(1 TiB\), "
                                  "got 0: a smaller store holds too few vectors to help")),
    ({"vector_store_max_mb": 0.01}, "trim.vector_store_max_mb must be a number of MiB from 1 to 1048576"),
    ({"vector_store_max_mb": 1e308}, r"got 1e\+308 \(the unit is MiB\)"),
    ({"vector_store_max_mb": float("inf")}, "trim.vector_store_max_mb must be a number of MiB.*got inf"),
    ({"vector_store_max_mb": float("nan")}, "trim.vector_store_max_mb must be a number of MiB.*got nan"),
    ({"vector_store_max_mb": "big"}, "trim.vector_store_max_mb must be a number of MiB, got the string 'big'"),
    ({"vector_store_max_mb": "64"}, "trim.vector_store_max_mb must be a number of MiB, got the string '64'"),
    ({"vector_store_max_mb": True}, "trim.vector_store_max_mb must be a number of MiB.*got True"),
])
def test_invalid_values_are_named(trim: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(config(**trim))


def test_the_gateway_sets_the_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("starlette")
    from ragtrim.serve.app import Gateway

    Gateway(parse_config(config(vector_store=str(tmp_path / "g.sqlite3"), vector_store_max_mb=8)))
    assert default_store_spec() == (str(tmp_path / "g.sqlite3"), 8 * 2**20)
    monkeypatch.setenv("RAGTRIM_VECTOR_STORE", str(tmp_path / "env.sqlite3"))
    Gateway(parse_config(config()))  # "default": the environment decides
    assert default_store_spec()[0] == str(tmp_path / "env.sqlite3")


def test_a_reload_that_moves_the_store_needs_a_restart(tmp_path: Path) -> None:
    """The store is opened once per process: a SIGHUP reload that changes it is refused, not silently ignored."""
    pytest.importorskip("starlette")
    from ragtrim.serve.app import restart_only_changes

    old = parse_config(config(vector_store=str(tmp_path / "a.sqlite3")))
    assert restart_only_changes(old, parse_config(config(vector_store=str(tmp_path / "a.sqlite3")))) == []
    assert restart_only_changes(old, parse_config(config(vector_store="off"))) == ["trim.vector_store"]
    assert restart_only_changes(old, parse_config(config(vector_store=str(tmp_path / "a.sqlite3"),
                                                         vector_store_max_mb=8))) == ["trim.vector_store_max_mb"]


_REPLICA = r"""
import json, sys
from ragtrim import trim
from ragtrim.serve.app import Gateway
from ragtrim.serve.config import parse_config
from ragtrim.vectors.store import flush_stores, store_stats
Gateway(parse_config({"upstream": {"url": "http://127.0.0.1:9/v1"},
                      "trim": {"scorer": "auto", "vector_store": sys.argv[1]}}))
passages = [f"Passage {i}: the tower stands by the river, built in year {1800 + i}." for i in range(20)]
text = trim(passages, query="when was the tower built?", budget=60).text
flush_stores(30)
print(json.dumps({"text": text, "stats": list(store_stats().values())}))
"""


@pytest.mark.model
def test_two_replicas_share_vectors_through_redis() -> None:
    pytest.importorskip("redis")
    from ragtrim.scoring.auto import choose
    from tests.serve.conftest import RedisServer

    if choose().backend != "onnxruntime-int8-cpu":
        pytest.skip(f"auto runs {choose().backend} here (the store keeps CPU vectors)")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(binary)
    server.start()
    try:
        runs = [json.loads(subprocess.run([sys.executable, "-c", _REPLICA, server.url], cwd=ROOT, check=True,
                                          capture_output=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}).stdout)
                for _ in range(2)]
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)
    first, second = runs
    assert first["stats"][0]["hits"] == 0 and first["stats"][0]["writes"] == 20
    assert second["stats"][0]["hits"] == 20 and second["stats"][0]["writes"] == 0
    assert first["text"] == second["text"]  # a vector from the store is the vector the model gives
