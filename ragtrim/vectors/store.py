"""What every passage-vector store shares: the ``VectorStore`` protocol, the key of a vector, its stored bytes,
and ``SharedStore``, through which a process uses a store (lookups that never raise, writes batched on ragtrim's
I/O thread, a breaker that stops asking a broken store for a while, counters).

A key is the SHA-256 of the embedder's *recipe* (everything besides the text that changes a vector: the model's
content fingerprint, the backend and its precision, the runtime's version, the word pieces read, pooling and
normalization, how texts are batched, ``FORMAT_VERSION``) and of the text in its ``key_text`` form (the one form
every writer and reader keys, and the model reads), so a vector of another model, version or prefix length is never
found. A value is the vector as little-endian float32, exactly, after a CRC-32 of it: a value that fails the
checksum, holds another width than the embedder's or a number that is not finite is a miss, never a vector, and the
vector computed for it replaces it.

Which store a scorer uses (``vector_store="default"``): ``configure_default_store`` (the gateway's config), else
``$RAGTRIM_VECTOR_STORE`` (``off``, a file path, or a ``redis://`` URL), else SQLite in
``ragtrim._util.paths.cache_dir()/vectors.sqlite3``, at most ``$RAGTRIM_VECTOR_STORE_MAX_MB`` (default 256) MiB; every
bound passes ``store_size_bytes``.
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
import time
import weakref
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ragtrim._util.background import submit_io
from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.paths import cache_dir
from ragtrim._util.redact import get_logger
from ragtrim.errors import ConfigError
from ragtrim.vectors.limits import MAX_STORE_MB, MIN_STORE_MB

logger = get_logger("ragtrim")

FORMAT_VERSION = 1
"""Of the key recipe and the stored bytes; bumped when either changes, so old entries are never read."""
STORE_ENV = "RAGTRIM_VECTOR_STORE"
MAX_MB_ENV = "RAGTRIM_VECTOR_STORE_MAX_MB"
DEFAULT_MAX_BYTES = 256 * 2**20
"""About 170,000 MiniLM vectors (384 float32 and their keys, with SQLite's own overhead)."""
DEFAULT_FILE = "vectors.sqlite3"
OFF = ("off", "none", "false", "0", "")


@runtime_checkable
class VectorStore(Protocol):
    """Raw storage of vectors by key. Implementations may raise on any failure (``SharedStore`` catches, counts and
    logs); they must be safe to call from several threads and, with their own connections, several processes."""

    @property
    def location(self) -> str:
        """Where the store is, for logs (no password)."""
        ...

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored values of those ``keys`` that are present."""
        ...

    def put(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        """Store ``(key, value)`` pairs, keeping an existing value of a key (``INSERT OR IGNORE``); evict the least
        recently used entries beyond the store's byte bound. Returns how many were new."""
        ...

    def replace(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        """Store ``(key, value)`` pairs over whatever the keys hold: the repair of values found damaged (two
        processes that repair one key write the same bytes). Returns how many were written."""
        ...

    def touch(self, keys: Sequence[bytes]) -> None:
        """Mark ``keys`` as just used (they were read), for the LRU eviction."""
        ...

    def close(self) -> None: ...


def store_size_bytes(value: object, *, source: str) -> int:
    """The byte bound of a vector store given in MiB by ``source`` (``--max-mb``, ``$RAGTRIM_VECTOR_STORE_MAX_MB``,
    the gateway's ``trim.vector_store_max_mb``): a number, or a string holding one, from ``MIN_STORE_MB`` to
    ``MAX_STORE_MB`` (``ragtrim.vectors.limits``). The one check of a store's size; raises ConfigError naming the
    source, the value, the range and its unit."""
    number: float | None = None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    if number is None or not math.isfinite(number) or not MIN_STORE_MB <= number <= MAX_STORE_MB:
        if number is not None and math.isfinite(number) and number > MAX_STORE_MB:
            why = " (the unit is MiB)"
        elif number is not None and number < MIN_STORE_MB:
            why = ": a smaller store holds too few vectors to help"
        else:
            why = ""
        raise ConfigError(f"{source} must be a number of MiB from {MIN_STORE_MB} to {MAX_STORE_MB} (1 TiB), got "
                          f"{value!r}{why}")
    return int(number * 2**20)


_LINE_ENDS = str.maketrans({"\r": "\n"})


def key_text(text: str) -> str:
    """The form of a passage that the store keys and the model reads: without a byte order mark at its start, with
    CRLF and CR line ends as LF, without leading and trailing whitespace. One rule for every writer and reader
    (``ragtrim index``, ``trim()``, the gateway, the framework integrations), so a passage read from a ``.txt``
    file with its last newline, or from a Windows file, is found by a trim of the same passage stripped."""
    out = text.strip()
    if out.startswith("\ufeff"):
        out = out[1:].strip()
    if "\r" in out:
        out = out.replace("\r\n", "\n").translate(_LINE_ENDS)
    return out


def vector_key(recipe: str, text: str) -> bytes:
    """The store key of ``text`` (in its ``key_text`` form) embedded by ``recipe`` (32 bytes)."""
    h = hashlib.sha256(f"ragtrim-vectors/{FORMAT_VERSION}\x00{len(recipe)}:{recipe}".encode())
    h.update(key_text(text).encode("utf-8", "surrogatepass"))
    return h.digest()


_CRC = struct.Struct("<I")


def pack(vector: np.ndarray) -> bytes:
    """A vector as stored: CRC-32 of the data, then the data as little-endian float32 (exact)."""
    data = np.ascontiguousarray(vector, dtype="<f4").tobytes()
    return _CRC.pack(zlib.crc32(data)) + data


def unpack(raw: bytes, width: int | None = None) -> np.ndarray | None:
    """The stored vector, or None when the value is not an intact one: a wrong length or checksum, a width other
    than ``width`` (when given: the embedder's), or a number that is not finite. As strict as the checksum: a value
    that fails any of these is a miss, never a vector."""
    if len(raw) <= _CRC.size or (len(raw) - _CRC.size) % 4:
        return None
    data = raw[_CRC.size:]
    if width is not None and len(data) != 4 * width:
        return None
    if _CRC.unpack_from(raw)[0] != zlib.crc32(data):
        return None
    vector = np.frombuffer(data, dtype="<f4").astype(np.float32)
    if not np.isfinite(vector).all():
        return None
    return vector


@dataclass
class StoreStats:
    """What a process did with one store. ``errors``: failed lookups and writes (each logged, none raised);
    ``skipped``: lookups and writes not tried while the breaker was open or after the store was refused;
    ``damaged``: values found that were not intact vectors (``unpack``: length, checksum, width, finite numbers),
    treated as misses; ``repaired``: damaged values overwritten with the vector computed for the miss;
    ``dropped``: writes given up because the queue was full."""

    lookups: int = 0
    hits: int = 0
    misses: int = 0
    writes: int = 0
    errors: int = 0
    skipped: int = 0
    damaged: int = 0
    repaired: int = 0
    dropped: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class SharedStore:
    """A ``VectorStore`` as this process uses it. ``lookup`` and ``save`` never raise: a failure is logged (a
    warning when the store first fails, then debug), counted, and the store is left alone for ``retry_after_s``,
    so a broken, locked or unreachable store costs a request at most one failed call, after which trims go to the
    model as if there were no store. Writes queue here and go out in batches on ragtrim's I/O thread."""

    def __init__(self, store: VectorStore, *, retry_after_s: float = 30.0, max_queue: int = 10_000) -> None:
        self.store = store
        self.retry_after_s = retry_after_s
        self.max_queue = max_queue
        self.stats = StoreStats()
        self._reset_state()
        _LIVE.add(self)

    def _reset_state(self) -> None:
        self._lock = fork_safe_lock()
        self._queue: dict[bytes, bytes] = {}
        self._repairs: dict[bytes, bytes] = {}
        self._damaged: set[bytes] = set()  # keys whose stored value was damaged, until the repair is queued
        self._touched: set[bytes] = set()
        self._scheduled: Future[None] | None = None
        self._broken_until = 0.0
        self._failing = False
        self._refused = False

    # -- the breaker --------------------------------------------------------------------------------------------
    def available(self) -> bool:
        return not self._refused and time.monotonic() >= self._broken_until

    def _failed(self, what: str, exc: BaseException) -> None:
        self.stats.errors += 1
        if isinstance(exc, ConfigError):  # not a store ragtrim may use (another application's file): never again
            self._refused = True
            logger.warning("vector store %s refused: %s; trims go to the model, and this process does not use the "
                           "store again", self.store.location, exc)
            return
        self._broken_until = time.monotonic() + self.retry_after_s
        if not self._failing:
            self._failing = True
            logger.warning("ragtrim: passage-vector store %s: %s failed (%s: %s); trims go on without it (vectors "
                           "kept in memory) and it is tried again in %.0f s; %s=off turns it off", self.store.location,
                           what, type(exc).__name__, exc, self.retry_after_s, STORE_ENV)
        else:
            logger.debug("vector store %s: %s failed again (%s: %s)", self.store.location, what,
                         type(exc).__name__, exc)

    def _worked(self) -> None:
        if self._failing:
            self._failing = False
            logger.warning("vector store %s answers again", self.store.location)

    # -- reads --------------------------------------------------------------------------------------------------
    def lookup(self, keys: Sequence[bytes], *, width: int | None = None) -> dict[bytes, np.ndarray]:
        """The stored vectors of those ``keys`` that are present and intact (``unpack``: of ``width`` numbers when
        given); never raises. A damaged value is a miss, and the vector later saved for its key replaces it."""
        if not keys:
            return {}
        self.stats.lookups += 1
        if not self.available():
            self.stats.skipped += 1
            return {}
        try:
            raw = self.store.get(keys)
        except Exception as exc:  # noqa: BLE001  # any failure of any store: the model answers instead
            self._failed("a lookup", exc)
            return {}
        self._worked()
        found: dict[bytes, np.ndarray] = {}
        damaged: list[bytes] = []
        for key, value in raw.items():
            vector = unpack(value, width)
            if vector is None:
                damaged.append(key)
            else:
                found[key] = vector
        self.stats.hits += len(found)
        self.stats.misses += len(keys) - len(found)
        if damaged:
            self.stats.damaged += len(damaged)
            with self._lock:
                if len(self._damaged) < self.max_queue:
                    self._damaged.update(damaged)
        if found:
            with self._lock:
                self._touched.update(found)
            self._schedule()
        return found

    # -- writes -------------------------------------------------------------------------------------------------
    def save(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Queue vectors for the store; they are written in one batch on the I/O thread (never raises)."""
        with self._lock:
            for key, vector in items:
                if len(self._queue) + len(self._repairs) >= self.max_queue:
                    self.stats.dropped += 1
                    continue
                if key in self._damaged:
                    self._damaged.discard(key)
                    self._repairs[key] = pack(vector)
                else:
                    self._queue[key] = pack(vector)
        self._schedule()

    def _schedule(self) -> None:
        with self._lock:
            if self._scheduled is not None or not (self._queue or self._repairs or self._touched):
                return
            self._scheduled = submit_io(self._write)

    def _write(self) -> None:
        """On the I/O thread: write what is queued, and what was queued meanwhile, until nothing is left (only then
        is ``_scheduled`` cleared, so ``flush`` waits for writes in progress too)."""
        while True:
            with self._lock:
                items, self._queue = list(self._queue.items()), {}
                repairs, self._repairs = list(self._repairs.items()), {}
                touched, self._touched = list(self._touched), set()
                if not items and not repairs and not touched:
                    self._scheduled = None
                    return
            if not self.available():
                self.stats.skipped += 1
                continue
            try:
                if items:
                    self.stats.writes += self.store.put(items)
                if repairs:
                    self.stats.repaired += self.store.replace(repairs)
                if touched:
                    self.store.touch(touched)
            except Exception as exc:  # noqa: BLE001  # the vectors stay in memory; the store misses them
                self._failed("a write", exc)
                continue
            self._worked()

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until everything queued so far is written (``ragtrim index`` and tests call it)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._lock:
                pending = self._scheduled
                if pending is None and (self._queue or self._repairs or self._touched):
                    pending = self._scheduled = submit_io(self._write)
            if pending is None:
                return
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            pending.result(timeout=left)


_LIVE: weakref.WeakSet[SharedStore] = weakref.WeakSet()
_OPEN: dict[tuple[str, int], SharedStore] = {}
_OBJECTS: dict[int, SharedStore] = {}
_OPEN_LOCK = fork_safe_lock()
_DEFAULT: tuple[str, int | None] | None = None


def configure_default_store(spec: str | None, *, max_bytes: int | None = None) -> None:
    """Set the store that ``vector_store="default"`` means in this process (the gateway's ``[trim]`` config):
    ``None`` or ``"off"`` for none, a file path, or a ``redis://`` URL; ``"default"`` leaves the choice to
    ``$RAGTRIM_VECTOR_STORE`` (then the file in ``cache_dir()``). ``max_bytes`` bounds it (None: the default)."""
    global _DEFAULT
    _DEFAULT = ("off" if spec is None else spec, max_bytes)


def default_store_spec() -> tuple[str, int]:
    """``(spec, max_bytes)`` of the default store: ``configure_default_store``, else the environment, else SQLite
    in ``cache_dir()``."""
    spec, max_bytes = _DEFAULT if _DEFAULT is not None else ("default", None)
    if spec.strip().lower() == "default":
        spec = os.environ.get(STORE_ENV, "default")
    if max_bytes is None:
        raw = os.environ.get(MAX_MB_ENV, "")
        max_bytes = store_size_bytes(raw, source=f"${MAX_MB_ENV}") if raw.strip() else DEFAULT_MAX_BYTES
    if spec.strip().lower() == "default":
        spec = str(cache_dir() / DEFAULT_FILE)
    return spec, max_bytes


def open_store(spec: str | VectorStore | None, *, max_bytes: int | None = None) -> SharedStore | None:
    """The process's ``SharedStore`` for ``spec`` (one per location, shared by every scorer), or None for no store.

    ``spec``: ``"default"`` (see ``default_store_spec``), ``None``/``"off"``, a file path (SQLite), a
    ``redis://``, ``rediss://`` or ``unix://`` URL, or a ``VectorStore`` object. Opening connects to nothing: each
    store connects on first use."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        with _OPEN_LOCK:
            shared = _OBJECTS.get(id(spec))
            if shared is None or shared.store is not spec:
                shared = _OBJECTS[id(spec)] = SharedStore(spec)
            return shared
    if spec.strip().lower() == "default":
        spec, default_bytes = default_store_spec()
        max_bytes = default_bytes if max_bytes is None else max_bytes
    if spec.strip().lower() in OFF:
        return None
    max_bytes = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    with _OPEN_LOCK:
        shared = _OPEN.get((spec, max_bytes))
        if shared is None:
            shared = _OPEN[(spec, max_bytes)] = SharedStore(_build(spec, max_bytes))
        return shared


def _build(spec: str, max_bytes: int) -> VectorStore:
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from ragtrim.vectors.redis_store import RedisVectorStore

        return RedisVectorStore(spec, max_bytes=max_bytes)
    from ragtrim.vectors.sqlite_store import SqliteVectorStore

    return SqliteVectorStore(Path(spec.removeprefix("sqlite:")).expanduser(), max_bytes=max_bytes)


def store_stats() -> dict[str, dict[str, int]]:
    """Every store this process opened, by location, with its counters (``StoreStats``)."""
    return {s.store.location: s.stats.as_dict() for s in list(_LIVE)}


def flush_stores(timeout_s: float | None = None) -> None:
    """Wait until every store's queued writes are written."""
    for shared in list(_LIVE):
        shared.flush(timeout_s)


def _after_fork_in_child() -> None:
    # The parent's queued writes are the parent's to make; its I/O thread is gone (ragtrim._util.background).
    for shared in list(_LIVE):
        shared._reset_state()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
