"""The SQLite vector store: exact values, the first writer wins, the byte bound with LRU eviction, two processes
writing at once, and the failures that must never fail a trim (a corrupt file, a read-only folder, a locked
database)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ragtrim.vectors.sqlite_store import SqliteVectorStore
from ragtrim.vectors.store import SharedStore, pack, unpack, vector_key

MIB = 2**20


def vectors(n: int, dim: int = 384, seed: int = 0) -> list[tuple[bytes, bytes]]:
    """``n`` keys and stored values (what a VectorStore holds)."""
    rng = np.random.default_rng(seed)
    return [(vector_key("test", f"text {seed} {i}"), pack(rng.standard_normal(dim).astype(np.float32)))
            for i in range(n)]


def arrays(n: int) -> list[tuple[bytes, np.ndarray]]:
    """``n`` keys and vectors (what SharedStore.save takes)."""
    return [(k, np.frombuffer(v[4:], dtype="<f4")) for k, v in vectors(n)]


class TestSqliteVectorStore:
    def test_round_trip_and_first_writer_wins(self, tmp_path: Path) -> None:
        store = SqliteVectorStore(tmp_path / "sub" / "v.sqlite3", max_bytes=MIB)
        assert store.get([b"x" * 32]) == {}  # no file yet, and a lookup makes none
        assert not (tmp_path / "sub" / "v.sqlite3").exists()
        items = vectors(3)
        assert store.put(items) == 3
        assert store.put([(items[0][0], pack(np.zeros(384, dtype=np.float32)))] + vectors(1, seed=1)) == 1
        got = store.get([k for k, _ in items] + [b"missing"])
        assert got == dict(items)
        assert store.location == str(tmp_path / "sub" / "v.sqlite3")
        mode = sqlite3.connect(tmp_path / "sub" / "v.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"

    def test_byte_bound_evicts_least_recently_used(self, tmp_path: Path) -> None:
        path = tmp_path / "v.sqlite3"
        store = SqliteVectorStore(path, max_bytes=MIB)  # about 480 vectors of 384 floats with their keys
        early = vectors(200, seed=1)
        store.put(early)
        conn = sqlite3.connect(path)
        conn.execute("UPDATE vectors SET used = used - 3600000")  # written an hour ago...
        conn.commit()
        store.touch([k for k, _ in early[:20]])  # ...and these 20 read now
        later: list[tuple[bytes, bytes]] = []
        for seed in range(2, 6):  # 400 more: past the bound once, not so far that the 20 become the oldest
            batch = vectors(100, seed=seed)
            store.put(batch)
            later += batch
            assert store.used_bytes() <= MIB
            assert os.path.getsize(path) <= MIB  # freed pages go back to the file system
        assert os.path.getsize(str(path) + "-wal") <= 4 * MIB
        kept = set(store.get([k for k, _ in early]))
        assert {k for k, _ in early[:20]} <= kept and len(kept) < 200  # the unread old ones went first...
        assert len(store.get([k for k, _ in later])) == len(later)  # ...and everything newer stays
        assert 380 < conn.execute("SELECT count(*) FROM vectors").fetchone()[0] < 500

    def test_two_processes_writing_at_once(self, tmp_path: Path) -> None:
        path = tmp_path / "v.sqlite3"
        script = (
            "import sys, numpy as np\n"
            "from ragtrim.vectors.sqlite_store import SqliteVectorStore\n"
            "from ragtrim.vectors.store import pack, vector_key\n"
            "store = SqliteVectorStore(sys.argv[1], max_bytes=64 * 2**20)\n"
            "who = sys.argv[2]\n"
            "for batch in range(40):\n"
            "    items = [(vector_key('t', f'shared {batch} {i}'), pack(np.full(384, batch * 100 + i, np.float32)))\n"
            "             for i in range(10)]\n"
            "    items += [(vector_key('t', f'{who} {batch} {i}'), pack(np.ones(384, np.float32))) for i in range(10)]\n"
            "    store.put(items)\n"
        )
        procs = [subprocess.Popen([sys.executable, "-c", script, str(path), who], stderr=subprocess.PIPE)
                 for who in ("a", "b")]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
        store = SqliteVectorStore(path, max_bytes=64 * MIB)
        keys = [vector_key("t", f"{who} {b} {i}") for who in ("shared", "a", "b") for b in range(40) for i in range(10)]
        got = store.get(keys)
        assert len(got) == 1200  # nothing lost, nothing doubled (the key is unique)
        v = unpack(got[vector_key("t", "shared 7 3")])
        assert v is not None and float(v[0]) == 703.0

    def test_a_corrupt_file_is_a_miss_not_an_error(self, tmp_path: Path) -> None:
        path = tmp_path / "v.sqlite3"
        path.write_bytes(b"this is not a database" * 100)
        shared = SharedStore(SqliteVectorStore(path, max_bytes=MIB))
        assert shared.lookup([b"k" * 32]) == {}
        shared.save(arrays(2))
        shared.flush(10)
        assert shared.stats.errors == 1 and shared.stats.skipped == 1
        assert path.read_bytes().startswith(b"this is not a database")  # the file is left for its owner

    def test_a_damaged_row_is_a_miss(self, tmp_path: Path) -> None:
        path = tmp_path / "v.sqlite3"
        store = SqliteVectorStore(path, max_bytes=MIB)
        items = vectors(2)
        store.put(items)
        conn = sqlite3.connect(path)
        conn.execute("UPDATE vectors SET value = substr(value, 1, 100) || X'00' || substr(value, 102) WHERE key = ?",
                     (items[0][0],))
        conn.commit()
        shared = SharedStore(store)
        found = shared.lookup([k for k, _ in items])
        assert list(found) == [items[1][0]] and shared.stats.damaged == 1

    @pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
    def test_a_read_only_folder(self, tmp_path: Path) -> None:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        try:
            shared = SharedStore(SqliteVectorStore(folder / "v.sqlite3", max_bytes=MIB))
            shared.save(arrays(2))
            shared.flush(10)
            assert shared.lookup([k for k, _ in vectors(2)]) == {}
            assert shared.stats.errors == 1
        finally:
            folder.chmod(0o755)

    def test_a_read_only_location_never_fails_a_trim(self, tmp_path: Path) -> None:
        # Root ignores permissions, so the location is a path under a regular file: it can never be made.
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        from ragtrim.testing import FakeEmbedder

        e = FakeEmbedder(recipe="fake-v1", vector_store=str(blocker / "v.sqlite3"))
        assert e.score("q", ["one", "two"]) == FakeEmbedder(recipe="fake-v1", vector_store=None).score("q", ["one", "two"])
        from ragtrim.vectors.store import open_store, store_stats

        open_store(str(blocker / "v.sqlite3")).flush(10)  # type: ignore[union-attr]
        assert store_stats()[str(blocker / "v.sqlite3")]["errors"] == 1

    def test_a_locked_database_costs_a_bounded_wait(self, tmp_path: Path) -> None:
        path = tmp_path / "v.sqlite3"
        store = SqliteVectorStore(path, max_bytes=MIB)
        items = vectors(2)
        store.put(items)
        store.close()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO meta (name, value) VALUES ('lock', 'held')")
        try:
            shared = SharedStore(SqliteVectorStore(path, max_bytes=MIB))
            started = time.perf_counter()
            assert shared.lookup([k for k, _ in items]) == {}
            assert time.perf_counter() - started < 2.0
            assert shared.stats.errors == 1
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert SharedStore(SqliteVectorStore(path, max_bytes=MIB)).lookup([k for k, _ in items]).keys() == \
            {k for k, _ in items}
