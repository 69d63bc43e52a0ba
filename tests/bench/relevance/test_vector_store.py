"""The vector store benchmark's parts: which passages count as seen, its summary, resetting a store between
requests, and where ``main`` writes its result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragtrim.vectors.sqlite_store import SqliteVectorStore
from ragtrim.vectors.store import pack
from ragtrim_bench.relevance import vector_store as bench


class TestIsSeen:
    def test_fixed_by_the_text_and_the_share(self) -> None:
        texts = [f"passage {i}" for i in range(2000)]
        assert [bench.is_seen(t) for t in texts] == [bench.is_seen(t) for t in texts]
        assert not any(bench.is_seen(t, 0.0) for t in texts) and all(bench.is_seen(t, 1.0) for t in texts)
        share = sum(bench.is_seen(t, 0.8) for t in texts) / len(texts)
        assert 0.76 < share < 0.84

    def test_a_larger_share_keeps_every_seen_text(self) -> None:
        texts = [f"passage {i}" for i in range(500)]
        assert {t for t in texts if bench.is_seen(t, 0.5)} <= {t for t in texts if bench.is_seen(t, 0.8)}


def test_summarize() -> None:
    row = bench.summarize([10.0, 20.0, 30.0], [5.0, 6.0, 7.0], hits=8, looked_up=10)
    assert row == {"p50_ms": 20.0, "p99_ms": pytest.approx(29.8), "p50_cpu_ms": 6.0, "store_hit_share": 0.8}
    assert bench.summarize([1.0], [1.0], 0, 0)["store_hit_share"] == 0.0


def test_keep_only_deletes_what_a_request_added(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    assert bench._keys(path) == set()  # no file yet
    store = SqliteVectorStore(path, max_bytes=2**20)
    vector = pack(np.ones(4, dtype=np.float32))
    store.put([(b"a" * 32, vector), (b"b" * 32, vector)])
    prefilled = bench._keys(path)
    assert prefilled == {b"a" * 32, b"b" * 32}
    store.put([(b"c" * 32, vector)])
    bench._keep_only(path, prefilled)
    assert bench._keys(path) == prefilled
    bench._keep_only(path, set())
    assert bench._keys(path) == set()
    store.close()


def test_main_writes_through_the_common_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGTRIM_BENCH_RESULTS", str(tmp_path))
    row = bench.summarize([1.0, 2.0], [1.0, 1.0], 1, 2)

    def run(config: bench.Config, workdir: Path) -> dict[str, Any]:
        assert config.requests == 3 and config.scorers == ("auto",) and workdir.is_dir()
        return {"rows": {"auto/cold": row, "auto/seen80": {**row, "same_text_as_cold": True}}}

    monkeypatch.setattr(bench, "run", run)
    assert bench.main(["--requests", "3", "--scorers", "auto"]) == 0
    written = json.loads((tmp_path / "relevance" / "vector_store.json").read_text())
    assert written["command"] == "ragtrim-bench relevance vector_store --requests 3 --scorers auto"
    assert written["config"]["requests"] == 3 and written["rows"]["auto/seen80"]["same_text_as_cold"] is True
    assert {"cpu_count", "load_average", "git_commit"} <= set(written["host"])
