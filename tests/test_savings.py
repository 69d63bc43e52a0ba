"""ragtrim.savings (behind ``ragtrim bench``), the JSONL reader and the table formatter it uses."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from ragtrim._util.jsonl import iter_jsonl
from ragtrim._util.table import format_table
from ragtrim.errors import InputError
from ragtrim.pipeline import Pipeline
from ragtrim.savings import (
    SavingsRecord,
    aggregate,
    answer_in_text,
    example_requests,
    load_requests,
    measure,
    normalize_answer,
)
from ragtrim.stages.budget import TokenBudget


def test_format_table() -> None:
    out = format_table([{"m": "a", "x": 1.23456, "n": 1200}, {"m": "bb", "x": None, "n": 3}],
                       [("m", "method"), ("x", "x"), ("n", "n")])
    lines = out.splitlines()
    assert lines[0].split() == ["method", "x", "n"]
    assert lines[2].split() == ["a", "1.235", "1,200"]
    assert lines[3].split() == ["bb", "-", "3"]


class TestExampleRequests:
    def test_shipped_inside_the_package(self) -> None:
        path = example_requests()
        assert path.is_file() and path.parent.name == "data" and path.parent.parent.name == "ragtrim"

    def test_twelve_requests_with_answers(self) -> None:
        requests = load_requests(example_requests())
        assert [r.id for r in requests] == [f"q{i:02d}" for i in range(1, 13)]
        assert all(r.answers and r.query and r.chunks for r in requests)


class TestIterJsonl:
    def test_line_numbers_skip_blank_lines(self, tmp_path: Path) -> None:
        path = tmp_path / "x.jsonl"
        path.write_text('{"a": 1}\n\n  \n[2]\n', encoding="utf-8")
        assert list(iter_jsonl(path)) == [(1, {"a": 1}), (4, [2])]

    def test_gzip(self, tmp_path: Path) -> None:
        path = tmp_path / "x.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write('{"a": 1}\n{"b": 2}')
        assert [v for _, v in iter_jsonl(path)] == [{"a": 1}, {"b": 2}]

    def test_u2028_stays_inside_a_string(self, tmp_path: Path) -> None:
        path = tmp_path / "x.jsonl"
        path.write_text('{"t": "a\u2028b"}\n', encoding="utf-8")
        assert list(iter_jsonl(path)) == [(1, {"t": "a\u2028b"})]

    def test_empty_file_gives_nothing(self, tmp_path: Path) -> None:
        path = tmp_path / "x.jsonl"
        path.write_text("", encoding="utf-8")
        assert list(iter_jsonl(path)) == []

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            (b'{"a": 1}\n{oops\n', r"x.jsonl:2: not valid JSON"),
            (b'{"a": 1}\n"caf\xe9"\n', r"prompts file .* is not UTF-8 JSONL \(invalid continuation byte at line 2\)"),
            (b"[" * 100_000, r"x.jsonl:1: nested too deeply"),
        ],
    )
    def test_errors_name_file_and_line(self, tmp_path: Path, content: bytes, message: str) -> None:
        path = tmp_path / "x.jsonl"
        path.write_bytes(content)
        with pytest.raises(InputError, match=message):
            list(iter_jsonl(path, what="prompts file"))

    def test_missing_file_and_directory(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="requests file .* does not exist"):
            list(iter_jsonl(tmp_path / "nope.jsonl", what="requests file"))
        with pytest.raises(InputError, match="does not exist"):
            list(iter_jsonl(tmp_path))

    def test_broken_gzip(self, tmp_path: Path) -> None:
        path = tmp_path / "x.jsonl.gz"
        path.write_bytes(b"not gzip")
        with pytest.raises(InputError, match="cannot be read"):
            list(iter_jsonl(path))


class TestLoadRequests:
    def test_fields(self, tmp_path: Path) -> None:
        path = tmp_path / "r.jsonl"
        path.write_text(json.dumps({"id": "a", "query": "q", "answers": ["x"], "chunks": ["c1", "c2"]}) + "\n"
                        + json.dumps({"chunks": []}) + "\n", encoding="utf-8")
        first, second = load_requests(path)
        assert (first.id, first.query, first.answers, first.chunks) == ("a", "q", ("x",), ("c1", "c2"))
        assert (second.id, second.query, second.answers, second.chunks) == ("2", "", (), ())

    @pytest.mark.parametrize(
        ("line", "message"),
        [('["c"]', "each line must be an object with a 'chunks' list"),
         ('{"chunks": "c"}', "each line must be an object with a 'chunks' list"),
         ('{"chunks": [], "answers": "x"}', "'answers' must be a list")],
    )
    def test_bad_shapes(self, tmp_path: Path, line: str, message: str) -> None:
        path = tmp_path / "r.jsonl"
        path.write_text(line + "\n", encoding="utf-8")
        with pytest.raises(InputError, match=message):
            load_requests(path)


class TestAnswers:
    def test_normalize(self) -> None:
        assert normalize_answer("  The  Quick, brown fox!  ") == "quick brown fox"

    def test_whole_words(self) -> None:
        assert answer_in_text(["May 18, 2018"], "released on may 18 2018 in the US")
        assert not answer_in_text(["1"], "in 1990")
        assert not answer_in_text(["The"], "the whole text")  # normalizes to nothing: no signal


class TestMeasureAndAggregate:
    def test_records_and_summary(self, tmp_path: Path) -> None:
        path = tmp_path / "r.jsonl"
        path.write_text(
            json.dumps({"id": "a", "query": "tower", "answers": ["330"], "chunks": ["the tower is 330", "one two three"]})
            + "\n" + json.dumps({"id": "b", "query": "x", "chunks": ["w1 w2 w3 w4"]}) + "\n",
            encoding="utf-8",
        )
        pipeline = Pipeline([TokenBudget(max_tokens=4)], tokenizer="whitespace")
        records = measure("budget 4", pipeline, load_requests(path))
        assert [(r.request_id, r.tokens_before, r.tokens_after, r.answer_kept) for r in records] == [
            ("a", 7, 4, True), ("b", 4, 4, None)]
        summary = aggregate(records)
        assert (summary["requests"], summary["errors"], summary["tokens_saved"]) == (2, 0, 3)
        assert summary["mean_tokens_before"] == 5.5 and summary["compression_ratio"] == 11 / 8
        assert summary["answer_recall"] == 1.0

    def test_all_errors_give_nan_latencies(self) -> None:
        summary = aggregate([SavingsRecord("m", "a", error="boom")])
        assert summary["errors"] == 1 and summary["answer_recall"] is None
        assert math.isnan(summary["p50_latency_ms"]) and math.isnan(summary["mean_cpu_s_per_request"])

    def test_percentiles_are_linear(self) -> None:
        records = [SavingsRecord("m", str(i), latency_ms=float(ms)) for i, ms in enumerate([1, 2, 3, 4])]
        summary = aggregate(records)
        assert summary["p50_latency_ms"] == 2.5 and summary["p95_latency_ms"] == pytest.approx(3.85)
        assert summary["mean_latency_ms"] == 2.5
