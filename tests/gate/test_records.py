"""ragtrim.gate.records: the results file a rerun continues from; torn lines, stale records and failed ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.errors import InputError
from ragtrim.gate.records import RequestRecord, ResultsWriter, read_results


def _rec(item: str, *, ok: bool = True, arm: str = "a", arm_key: str = "k1", item_key: str = "i1") -> RequestRecord:
    return RequestRecord(arm=arm, item=item, arm_key=arm_key, item_key=item_key, ok=ok,
                         reply="x" if ok else None, error_kind=None if ok else "http_500", ttft_ms=10.0,
                         latency_ms=30.0, completion_tokens=5)


KEYS = {("a", "1"): ("k1", "i1"), ("a", "2"): ("k1", "i1"), ("a", "3"): ("k1", "i1")}


def test_missing_file_is_empty(tmp_path: Path) -> None:
    stored = read_results(tmp_path / "none.jsonl", KEYS)
    assert stored.records == {} and stored.stale == 0 and not stored.torn_tail


def test_roundtrip_and_output_speed(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write_all([_rec("1"), _rec("2")])
    stored = read_results(path, KEYS)
    assert stored.records[("a", "1")] == _rec("1")
    assert _rec("1").output_tokens_per_s == pytest.approx(4 / 0.02)  # 4 tokens after the first in 20 ms
    assert _rec("1", ok=False).output_tokens_per_s is None


def test_stale_records_are_counted_not_reused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write_all([_rec("1", arm_key="old"), _rec("2", item_key="old"), _rec("3"), _rec("9")])
    stored = read_results(path, KEYS)
    assert list(stored.records) == [("a", "3")] and stored.stale == 3


def test_failed_records_stand_unless_retried(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write_all([_rec("1", ok=False), _rec("2")])
    assert not read_results(path, KEYS).records[("a", "1")].ok
    again = read_results(path, KEYS, retry_errors=True)
    assert list(again.records) == [("a", "2")] and again.errors_to_retry == 1


def test_the_last_record_of_a_pair_wins(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write_all([_rec("1", ok=False), _rec("1")])
    assert read_results(path, KEYS).records[("a", "1")].ok


def test_a_torn_last_line_is_dropped_and_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    line = json.dumps(_rec("1").to_dict())
    path.write_text(line + "\n" + line[:40], encoding="utf-8")  # killed while writing the second record
    stored = read_results(path, KEYS)
    assert list(stored.records) == [("a", "1")] and stored.torn_tail
    with ResultsWriter(path) as w:
        w.write(_rec("2"))
    assert [json.loads(x)["item"] for x in path.read_text().splitlines()] == ["1", "2"]


def test_a_whole_last_record_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_rec("1").to_dict()), encoding="utf-8")
    stored = read_results(path, KEYS)
    assert list(stored.records) == [("a", "1")] and not stored.torn_tail
    with ResultsWriter(path) as w:
        w.write(_rec("2"))
    assert [json.loads(x)["item"] for x in path.read_text().splitlines()] == ["1", "2"]


def test_a_foreign_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("not json\n" + json.dumps(_rec("1").to_dict()) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1 is not a gate result"):
        read_results(path, KEYS)
