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


def on_disk(path: Path) -> int:
    """Bytes of the database file and its WAL."""
    wal = Path(f"{path}-wal")
    return os.path.getsize(path) + (os.path.getsize(wal) if wal.exists() else 0)


def foreign_database(path: Path) -> None:
    """Another application's SQLite file: its own table, rollback journal, no marker."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.commit()
    conn.close()


def header(path: Path) -> tuple[str, int, list[str]]:
    """(journal mode, application_id, tables) as another connection sees them."""
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("PRAGMA journal_mode").fetchone()[0], conn.execute("PRAGMA application_id").fetchone()[0],
                sorted(n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")))
    finally:
        conn.close()


class TestOwnership:
    """The store refuses a file it did not make, before changing anything in it."""

    def test_a_new_store_carries_the_marker(self, tmp_path: Path) -> None:
        from ragtrim.vectors.sqlite_file import APPLICATION_ID

        store = SqliteVectorStore(tmp_path / "v.sqlite3", max_bytes=MIB)
        store.put(vectors(1))
        assert header(tmp_path / "v.sqlite3") == ("wal", APPLICATION_ID, ["meta", "vectors"])

    def test_another_applications_database_is_refused_and_left_as_it_was(self, tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
        import logging

        from ragtrim.errors import ConfigError

        path = tmp_path / "app.db"
        foreign_database(path)
        before = path.read_bytes()
        store = SqliteVectorStore(path, max_bytes=MIB)
        for call in (lambda: store.put(vectors(2)), lambda: store.get([b"k" * 32]),
                     lambda: store.replace(vectors(1)), lambda: store.touch([b"k" * 32])):
            with pytest.raises(ConfigError, match=r"app.db is not a ragtrim vector store: it holds tables ragtrim "
                                                  r"did not make \(notes\)"):
                call()
        assert header(path) == ("delete", 0, ["notes"]) and path.read_bytes() == before
        assert not Path(f"{path}-wal").exists()
        shared = SharedStore(SqliteVectorStore(path, max_bytes=MIB), retry_after_s=0.0)
        with caplog.at_level(logging.DEBUG, logger="ragtrim"):
            assert shared.lookup([b"k" * 32]) == {}
            shared.save(arrays(2))
            shared.flush(10)
            assert shared.lookup([b"k" * 32]) == {}
        warnings = [r for r in caplog.records if "vector store" in r.getMessage()]
        assert [r.levelname for r in warnings] == ["WARNING"] and "refused" in warnings[0].getMessage()
        assert path.read_bytes() == before

    def test_a_database_marked_by_another_application_is_refused(self, tmp_path: Path) -> None:
        from ragtrim.errors import ConfigError

        path = tmp_path / "other.db"
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA application_id = 1234")
        conn.execute("CREATE TABLE vectors (key BLOB, value BLOB, used INTEGER)")  # even with ragtrim's names
        conn.commit()
        conn.close()
        with pytest.raises(ConfigError, match=r"another application marked it as its own \(application_id 0x4d2\)"):
            SqliteVectorStore(path, max_bytes=MIB).put(vectors(1))

    def test_a_store_made_before_the_marker_is_adopted(self, tmp_path: Path) -> None:
        from ragtrim.vectors.sqlite_file import APPLICATION_ID

        path = tmp_path / "old.sqlite3"
        conn = sqlite3.connect(path, isolation_level=None)  # what an earlier ragtrim made: its tables, no marker
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
                           "CREATE TABLE vectors (key BLOB NOT NULL UNIQUE, value BLOB NOT NULL, used INTEGER NOT NULL);"
                           "CREATE INDEX vectors_used ON vectors (used);"
                           "INSERT INTO meta VALUES ('schema', '1');")
        items = vectors(2)
        conn.executemany("INSERT INTO vectors VALUES (?, ?, 0)", items)
        conn.close()
        store = SqliteVectorStore(path, max_bytes=MIB)
        assert store.get([k for k, _ in items]) == dict(items)
        store.put(vectors(1, seed=3))
        assert header(path) == ("wal", APPLICATION_ID, ["meta", "vectors"])

    def test_index_refuses_it_with_exit_2_and_a_trim_goes_on_without_it(self, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.cli import main
        from ragtrim.testing import FakeEmbedder
        from ragtrim.vectors import index as index_mod

        path = tmp_path / "app.db"
        foreign_database(path)
        before = path.read_bytes()
        corpus = tmp_path / "c.jsonl"
        corpus.write_text('"one passage"\n"another"\n')
        monkeypatch.setattr(index_mod, "resolve_index_scorer", lambda scorer: FakeEmbedder(recipe="fake-v1"))
        assert main(["index", str(corpus), "--store", str(path), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ragtrim: error: {path} is not a ragtrim vector store") and err.count("\n") == 1
        e = FakeEmbedder(recipe="fake-v1", vector_store=str(path))
        assert e.score("q", ["one passage"]) == FakeEmbedder(recipe="fake-v1", vector_store=None).score(
            "q", ["one passage"])
        assert path.read_bytes() == before


class TestRepairAndBounds:
    def test_replace_overwrites_a_damaged_value(self, tmp_path: Path) -> None:
        store = SqliteVectorStore(tmp_path / "v.sqlite3", max_bytes=MIB)
        (key, good), = vectors(1)
        store.put([(key, b"damaged")])
        assert store.put([(key, good)]) == 0 and store.get([key]) == {key: b"damaged"}  # put keeps the first
        assert store.replace([(key, good)]) == 1 and store.get([key]) == {key: good}

    def test_the_wal_stays_bounded_under_concurrent_readers(self, tmp_path: Path) -> None:
        from ragtrim.vectors.sqlite_store import WAL_LIMIT_BYTES

        path = tmp_path / "v.sqlite3"
        writer = SqliteVectorStore(path, max_bytes=64 * MIB)
        keys = [k for k, _ in vectors(20)]
        writer.put(vectors(20))
        stop = tmp_path / "stop"
        reader = (
            "import os, sys\n"
            "from ragtrim.vectors.sqlite_store import SqliteVectorStore\n"
            "from ragtrim.vectors.store import vector_key\n"
            "store = SqliteVectorStore(sys.argv[1], max_bytes=64 * 2**20)\n"
            "keys = [vector_key('test', f'text 0 {i}') for i in range(20)]\n"
            "print('ready', flush=True)\n"
            "n = 0\n"
            "while not os.path.exists(sys.argv[2]):\n"
            "    assert len(store.get(keys)) == 20\n"
            "    n += 1\n"
            "print(n)\n"
        )
        procs = [subprocess.Popen([sys.executable, "-c", reader, str(path), str(stop)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
        try:
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            batch_bytes = 0
            largest_wal = 0
            for seed in range(1, 161):  # about 12 MiB of vectors, three times the WAL bound
                batch = vectors(50, seed=seed)
                batch_bytes = sum(len(k) + len(v) for k, v in batch)
                writer.put(batch)
                largest_wal = max(largest_wal, os.path.getsize(f"{path}-wal"))
        finally:
            stop.touch()
            outputs = [p.communicate(timeout=60) for p in procs]
        for p, (out, err) in zip(procs, outputs):
            assert p.returncode == 0, err
            assert int(out.split()[-1]) > 0  # each reader kept reading while the writer wrote
        assert len(writer.get(keys)) == 20
        # a write's own frames (a batch, its index pages and SQLite's page overhead) on top of the bound
        assert largest_wal <= WAL_LIMIT_BYTES + 4 * batch_bytes, largest_wal

    def test_eviction_gives_the_space_back_with_a_reader_open(self, tmp_path: Path) -> None:
        path = tmp_path / "v.sqlite3"
        big = SqliteVectorStore(path, max_bytes=8 * MIB)
        for seed in range(12):
            big.put(vectors(300, seed=seed))  # about 5.6 MiB
        big.close()
        full = on_disk(path)
        assert full > 5 * MIB
        reader = SqliteVectorStore(path, max_bytes=8 * MIB)
        assert len(reader.get([k for k, _ in vectors(300, seed=11)])) == 300  # a reader connection stays open
        small = SqliteVectorStore(path, max_bytes=MIB)  # the bound lowered (--max-mb)
        small.put(vectors(10, seed=99))
        after = on_disk(path)
        assert small.used_bytes() <= MIB and after <= MIB, (full, after)


class TestFullDisk:
    def test_a_full_disk_is_named_with_its_path(self, tmp_path: Path) -> None:
        from ragtrim.errors import VectorStoreError

        class TinyDisk(SqliteVectorStore):
            def _connect(self, busy_ms: int) -> sqlite3.Connection:
                conn = super()._connect(busy_ms)
                conn.execute("PRAGMA max_page_count = 40")  # 160 KiB: SQLite reports SQLITE_FULL beyond it
                return conn

        path = tmp_path / "v.sqlite3"
        store = TinyDisk(path, max_bytes=64 * MIB)
        store.put(vectors(5))
        with pytest.raises(VectorStoreError) as caught:
            store.put(vectors(200, seed=1))
        message = str(caught.value)
        assert message.startswith(f"vector store {path}: the disk is full (") and "MiB free" in message
        assert "cannot rollback" not in message
        assert len(store.get([k for k, _ in vectors(5)])) == 5  # what was there stays

    def test_a_file_size_limit_is_reported_not_masked(self, tmp_path: Path) -> None:
        script = (
            "import resource, signal, sys, numpy as np\n"
            "from ragtrim.vectors.sqlite_store import SqliteVectorStore\n"
            "from ragtrim.vectors.store import pack, vector_key\n"
            "store = SqliteVectorStore(sys.argv[1], max_bytes=64 * 2**20)\n"
            "store.put([(vector_key('t', 'first'), pack(np.ones(384, np.float32)))])\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))\n"
            "items = [(vector_key('t', str(i)), pack(np.ones(384, np.float32))) for i in range(500)]\n"
            "try:\n"
            "    store.put(items)\n"
            "except Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n"
        )
        path = tmp_path / "v.sqlite3"
        done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"VectorStoreError vector store {path}: the file could not be written")
        assert "the disk may be full, the file over a size limit" in done.stdout
        assert "cannot rollback" not in done.stdout
