"""The default passage-vector store: one SQLite file shared by every process of the machine.

WAL journal (readers never wait for a writer), a busy timeout, ``INSERT OR IGNORE`` (two processes that embed the
same text write the same bytes; the first one stays), and a byte bound: after a write, while the database's pages
in use exceed ``max_bytes``, the least recently used entries go down to 90% of it and the freed pages return to the
file system (incremental vacuum, then a checkpoint), so the file stays under the bound. The WAL beside it is
checkpointed and truncated after a write that leaves it over ``WAL_LIMIT_BYTES``: SQLite's own automatic checkpoint
cannot restart a WAL while other processes keep reading, and it grew past 60 MiB under three readers. A read marks
its rows as used at most once a minute, on ragtrim's I/O thread. The file must be ragtrim's own
(``ragtrim.vectors.sqlite_file``): another application's database is refused, never changed.

Fork safety. SQLite's own state is per process: a connection, and even SQLite's internal mutexes, must not be used
in a child forked while they were in use (https://www.sqlite.org/howtocorrupt.html, section 2.6). A child forked
while the parent's I/O thread was opening the file inherited that thread's held mutex, and its first
``sqlite3.connect`` waited forever. So a fork waits for every ragtrim call into SQLite to end (at most
``FORK_WAIT_S``), and the parent closes its connections just before the fork (it opens them again on next use): the
child starts with no SQLite state of ours at all and opens its own. If a call is still inside SQLite after
``FORK_WAIT_S`` (a write waiting on another process's lock), the fork goes on, and in that child the store refuses
every call with ``VectorStoreError``: its trims ask the model instead (``SharedStore`` logs it), they never hang.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.notice import notice
from ragtrim.errors import ConfigError, VectorStoreError
from ragtrim.vectors.limits import check_max_bytes
from ragtrim.vectors.sqlite_file import create, explain, ownership, rollback

TOUCH_INTERVAL_MS = 60_000
"""A read refreshes a row's last use (milliseconds) only when it is older than this: most reads then write
nothing."""
READ_BUSY_TIMEOUT_MS = 50
"""How long a lookup (on the request path) waits for a lock before it gives up and the model answers."""
WRITE_BUSY_TIMEOUT_MS = 5000
"""How long a batch of writes (on the I/O thread) waits for another process's write to finish."""
CHECKPOINT_BUSY_TIMEOUT_MS = 250
"""How long a checkpoint that truncates the WAL waits for readers to leave it (it tries again after the next write
when they do not)."""
WAL_LIMIT_BYTES = 4 * 2**20
"""A write that leaves the WAL larger than this checkpoints and truncates it (one write's own transaction may be
larger while it lasts)."""
_MAX_PARAMS = 500
_KEPT_AFTER_EVICTION = 0.9
FORK_WAIT_S = WRITE_BUSY_TIMEOUT_MS / 1000 + 1.0
"""How long a fork waits for ragtrim's calls into SQLite to end (a write may wait its busy timeout)."""

_ABANDONED: list[sqlite3.Connection] = []
"""Connections a child inherited from a fork that ran no Python fork handlers (a C extension's own ``fork()``): kept
referenced forever, because closing one (even by garbage collection) could checkpoint and remove the WAL that the
parent is still using."""
_UNSAFE = [False]
"""This process was forked while a thread was inside SQLite: no store of it touches SQLite again."""


