"""One request of one arm for one golden item, as the results file keeps it (a JSON line each), and the results file:
appended as requests finish, read back by a rerun, which sends only what is missing.

Nothing is dropped: a failed request is a record with its error, counted in the report; a record whose arm or item
changed since (another fingerprint) is kept in the file, not reused, and counted as stale.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Self

from ragtrim.errors import InputError

RECORD_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """What one request gave. ``ttft_ms`` runs from the start of the item's turn (the client-side trim included) to
    the first answer text; ``latency_ms`` to the end of the answer; both from the attempt that succeeded.
    ``usage_source``: ``usage`` when the server reported token counts, ``events`` when completion tokens were
    counted as streamed text events (prompt tokens then unknown). ``documents_before``/``after``: the documents'
    tokens before and after a client-side trim; ``gateway_prompt_before``/``after``: the prompt's tokens before and
    after a ragtrim gateway's trim (its ``x-ragtrim-tokens-*`` headers)."""

    arm: str
    item: str
    arm_key: str
    item_key: str
    ok: bool
    reply: str | None = None
    error_kind: str | None = None
    error: str | None = None
    status: int | None = None
    attempts: int = 1
    ttft_ms: float | None = None
    latency_ms: float | None = None
    trim_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_source: str | None = None
    documents_before: int | None = None
    documents_after: int | None = None
    gateway_prompt_before: int | None = None
    gateway_prompt_after: int | None = None
    finished_at: float = 0.0

    @property
    def output_tokens_per_s(self) -> float | None:
        """Completion tokens per second after the first (decode speed); None with fewer than two tokens."""
        if not self.ok or self.completion_tokens is None or self.completion_tokens < 2 \
                or self.ttft_ms is None or self.latency_ms is None or self.latency_ms <= self.ttft_ms:
            return None
        return (self.completion_tokens - 1) / ((self.latency_ms - self.ttft_ms) / 1000)

    def to_dict(self) -> dict[str, Any]:
        return {"v": RECORD_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RequestRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True, slots=True)
class StoredResults:
    """What a results file held: the reusable records by ``(arm, item)``, and counts of the rest."""

    records: dict[tuple[str, str], RequestRecord]
    stale: int
    errors_to_retry: int
    torn_tail: bool


def read_results(path: str | Path, keys: Mapping[tuple[str, str], tuple[str, str]], *,
                 retry_errors: bool = False) -> StoredResults:
    """The records of ``path`` (missing: none) that still match ``keys`` (``(arm, item) -> (arm_key, item_key)``);
    the last record of a pair wins. Failed records are reused unless ``retry_errors``. A last line cut short by an
    interruption is ignored (``torn_tail``) and removed before anything is appended; any other bad line is an error,
    since the file may not be ours."""
    p = Path(path)
    if not p.exists():
        return StoredResults({}, 0, 0, False)
    raw = p.read_bytes()
    lines = raw.split(b"\n")
    torn = bool(lines and lines[-1].strip())
    found: dict[tuple[str, str], RequestRecord] = {}
    stale = 0
    for n, line in enumerate(lines[:-1] if torn else lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            rec = RequestRecord.from_dict(obj)
        except (ValueError, TypeError) as exc:
            raise InputError(f"results file {str(p)!r} line {n} is not a gate result ({exc}); pass another "
                             "--out folder or remove the file") from None
        want = keys.get((rec.arm, rec.item))
        if want is None or want != (rec.arm_key, rec.item_key):
            stale += 1
            continue
        found[(rec.arm, rec.item)] = rec
    if torn:
        try:  # a torn tail that parses is a complete record without its newline: keep it
            rec = RequestRecord.from_dict(json.loads(lines[-1]))
            if keys.get((rec.arm, rec.item)) == (rec.arm_key, rec.item_key):
                found[(rec.arm, rec.item)] = rec
            torn = False
        except (ValueError, TypeError):
            pass
    errors = sum(1 for r in found.values() if not r.ok)
    if retry_errors:
        found = {k: r for k, r in found.items() if r.ok}
    return StoredResults(found, stale, errors if retry_errors else 0, torn)


class ResultsWriter:
    """Appends records to the results file, one flushed line each, so an interruption loses at most the requests
    in flight. A torn last line left by an earlier interruption is cut off first."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: Any = None

    def __enter__(self) -> Self:
        if self.path.exists():
            raw = self.path.read_bytes()
            end = raw.rfind(b"\n") + 1
            if end < len(raw):
                try:  # a whole record without its newline: finish the line
                    json.loads(raw[end:])
                    with open(self.path, "ab") as f:
                        f.write(b"\n")
                except ValueError:
                    with open(self.path, "r+b") as f:
                        f.truncate(end)
        self._file = open(self.path, "a", encoding="utf-8")
        return self

    def write(self, record: RequestRecord) -> None:
        self._file.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        self._file.flush()

    def write_all(self, records: Iterable[RequestRecord]) -> None:
        for r in records:
            self.write(r)

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
