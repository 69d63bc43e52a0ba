"""What makes an SQLite file ragtrim's vector store, and SQLite's failures said in a user's terms.

A file ragtrim makes carries ``APPLICATION_ID`` in its header (``PRAGMA application_id``) and the ``meta`` and
``vectors`` tables; a file made by an earlier ragtrim has the tables without the marker and is adopted. Anything else
(another application's database, a file that is not SQLite) is refused before anything in it is changed: not
switched to WAL, given no tables, never written.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from ragtrim.errors import ConfigError, VectorStoreError

APPLICATION_ID = 0x72677476
"""``PRAGMA application_id`` of every vector store ragtrim makes (the bytes ``rgtv``)."""
SCHEMA_VERSION = 1
_OWN_OBJECTS = frozenset({"meta", "vectors", "vectors_used"})
"""The tables and index ragtrim makes (SQLite's own ``sqlite_*`` objects aside)."""
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vectors (key BLOB NOT NULL UNIQUE, value BLOB NOT NULL, used INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)",
)
_ELSEWHERE = ("point --store, $RAGTRIM_VECTOR_STORE or the gateway's trim.vector_store at a file of ragtrim's own "
              "(a new path is made on first use)")


def ownership(conn: sqlite3.Connection, path: Path) -> bool:
    """True when the file is ragtrim's store (its marker, or an earlier ragtrim's tables), False when it holds
    nothing yet; raises ConfigError for any other file. Reads the header and the schema only."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master") if not n.startswith("sqlite_")}
    if app_id == APPLICATION_ID:
        return True
    if app_id != 0:
        raise ConfigError(f"{path} is not a ragtrim vector store: another application marked it as its own "
                          f"(application_id {app_id:#x}); ragtrim leaves it alone; {_ELSEWHERE}")
    if not names:
        if conn.execute("PRAGMA user_version").fetchone()[0] != 0:
            raise ConfigError(f"{path} is not a ragtrim vector store: another application set its user_version; "
                              f"ragtrim leaves it alone; {_ELSEWHERE}")
        return False
    if names == _OWN_OBJECTS:  # made by a ragtrim that wrote no marker: the same schema
        return True
    foreign = sorted(names - _OWN_OBJECTS)
    shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    raise ConfigError(f"{path} is not a ragtrim vector store: it holds tables ragtrim did not make ({shown}); "
                      f"ragtrim leaves another application's database alone; {_ELSEWHERE}")


def create(conn: sqlite3.Connection, path: Path) -> None:
    """Make the store in a new file, or check (and mark) one ragtrim made; refuse any other file first
    (``ownership``). Incremental auto-vacuum must be set before the first table; WAL comes last, so a refused file is
    left as it was."""
    if not ownership(conn, path):
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        ownership(conn, path)  # again under the write lock: another process may have made or taken it meanwhile
        if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        found = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()[0]
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    if found != str(SCHEMA_VERSION):
        raise ConfigError(f"vector store schema {found} is not {SCHEMA_VERSION} (written by another ragtrim "
                          f"version); {_ELSEWHERE}, or delete {path}")
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the transaction in progress, if SQLite has not already (it does after a full disk, and a second
    ROLLBACK would replace the real error with "cannot rollback - no transaction is active")."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def explain(exc: BaseException, path: Path) -> BaseException:
    """``exc`` in the terms a user acts on: a full disk names the path and its free space, a file that is not a
    database is refused as not a store; any other error as it is."""
    if not isinstance(exc, sqlite3.Error):
        return exc
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_NOTADB":
        return ConfigError(f"{path} is not a ragtrim vector store: it is not an SQLite database (or its header is "
                           f"damaged); ragtrim leaves it alone; {_ELSEWHERE}")
    if name == "SQLITE_FULL":
        return VectorStoreError(f"vector store {path}: the disk is full ({_free(path)}; SQLite: {exc}); free some "
                                "space, or give the store a smaller bound (--max-mb, $RAGTRIM_VECTOR_STORE_MAX_MB)")
    if name.startswith("SQLITE_IOERR"):
        return VectorStoreError(f"vector store {path}: the file could not be written or read ({_free(path)}; "
                                f"SQLite: {exc}, {name}): the disk may be full, the file over a size limit (ulimit "
                                "-f) or the device failing")
    return exc


def _free(path: Path) -> str:
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:.1f} MiB free on its file system"
