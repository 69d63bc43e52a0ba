"""The peer comparison's numbers from hand-made cells: recall and overshoot, the paired test, cost, totals."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ragtrim_bench.peers.summary import comparisons, cost_by_row, paired, records, summarize, totals


def _cell(row: str, kept4: str, *, produced: list[int] | None = None, cold: list[float | None] | None = None,
          column: str = "c", errors: list[str | None] | None = None) -> dict[str, Any]:
    n = len(kept4)
    return {"row": row, "column": column, "split": "dev", "request_ids": [f"r{i}" for i in range(n)],
            "budgets": {"4": [10] * n, "8": [5] * n},
            "kept": {"4": kept4, "8": "0" * n},
            "tokens_after": {"4": [10] * n, "8": [5] * n},
            "produced_tokens": {"4": produced or [10] * n, "8": [5] * n},
            "cut": {"4": [p > 10 for p in (produced or [10] * n)], "8": [False] * n},
            "cold_ms": cold or [None] * n, "cold_cpu_s": [None] * n, "errors": errors or [None] * n}


class TestRecords:
    def test_recall_interval_and_overshoot(self) -> None:
        rec = records([_cell("peer", "1100", produced=[10, 14, 30, 9])], [4, 8])
        four = rec[0]
        assert (four["ratio"], four["n"], four["answer_recall"]) == (4, 4, 0.5)
        assert four["answer_recall_ci95_low"] < 0.5 < four["answer_recall_ci95_high"]
        assert (four["n_overshoot"], four["overshoot_rate"], four["mean_overshoot_tokens"]) == (2, 0.5, 12.0)
        assert four["n_cut"] == 2 and four["budget_violations"] == 0
        assert rec[1]["ratio"] == 8 and rec[1]["cold_p50_ms"] is None

    def test_cost_only_at_the_timed_ratio(self) -> None:
        rec = records([_cell("peer", "11", cold=[10.0, 30.0])], [4, 8])
        assert (rec[0]["n_timed"], rec[0]["cold_p50_ms"]) == (2, 20.0)

    def test_first_error_is_kept(self) -> None:
        rec = records([_cell("peer", "10", errors=[None, "ValueError: boom"])], [4, 8])
        assert rec[0]["n_errors"] == 1 and rec[0]["first_error"] == "ValueError: boom"


class TestPaired:
    def test_counts_and_exact_p(self) -> None:
        out = paired("1111100000", "0000011111")
        assert (out["n_only_reference"], out["n_only_peer"], out["recall_diff"]) == (5, 5, 0.0)
        assert out["mcnemar_p"] == 1.0 and not out["peer_wins_significantly"]

    def test_a_significant_peer_win(self) -> None:
        out = paired("0" * 10, "1" * 10)
        assert out["mcnemar_p"] == pytest.approx(2 / 1024)
        assert out["peer_wins_significantly"] and not out["reference_wins_significantly"]

    def test_a_peer_on_fewer_requests_pairs_with_the_prefix(self) -> None:
        out = paired("110000", "01")
        assert (out["n"], out["reference_recall"], out["peer_recall"]) == (2, 1.0, 0.5)


class TestComparisons:
    def test_per_column_and_pooled(self) -> None:
        cells = [_cell("default", "1110"), _cell("peer", "1000"),
                 _cell("default", "11", column="d"), _cell("peer", "01", column="d")]
        out = comparisons(cells, [4])
        by = {(c["row"], c["column"]): c for c in out}
        assert set(by) == {("peer", "c"), ("peer", "d"), ("peer", "all")}
        assert by[("peer", "all")]["n"] == 6
        assert (by[("peer", "all")]["n_only_reference"], by[("peer", "all")]["n_only_peer"]) == (3, 0)

    def test_different_requests_are_refused(self) -> None:
        peer = _cell("peer", "10")
        peer["request_ids"] = ["x", "y"]
        with pytest.raises(ValueError, match="different requests"):
            comparisons([_cell("default", "11"), peer], [4])


def test_cost_and_totals() -> None:
    cells = [_cell("default", "11", cold=[10.0, 20.0]), _cell("peer", "11", cold=[100.0, 300.0], produced=[20, 5])]
    cost = {c["row"]: c for c in cost_by_row(cells)}
    assert cost["peer"]["cold_p50_ms"] == 200.0 and cost["peer"]["cold_p50_vs_default"] == pytest.approx(200 / 15)
    tot = totals(cells, [4, 8])
    assert tot["peer"] == {"n_calls": 4, "errors": 0, "budget_violations": 0, "n_overshoot": 1,
                           "overshoot_rate": 0.25}


def test_summarize_keys() -> None:
    out = summarize({"cells": [_cell("default", "1")], "ratios": [4, 8]})
    assert set(out) == {"records", "comparisons", "cost_by_row", "totals"}
    assert math.isnan(out["cost_by_row"][0]["cold_p50_ms"])
