from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragtrim_bench.gpu.report import (
    accuracy_rows,
    arm_vs_oracle,
    knob_rows,
    ladder_rows,
    latency_rows,
    ratio,
    select_candidate,
    slo_rows,
    write_plots,
)


def _acc(set_: str, arms: dict[str, tuple[float, float]]) -> dict[str, Any]:
    return {"type": "accuracy", "set": set_, "arms": {
        arm: {"questions": 10, "accuracy": acc, "refusal_accuracy": None, "mean_prompt_tokens": tokens,
              "answer_in_prompt_rate": 1.0} for arm, (acc, tokens) in arms.items()}}


SUITE: dict[str, Any] = {"runs": [
    {"name": "270m", "tasks": [
        _acc("golden", {"untrimmed": (0.1, 2000.0), "cand_a": (0.9, 100.0), "cand_b": (0.2, 400.0),
                        "oracle": (0.5, 150.0)}),
        _acc("dev", {"untrimmed": (0.1, 2000.0), "cand_a": (0.3, 100.0), "cand_b": (0.4, 400.0),
                     "cand_c": (0.9, 1000.0)}),
    ]},
    {"name": "12b", "tasks": [
        {"type": "single", "arms": {
            arm: {"mean_prompt_tokens": t, "p50_ttft_ms": p50, "p99_ttft_ms": p99, "p50_tpot_ms": 8.0,
                  "p50_e2el_ms": 100.0}
            for arm, (t, p50, p99) in {"untrimmed": (2000, 90.0, 120.0), "trimmed_4x": (500, 30.0, 40.0),
                                       "len_64": (64, 20.0, 22.0), "len_1024": (1024, 50.0, 55.0)}.items()}},
        {"type": "ladder", "slo_ms": 500, "arms": {
            "untrimmed": {"steps": [{"request_rate": 2, "completed": 10, "request_throughput": 2.0,
                                     "p50_ttft_ms": 50, "p95_ttft_ms": 90, "p99_ttft_ms": 99, "goodput": 2.0,
                                     "mean_prompt_tokens": 2000}],
                          "at_slo": {"slo_ms": 500, "request_rate": 2, "request_throughput": 2.0}},
            "trimmed_4x": {"steps": [{"request_rate": 4, "completed": 10, "request_throughput": 4.0,
                                      "p50_ttft_ms": 20, "p95_ttft_ms": 30, "p99_ttft_ms": 35, "goodput": 4.0,
                                      "mean_prompt_tokens": 500},
                                     {"request_rate": 8, "completed": 10, "request_throughput": 7.0,
                                      "p50_ttft_ms": 25, "p95_ttft_ms": 40, "p99_ttft_ms": 45, "goodput": 7.0,
                                      "mean_prompt_tokens": 500},
                                     {"request_rate": 16, "skipped": "deadline"}],
                           "at_slo": {"slo_ms": 500, "request_rate": 8, "request_throughput": 7.0}}}},
    ]},
]}


def test_accuracy_rows_carry_set_and_ratio_within_the_task() -> None:
    rows = accuracy_rows([SUITE])
    assert {(r["set"], r["arm"]) for r in rows} >= {("golden", "cand_a"), ("dev", "cand_c")}
    dev_c = next(r for r in rows if r["set"] == "dev" and r["arm"] == "cand_c")
    assert dev_c["prompt_token_ratio"] == 2.0


def test_selection_uses_dev_accuracy_only_among_arms_at_the_minimum_ratio() -> None:
    rows = accuracy_rows([SUITE])
    # cand_c has the best dev accuracy but only 2x; cand_a is best on the golden set but worse on dev
    assert select_candidate(rows, config="270m") == "cand_b"
    assert select_candidate(rows, config="270m", min_ratio=10.0) == "cand_a"
    assert select_candidate(rows, config="270m", min_ratio=100.0) is None
    assert select_candidate(rows, config="missing") is None


def test_ratio_filters_by_set_and_handles_missing() -> None:
    rows = accuracy_rows([SUITE])
    assert ratio(rows, "accuracy", "cand_a", "untrimmed", "270m", "dev") == pytest.approx(3.0)
    assert ratio(rows, "accuracy", "cand_a", "untrimmed", "270m", "golden") == pytest.approx(9.0)
    assert ratio(rows, "accuracy", "nope", "untrimmed", "270m") is None


