"""The hostile-bounds benchmark: its measurement helpers, and every in-process case at a small size with the outcome
the fixes give (the full sizes run in ``ragtrim-bench pipeline hostile_bounds``)."""

from __future__ import annotations

import time

import pytest

from ragtrim_bench.pipeline.hostile_bound_cases import CASES, BoundCase, distinct_words, hex_run
from ragtrim_bench.pipeline.hostile_bounds import delays_during, judge, measure_in_child


def test_generators() -> None:
    run = hex_run(1001)
    assert len(run) == 1001 and " " not in run and int(run, 16) >= 0
    words = distinct_words(800).split()
    assert len(words) == len(set(words)) == 100


def test_a_held_gil_shows_as_a_late_wake_up() -> None:
    import random

    _, wall, late = delays_during(lambda: time.sleep(0.2))  # sleeping gives the GIL up
    assert wall >= 0.2 and len(late) > 20
    values = [random.Random(0).random() for _ in range(1_000_000)]
    _, wall, late = delays_during(values.sort)  # one C call that keeps the GIL throughout
    assert max(late) >= 0.5 * wall * 1000


def test_judge_compares_with_the_baseline() -> None:
    rows = [{"case": "baseline", "longest_hold_ms": 30.0},
            {"case": "a", "rss_growth_mb": 50.0, "longest_hold_ms": 70.0},
            {"case": "b", "rss_growth_mb": 150.0, "longest_hold_ms": 10.0},
            {"case": "c", "rss_growth_mb": 10.0, "longest_hold_ms": 90.0},
            {"case": "d", "wall_s": 1.0}]
    judge(rows)
    assert [r.get("within_bound") for r in rows] == [None, True, False, False, None]


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in ("index_hex_run", "cli_bad_input_and_passwords")],
                         ids=lambda c: c.name)
def test_every_case_runs_small_with_the_fixed_outcome(case: BoundCase) -> None:
    record = measure_in_child(case, 0.002)
    assert record["case"] == case.name and record["wall_s"] >= 0
    if case.name.startswith("dedup_"):
        assert record["chunks_kept"] == 3
    if case.name == "prefix_hex_run":
        assert record["chars_tokenized"] <= 2 * record["bound_chars"]
    if case.name == "store_wal_three_readers":
        assert record["largest_wal_mib"] <= record["wal_limit_mib"]
    if case.name == "store_hostile_files":
        assert record["wrong_width"] == "trimmed; damaged 1, repaired 1"
        assert record["foreign_file"].startswith("refused, file unchanged: True")
        assert record["full_disk"].startswith("vector store <dir>/full.sqlite3: the disk is full")
    if case.name == "index_key_forms":
        assert record["store_hits"] == record["passages"] == 4
