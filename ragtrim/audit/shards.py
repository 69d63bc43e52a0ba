"""Stretches of the audited input that can be read apart (by the Ray engine's workers, or one after another): a
whole log file, or a byte range of a plain JSONL file cut at line starts, with the line number it starts at and the
format decided from the file's first lines, so that every request keeps its line and the file's format."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragtrim.audit.formats import DETECT_CLASSIFIED, DETECT_LINES, classify, classify_text, decide
from ragtrim.audit.reader import (
    _NOT_JSON,
    AuditRequest,
    Endpoint,
    SkipLog,
    _loads,
    _parse_json,
    _request,
    _vllm_request,
    open_log,
    read_requests,
)
from ragtrim.errors import ConfigError, InputError

_COUNT_BLOCK = 16 * 2**20


@dataclass(frozen=True, slots=True)
class LogShard:
    """``ordinal``: the file's place among the logs given; ``end=None``: the whole file (plain or gzip, or stdin),
    read as ``read_requests`` reads it; otherwise the lines that start in ``[start, end)``, the first of them line
    ``first_line``, in the file's ``log_format``."""

    ordinal: int
    path: str
    start: int = 0
    end: int | None = None
    first_line: int = 1
    log_format: str = "unknown"
    formats_seen: tuple[tuple[str, int], ...] = ()


def plan_shards(paths: Sequence[str | Path], *, shard_bytes: int | None = None) -> list[LogShard]:
    """The shards of ``paths`` in input order: each file whole, or, for a plain file larger than ``shard_bytes``,
    byte ranges of about that size (a gzip stream cannot be entered in the middle: split such logs into files)."""
    if shard_bytes is not None and (isinstance(shard_bytes, bool) or shard_bytes < 1):
        raise ConfigError(f"shard_bytes must be >= 1 (or None: one shard per file), got {shard_bytes!r}")
    shards: list[LogShard] = []
    for ordinal, raw in enumerate(paths):
        path = str(raw)
        if shard_bytes is None or path == "-" or _gzip(path) or os.path.getsize(path) <= shard_bytes:
            shards.append(LogShard(ordinal, path))
            continue
        log_format, seen = detect_format(path)
        cuts = _cuts(path, shard_bytes)
        first = 1
        for start, end, lines in zip(cuts, cuts[1:], _line_counts(path, cuts), strict=False):
            shards.append(LogShard(ordinal, path, start, end, first, log_format, seen))
            first += lines
    return shards


def _gzip(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except IsADirectoryError:
        raise InputError(f"request log {path!r} is a directory; pass a JSONL file") from None
    except FileNotFoundError:
        raise InputError(f"request log {path!r} does not exist") from None
    except OSError as exc:
        raise InputError(f"request log {path!r} cannot be read: {exc.strerror}") from None


def detect_format(path: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """The format of a plain log from its first lines, as ``read_requests`` decides it (raises
    ``UnsupportedLogFormat`` for a format the audit refuses)."""
    loads = _loads()
    kinds: list[str | None] = []
    with open_log(path) as stream:
        for line_no, line in enumerate(stream, 1):
            if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.strip():
                continue
            obj = _parse_json(loads, line, line_no, path)
            kinds.append(classify_text(line) if obj is _NOT_JSON else classify(obj))
            if len(kinds) >= DETECT_LINES or sum(k is not None for k in kinds) >= DETECT_CLASSIFIED:
                break
    seen = tuple(Counter(k for k in kinds if k is not None).most_common())
    return decide(kinds, path), seen


def _cuts(path: str, shard_bytes: int) -> list[int]:
    """Offsets of line starts about ``shard_bytes`` apart, from 0 to the file's size."""
    size = os.path.getsize(path)
    cuts = [0]
    with open(path, "rb") as f:
        pos = shard_bytes
        while pos < size:
            f.seek(pos - 1)
            f.readline()  # to the end of the line that holds byte pos - 1: the next line starts a shard
            start = f.tell()
            if start >= size:
                break
            cuts.append(start)
            pos = start + shard_bytes
    cuts.append(size)
    return cuts


def _line_counts(path: str, cuts: Sequence[int]) -> list[int]:
    """Lines that start in each range ``[cuts[i], cuts[i+1])`` (every range starts at a line start)."""
    counts = []
    with open(path, "rb") as f:
        for start, end in itertools.pairwise(cuts):
            f.seek(start)
            left, newlines, last = end - start, 0, b""
            while left > 0:
                block = f.read(min(_COUNT_BLOCK, left))
                if not block:
                    break
                newlines += block.count(b"\n")
                left -= len(block)
                last = block
            counts.append(newlines + (1 if last and not last.endswith(b"\n") else 0))
    return counts


def read_shard(shard: LogShard, *, skipped: SkipLog, context_tag: str = "context") -> Iterator[AuditRequest]:
    """The requests of ``shard``; its skipped lines, the lines it read and the format go to ``skipped``."""
    if shard.end is None:
        yield from read_requests(shard.path, skipped=skipped, context_tag=context_tag)
        return
    skipped.log_format = shard.log_format
    skipped.formats_seen = dict(shard.formats_seen) if shard.first_line == 1 else {}
    loads = _loads()
    vllm = shard.log_format == "vllm_server_log"
    flavor: Endpoint = "messages" if shard.log_format in ("anthropic_messages", "anthropic_batch") else "chat"
    with open(shard.path, "rb") as f:
        f.seek(shard.start)
        pos, line_no = shard.start, shard.first_line - 1
        while pos < shard.end:
            line = f.readline()
            if not line:
                break
            pos += len(line)
            line_no += 1
            skipped.lines_read += 1
            if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.strip():
                continue
            if vllm:
                yield from _vllm_request(line, line_no, skipped, context_tag)
            else:
                yield from _request(_parse_json(loads, line, line_no, shard.path), line, line_no, skipped,
                                    context_tag, flavor)
