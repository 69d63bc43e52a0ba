"""Byte-range shards of a plain log read every line once, with its line number, as the whole file is read."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from ragtrim.audit.formats import UnsupportedLogFormat
from ragtrim.audit.reader import SkipLog, read_requests
from ragtrim.audit.shards import LogShard, plan_shards, read_shard
from ragtrim.errors import ConfigError

LINES = [json.dumps({"messages": [{"role": "user", "content": f"question {i}"}]}) for i in range(12)]


def read_all(shards: list[LogShard]) -> tuple[list[tuple[str, int]], dict[str, int], int, list[int]]:
    requests, counts, lines, examples = [], {}, 0, []
    for shard in shards:
        skipped = SkipLog()
        requests += [(r.request_id, r.line) for r in read_shard(shard, skipped=skipped)]
        for k, v in skipped.counts.items():
            counts[k] = counts.get(k, 0) + v
        lines += skipped.lines_read
        examples += [e["line"] for e in skipped.examples]
    return requests, counts, lines, examples


@pytest.mark.parametrize("ending", ["\n", ""])
def test_every_cut_reads_what_the_whole_file_reads(tmp_path: Path, ending: str) -> None:
    body = [LINES[0], "", "{broken", *LINES[1:6], "   ", "[1]", *LINES[6:]]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(body).encode() + ending.encode())
    skipped = SkipLog()
    whole = [(r.request_id, r.line) for r in read_requests(path, skipped=skipped)]
    assert len(whole) == 12 and whole[0] == ("line-1", 1) and skipped.lines_read == len(body)
    for shard_bytes in range(1, path.stat().st_size + 2, 7):
        shards = plan_shards([path], shard_bytes=shard_bytes)
        assert shards[0].start == 0 and shards[-1].end == path.stat().st_size
        assert all(a.end == b.start for a, b in itertools.pairwise(shards))
        requests, counts, lines, examples = read_all(shards)
        assert requests == whole and counts == dict(skipped.counts) and lines == skipped.lines_read, shard_bytes
        assert examples == [e["line"] for e in skipped.examples]


def test_gzip_and_small_files_stay_whole(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "a.jsonl.gz"
    with gzip.open(packed, "wt") as f:
        f.write("\n".join(LINES) * 50)
    plain = tmp_path / "b.jsonl"
    plain.write_text("\n".join(LINES))
    shards = plan_shards([packed, plain], shard_bytes=10_000)
    assert [(s.ordinal, s.end) for s in shards] == [(0, None), (1, None)]
    with pytest.raises(ConfigError, match="shard_bytes must be >= 1"):
        plan_shards([plain], shard_bytes=0)


def test_the_format_is_decided_once_for_every_range(tmp_path: Path) -> None:
    path = tmp_path / "gemini.jsonl"
    path.write_text(json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}) + "\n" * 3000)
    with pytest.raises(UnsupportedLogFormat, match="Gemini"):
        plan_shards([path], shard_bytes=100)