def test_latency_slo_rows_and_plots(tmp_path: Path) -> None:
    lat = latency_rows([SUITE])
    assert ratio(lat, "p50_ttft_ms", "untrimmed", "trimmed_4x", "12b") == 3.0
    slo = slo_rows([SUITE])
    assert [r["arm"] for r in slo] == ["trimmed_4x"]  # untrimmed has one measured rate: a probe, not a ladder
    assert slo_rows([SUITE], min_steps=1)[0]["request_throughput"] == 2.0
    assert ratio(slo_rows([SUITE], min_steps=1), "request_throughput", "trimmed_4x", "untrimmed", "12b") == 3.5
    lad = ladder_rows([SUITE])
    assert [(r["arm"], r["request_rate"]) for r in lad] == [("untrimmed", 2), ("trimmed_4x", 4), ("trimmed_4x", 8)]
    paths = write_plots(lat, accuracy_rows([SUITE]), lad, slo, tmp_path)
    assert [p.name for p in paths] == ["ttft_vs_prompt_tokens.png", "accuracy_vs_compression.png",
                                       "load_and_throughput_at_slo.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    knobs = knob_rows(lat, lad, baseline="12b", configs=[])
    assert knobs
    more = write_plots(lat, [], [], [], tmp_path / "k", ttft_configs=["12b"], cudagraph_max_tokens={"12b": 256},
                       knobs={"knobs_vs_baseline": knobs, "empty_table": []})
    assert [p.name for p in more] == ["ttft_vs_prompt_tokens.png", "knobs_vs_baseline.png"]
    assert all(p.stat().st_size > 1000 for p in more)


def test_arm_vs_oracle_splits_by_answer_presence() -> None:
    prompts = [{"id": "a", "arm": "top1", "prompt": "P", "answer_in_prompt": True},
               {"id": "a", "arm": "oracle", "prompt": "P", "answer_in_prompt": True},
               {"id": "b", "arm": "top1", "prompt": "X", "answer_in_prompt": False},
               {"id": "b", "arm": "oracle", "prompt": "G", "answer_in_prompt": True},
               {"id": "c", "arm": "top1", "prompt": "Q", "answer_in_prompt": True}]  # no oracle: left out
    preds = [{"id": "a", "arm": "top1", "score": 1.0}, {"id": "a", "arm": "oracle", "score": 1.0},
             {"id": "b", "arm": "top1", "score": 0.0}, {"id": "b", "arm": "oracle", "score": 1.0},
             {"id": "c", "arm": "top1", "score": 1.0}]
    out = arm_vs_oracle(preds, prompts, "top1")
    assert (out["questions"], out["prompt_identical_to_oracle"]) == (2, 1)
    assert out["answer_in_prompt"] == {"questions": 1, "top1_accuracy": 1.0, "oracle_accuracy": 1.0}
    assert out["answer_not_in_prompt"] == {"questions": 1, "top1_accuracy": 0.0, "oracle_accuracy": 1.0}


def test_knob_rows_compare_each_knob_with_the_baseline_of_the_same_run() -> None:
    lat = [{"config": c, "arm": a, "p50_ttft_ms": p50, "p99_ttft_ms": p99}
           for c, a, p50, p99 in [("base", "untrimmed", 100.0, 120.0), ("base", "trimmed_4x", 30.0, 60.0),
                                  ("fp8", "untrimmed", 50.0, 60.0), ("fp8", "trimmed_4x", 30.0, 30.0)]]
    lad = [{"config": c, "arm": a, "request_rate": rate, "p50_ttft_ms": 1.0, "p99_ttft_ms": p99,
            "request_throughput": thr}
           for c, a, rate, p99, thr in [("base", "untrimmed", 6, 100.0, 6.0), ("base", "untrimmed", 12, 800.0, 10.0),
                                        ("base", "trimmed_4x", 12, 100.0, 12.0), ("fp8", "untrimmed", 12, 400.0, 12.0)]]
    rows = knob_rows(lat, lad, baseline="base", configs=["fp8", "missing"])
    assert [(r["config"], r["arm"]) for r in rows] == [("base", "untrimmed"), ("base", "trimmed_4x"),
                                                        ("fp8", "untrimmed"), ("fp8", "trimmed_4x")]
    fp8 = rows[2]
    assert fp8["p50_ttft_vs_baseline"] == 0.5 and fp8["p99_ttft_vs_baseline"] == 0.5
    assert fp8["load_request_rate"] == 12  # the highest measured rate, compared with the baseline's at that step
    assert fp8["load_p99_ttft_vs_baseline"] == 0.5 and fp8["load_throughput_vs_baseline"] == 1.2
    assert rows[3]["load_request_throughput"] is None and rows[3]["load_throughput_vs_baseline"] is None
    assert rows[0]["p50_ttft_vs_baseline"] == 1.0