class _ForkGate:
    """Counts the threads inside SQLite; ``before_fork`` stops new ones entering, waits for those inside to leave,
    and closes the process's connections, so that a fork copies no SQLite state in use."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._inside = 0
        self._forking = False
        self.clean = True  # no thread was inside SQLite at the last fork

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        with self._cond:
            while self._forking:
                self._cond.wait()
            self._inside += 1
        try:
            yield
        finally:
            with self._cond:
                self._inside -= 1
                if not self._inside:
                    self._cond.notify_all()

    def before_fork(self) -> None:
        self._cond.acquire()  # held through the fork: no thread enters SQLite until after_in_parent
        self._forking = True
        deadline = time.monotonic() + FORK_WAIT_S
        while self._inside and (left := deadline - time.monotonic()) > 0:
            self._cond.wait(left)
        self.clean = not self._inside
        if self.clean:
            for store in list(_STORES):
                store._close_own()

    def after_in_parent(self) -> None:
        self._forking = False
        self._cond.notify_all()
        self._cond.release()


_GATE = _ForkGate()


class SqliteVectorStore:
    """Vectors in the SQLite file ``path`` (made with its folder on first use), at most ``max_bytes`` of pages in
    use. Safe for any number of threads and processes."""

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int) -> None:
        check_max_bytes(max_bytes)
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._lock = fork_safe_lock()
        self._pid = -1
        self._reader: sqlite3.Connection | None = None
        self._reader_checked = False  # the reader found the file to be ragtrim's store
        self._writer: sqlite3.Connection | None = None
        self._write_lock = fork_safe_lock()
        _STORES.add(self)

    @property
    def location(self) -> str:
        return str(self.path)

    # -- connections --------------------------------------------------------------------------------------------
    def _own_process(self) -> None:
        """Forget connections another process made (a fork that ran no Python fork handlers)."""
        if self._pid != os.getpid():
            _ABANDONED.extend(c for c in (self._reader, self._writer) if c is not None)
            self._reader = self._writer = None
            self._reader_checked = False
            self._pid = os.getpid()

    def _reader_connection(self) -> sqlite3.Connection | None:
        """This process's reader (lookups, on the request path): it never creates or changes anything, waits at
        most ``READ_BUSY_TIMEOUT_MS``, and is None while the file holds no store yet. Refuses a file that is not
        ragtrim's (ConfigError, ``sqlite_file.ownership``)."""
        with self._lock:
            self._own_process()
            if self._reader is None:
                self._reader = self._connect(READ_BUSY_TIMEOUT_MS)
            if not self._reader_checked:
                self._reader_checked = ownership(self._reader, self.path)
                if not self._reader_checked:
                    return None
            return self._reader

    def _writer_connection(self) -> sqlite3.Connection:
        """This process's writer (on the I/O thread): it makes the store on first use, and refuses a file that is
        not ragtrim's before changing anything in it (``sqlite_file.create``)."""
        with self._lock:
            self._own_process()
            if self._writer is None:
                new = not self.path.exists()
                writer = self._connect(WRITE_BUSY_TIMEOUT_MS)
                try:
                    create(writer, self.path)
                except BaseException:
                    writer.close()
                    raise
                self._writer = writer
                if new:
                    notice(f"created the passage-vector store {self.path} (at most {self.max_bytes / 2**20:,.0f} "
                           "MiB; passages seen again need no model pass; RAGTRIM_VECTOR_STORE=off keeps none)")
            return self._writer

    def _connect(self, busy_ms: int) -> sqlite3.Connection:
        if self.path.is_dir():
            raise ConfigError(f"vector store {self.path} is a directory; point --store or $RAGTRIM_VECTOR_STORE at "
                              "a file in it (e.g. vectors.sqlite3)")
        blocker = next((p for p in self.path.parents if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise ConfigError(f"vector store {self.path}: {blocker} is a file, not a folder; point --store or "
                              "$RAGTRIM_VECTOR_STORE at a path under a folder")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"vector store {self.path}: its folder cannot be made ({exc.strerror or exc}); point "
                              "--store or $RAGTRIM_VECTOR_STORE at a path under a folder") from None
        conn = sqlite3.connect(self.path, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
            conn.execute("PRAGMA synchronous = NORMAL")  # a cache: a power cut may lose the last writes, never the file
            conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _close_own(self) -> None:
        """Close this process's connections (a later call opens new ones)."""
        if self._pid == os.getpid():
            for conn in (self._reader, self._writer):
                if conn is not None:
                    conn.close()
        self._reader = self._writer = None
        self._reader_checked = False

    def close(self) -> None:
        with _GATE.inside(), self._lock:
            self._close_own()

    @contextlib.contextmanager
    def _sqlite(self) -> Iterator[None]:
        """Around every use of SQLite: forks wait for it to end (see the module's docstring), and SQLite's errors
        leave in a user's terms (``sqlite_file.explain``: a full disk, a file that is not a database)."""
        if _UNSAFE[0]:
            raise VectorStoreError(f"{self.path}: this process was forked while another thread was inside SQLite, "
                                   "so SQLite is not safe to use here; its trims ask the model instead")
        with _GATE.inside():
            try:
                yield
            except sqlite3.Error as exc:
                clear = explain(exc, self.path)
                if clear is exc:
                    raise
                raise clear from exc

    # -- the protocol -------------------------------------------------------------------------------------------
    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        if not self.path.exists():  # nothing written yet (and a lookup never creates the file)
            return {}
        with self._sqlite():
            return self._get(keys)

    def _get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        reader = self._reader_connection()
        found: dict[bytes, bytes] = {}
        if reader is None:  # the file holds no store yet
            return found
        with self._lock:  # one statement at a time on the shared read connection
            try:
                for start in range(0, len(keys), _MAX_PARAMS):
                    part = keys[start:start + _MAX_PARAMS]
                    marks = ",".join("?" * len(part))
                    query = f"SELECT key, CAST(value AS BLOB) FROM vectors WHERE key IN ({marks})"
                    for key, value in reader.execute(query, part):
                        found[bytes(key)] = bytes(value)
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # a file whose first write is still being made
                    return {}
                raise
        return found

    def put(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        with self._sqlite():
            return self._write("INSERT OR IGNORE INTO vectors (key, value, used) VALUES (?, ?, ?)", items)

    def replace(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        with self._sqlite():
            return self._write("INSERT OR REPLACE INTO vectors (key, value, used) VALUES (?, ?, ?)", items)

    def _write(self, statement: str, items: Sequence[tuple[bytes, bytes]]) -> int:
        writer = self._writer_connection()
        now = int(time.time() * 1000)
        with self._write_lock:
            writer.execute("BEGIN IMMEDIATE")
            try:
                before = writer.total_changes
                writer.executemany(statement, [(k, v, now) for k, v in items])
                written = writer.total_changes - before
                writer.execute("COMMIT")
            except BaseException:
                rollback(writer)
                raise
            evicted = self._evict(writer) if written else False
            self._bound_wal(writer, force=evicted)
        return written

    def touch(self, keys: Sequence[bytes]) -> None:
        with self._sqlite():
            self._touch(keys)

    def _touch(self, keys: Sequence[bytes]) -> None:
        writer = self._writer_connection()
        now = int(time.time() * 1000)
        with self._write_lock:
            writer.execute("BEGIN IMMEDIATE")
            try:
                writer.executemany("UPDATE vectors SET used = ? WHERE key = ? AND used < ?",
                                   [(now, k, now - TOUCH_INTERVAL_MS) for k in keys])
                writer.execute("COMMIT")
            except BaseException:
                rollback(writer)
                raise
            self._bound_wal(writer)

    # -- the byte bound -----------------------------------------------------------------------------------------
    def used_bytes(self) -> int:
        """Bytes of the database's pages in use (the file minus its free pages; the WAL not counted)."""
        with self._sqlite():
            writer = self._writer_connection()
            with self._write_lock:
                return _used_bytes(writer)

    def _evict(self, writer: sqlite3.Connection) -> bool:
        """Drop the least recently used rows until the pages in use are at most 90% of ``max_bytes`` (one
        eviction makes room for many writes), and free their pages (the file shrinks at the next checkpoint).
        Returns whether anything was dropped."""
        used = _used_bytes(writer)
        if used <= self.max_bytes:
            return False
        while used > self.max_bytes * _KEPT_AFTER_EVICTION:
            rows = writer.execute("SELECT count(*) FROM vectors").fetchone()[0]
            if rows == 0:
                break
            excess = 1 - self.max_bytes * _KEPT_AFTER_EVICTION / used
            drop = max(1, min(rows, int(rows * excess) + 1))
            writer.execute("BEGIN IMMEDIATE")
            try:
                writer.execute("DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM vectors ORDER BY used, rowid "
                               "LIMIT ?)", (drop,))
                writer.execute("COMMIT")
            except BaseException:
                rollback(writer)
                raise
            writer.executescript("PRAGMA incremental_vacuum;")  # runs to the end (one step frees one page)
            used = _used_bytes(writer)
        return True

    def _bound_wal(self, writer: sqlite3.Connection, *, force: bool = False) -> None:
        """Checkpoint and truncate the WAL when it is over ``WAL_LIMIT_BYTES`` (or ``force``: after an eviction,
        whose freed pages leave the main file only at a checkpoint). A TRUNCATE checkpoint waits for the readers
        still in the WAL, at most ``CHECKPOINT_BUSY_TIMEOUT_MS`` (lookups are single short statements); when they
        do not leave in time, what could be copied was, and the next write tries again."""
        if not force:
            try:
                if os.path.getsize(f"{self.path}-wal") <= WAL_LIMIT_BYTES:
                    return
            except OSError:
                return
        writer.execute(f"PRAGMA busy_timeout = {CHECKPOINT_BUSY_TIMEOUT_MS}")
        try:
            writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            writer.execute(f"PRAGMA busy_timeout = {WRITE_BUSY_TIMEOUT_MS}")


_STORES: weakref.WeakSet[SqliteVectorStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """The parent closed its connections before the fork (``_ForkGate.before_fork``), so the next use opens the
    child's own; if it could not, SQLite is not safe here and every store refuses."""
    global _GATE
    _UNSAFE[0] = _UNSAFE[0] or not _GATE.clean
    _GATE = _ForkGate()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _GATE.before_fork(), after_in_parent=lambda: _GATE.after_in_parent(),
                        after_in_child=_after_fork_in_child)


def _used_bytes(conn: sqlite3.Connection) -> int:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)
