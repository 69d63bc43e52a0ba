"""Summarize committed GPU results: tables, the planner-vs-vLLM comparison, and plots.

Run: .venv/bin/python benchmarks/gpu/report.py  (reads benchmarks/results/gpu/gpu_suite_*.json: run 2's files
(gpu_suite_a/b/c/c0) and run 3's (gpu_suite_<suite>_<tag>, written by benchmarks/gpu/session.sh); from the first run
in run1/ only the KV-capacity rows of configurations the later runs did not start; writes
benchmarks/results/gpu/summary.json and PNGs next to it)

The trimmed arm the golden-set headline reports beside trimmed_4x is chosen by a rule fixed before the run
(``select_candidate``): the ``cand_*`` arm with the best accuracy on the dev questions (disjoint from the golden set)
among those with >= 4x fewer prompt tokens, on 270m_bf16kv_len4096.
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ragtrim.bench.gpu.report import (  # noqa: E402
    accuracy_rows,
    arm_vs_oracle,
    capacity_rows,
    knob_rows,
    ladder_rows,
    latency_rows,
    ratio,
    select_candidate,
    slo_rows,
    suite_tasks,
    write_plots,
)
from ragtrim.bench.gpu.worker import load_prompts  # noqa: E402
from ragtrim.bench.table import format_table  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "gpu"
PROMPTS = REPO / ".gpu" / "prompts" / "nq20_middle.jsonl"
QLM_PROMPTS = REPO / ".gpu" / "prompts" / "nq20_middle_qlm.jsonl"
KNOB_BASELINE = "12b_baseline"  # run 3: the BF16 12B engine again, beside the knobs (benchmarks/gpu/session.sh)
BASELINE_LOGS = RESULTS / "logs" / "run3" / "gpu_suite_c_g0_logs.tar.gz"  # the engine log of KNOB_BASELINE
QLM_CONFIG = "270m_bf16kv_qlm"  # run 3: plain and reader-reranked top-1 on the same engine as 270m_bf16kv_len4096


def cudagraph_max_tokens(archive: Path, config: str) -> int | None:
    """The largest batch vLLM captured a CUDA graph for, from ``config``'s engine log in a committed log archive."""
    if not archive.is_file():
        return None
    with tarfile.open(archive) as tar:
        try:
            log = tar.extractfile(f"{config}.log")
        except KeyError:
            return None
        match = re.search(r"max_cudagraph_capture_size': (\d+)", log.read().decode("utf-8", "replace")) if log else None
    return int(match.group(1)) if match else None


def main() -> None:
    suites = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("gpu_suite_*.json"))]
    run1 = [json.loads(p.read_text()) for p in sorted((RESULTS / "run1").glob("gpu_suite_*.json"))]
    acc, lat, lad, slo = accuracy_rows(suites), latency_rows(suites), ladder_rows(suites), slo_rows(suites)
    # KV capacity: each configuration once, from the latest run that started it (run 3's files carry a driver tag)
    cap: list[dict[str, Any]] = []
    for run_no, run_suites in ((3, [x for x in suites if x.get("tag")]), (2, [x for x in suites if not x.get("tag")]),
                               (1, run1)):
        for row in capacity_rows(run_suites, REPO / "tests" / "fixtures" / "configs"):
            if row["config"] not in {r["config"] for r in cap}:
                cap.append(row | {"run": run_no})
    headline: dict[str, object] = {}
    base = "270m_bf16kv_len4096"
    chosen = select_candidate(acc, config=base, min_ratio=4.0)
    headline["selected_arm_by_dev_accuracy"] = chosen
    golden = {(r["config"], r["arm"]): r for r in acc if r["set"] == "golden"}
    for arm in ("untrimmed", "trimmed_4x", "trimmed_8x", chosen, "oracle"):
        if (base, arm) in golden:
            headline[f"golden_accuracy_{arm}"] = golden[(base, arm)]["accuracy"]
            headline[f"golden_prompt_token_ratio_{arm}"] = golden[(base, arm)]["prompt_token_ratio"]
    for config in dict.fromkeys(c for c, _ in golden if c != base):
        for arm in ("untrimmed", "trimmed_4x", chosen, "oracle"):
            if (config, arm) in golden and (base, arm) in golden:
                headline[f"{config}_accuracy_delta_vs_bf16_{arm}"] = (golden[(config, arm)]["accuracy"]
                                                                      - golden[(base, arm)]["accuracy"])
    for config in dict.fromkeys(r["config"] for r in lat if not r["config"].startswith("270m")):
        for arm in ("trimmed_4x", "trimmed_8x", chosen):
            if arm:
                headline[f"{config}_p50_ttft_speedup_{arm}"] = ratio(lat, "p50_ttft_ms", "untrimmed", arm, config)
                headline[f"{config}_p99_ttft_speedup_{arm}"] = ratio(lat, "p99_ttft_ms", "untrimmed", arm, config)
    for config in dict.fromkeys(r["config"] for r in slo):
        headline[f"{config}_throughput_at_slo_gain_trimmed_4x"] = ratio(slo, "request_throughput", "trimmed_4x",
                                                                       "untrimmed", config)
    for config in dict.fromkeys(r["config"] for r in slo):
        # under load: the first rate at which the untrimmed arm misses the SLO (near saturation), both arms measured
        steps = {(r["arm"], r["request_rate"]): r for r in lad if r["config"] == config}
        slo_ms = next(r["slo_ms"] for r in slo if r["config"] == config)
        over = sorted(rate for (arm, rate), r in steps.items() if arm == "untrimmed" and r["p95_ttft_ms"] > slo_ms)
        rate = next((x for x in over if ("trimmed_4x", x) in steps), None)
        if rate is not None:
            u, t = steps[("untrimmed", rate)], steps[("trimmed_4x", rate)]
            headline[f"{config}_saturation_rate_req_s"] = rate
            headline[f"{config}_saturation_p50_ttft_speedup_trimmed_4x"] = u["p50_ttft_ms"] / t["p50_ttft_ms"]
            headline[f"{config}_saturation_p99_ttft_speedup_trimmed_4x"] = u["p99_ttft_ms"] / t["p99_ttft_ms"]
    # run 3: the reader-reranked top-1 arm beside plain top-1 (same engine settings, its own prompts file)
    qlm_chosen = select_candidate(acc, config=QLM_CONFIG, min_ratio=4.0)
    if qlm_chosen:
        headline[f"{QLM_CONFIG}_selected_arm_by_dev_accuracy"] = qlm_chosen
        for r in acc:
            if r["config"] == QLM_CONFIG and r["set"] in ("golden", "dev"):
                headline[f"{QLM_CONFIG}_{r['set']}_accuracy_{r['arm']}"] = r["accuracy"]
                if r["set"] == "golden":
                    headline[f"{QLM_CONFIG}_golden_prompt_token_ratio_{r['arm']}"] = r["prompt_token_ratio"]
    headline = {k: v for k, v in headline.items() if v is not None}
    # where the selected arm loses to the oracle, per question; needs the prompts (make_prompts.py), not committed
    vs_oracle: dict[str, Any] = {}
    prompt_rows: dict[Path, list[dict[str, Any]]] = {}
    for name, task in suite_tasks(suites, "accuracy"):
        if task.get("set") != "golden" or not name.startswith("270m"):
            continue
        path, arms = (QLM_PROMPTS, ["cand_top1", "cand_top1_qlm"]) if name == QLM_CONFIG else (PROMPTS, [chosen])
        if not path.is_file() or not all(arms):
            continue
        if path not in prompt_rows:
            prompt_rows[path] = load_prompts(str(path))
        present = {r["arm"] for r in prompt_rows[path]}
        for arm in arms:
            if arm in present:
                vs_oracle[f"{name}/{arm}"] = arm_vs_oracle(task["predictions"], prompt_rows[path], str(arm))
    knob_configs = [r["name"] for suite in suites if suite.get("tag") for r in suite.get("runs", [])
                    if r["name"].startswith("12b_")]
    knobs = knob_rows(lat, lad, baseline=KNOB_BASELINE, configs=knob_configs) if KNOB_BASELINE in knob_configs else []
    summary = {"headline": headline, "accuracy": acc, "single_request": lat, "load_ladder": lad,
               "throughput_at_slo": slo, "capacity_vs_planner": cap, "knobs_vs_baseline": knobs,
               "selected_arm_vs_oracle": vs_oracle}
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    # the TTFT plot: configurations with a length sweep, and other model shapes (the knobs have their own plot)
    ttft_configs = [c for c in dict.fromkeys(r["config"] for r in lat)
                    if not c.startswith("12b_") or any(r["config"] == c and str(r["arm"]).startswith("len_")
                                                        for r in lat)]
    plots = write_plots(lat, acc, lad, slo, RESULTS, accuracy_target=0.40,  # issue 6's target
                        ttft_configs=ttft_configs, knobs=knobs,
                        cudagraph_max_tokens=cudagraph_max_tokens(BASELINE_LOGS, KNOB_BASELINE))
    print("accuracy\n" + format_table(acc, [(k, k) for k in ("config", "set", "arm", "questions", "accuracy",
                                                                 "refusal_accuracy", "mean_prompt_tokens",
                                                                 "prompt_token_ratio", "answer_in_prompt_rate")]))
    print("\nsingle request\n" + format_table(lat, [(k, k) for k in ("config", "arm", "mean_prompt_tokens",
                                                                      "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms")]))
    print("\nload ladder\n" + format_table(lad, [(k, k) for k in ("config", "arm", "request_rate",
                                                                  "request_throughput", "p50_ttft_ms", "p95_ttft_ms",
                                                                  "p99_ttft_ms", "max_kv_cache_usage",
                                                                  "prefix_cache_hit_rate")]))
    print("\nthroughput at SLO\n" + format_table(slo, [(k, k) for k in ("config", "arm", "slo_ms", "request_rate",
                                                                        "request_throughput")]))
    print("\nKV capacity: vLLM vs planner\n" + format_table(cap, [(k, k) for k in (
        "run", "config", "available_kv_cache_gib", "vllm_kv_cache_tokens", "planner_kv_cache_tokens", "kv_tokens_error_pct",
        "vllm_max_concurrency", "planner_max_concurrency", "concurrency_error_pct")]))
    print(f"\nserving knobs vs {KNOB_BASELINE} (run 3, same session; ratios > 1: slower / more throughput)\n"
          + format_table(knobs, [(k, k) for k in (
              "config", "arm", "p50_ttft_ms", "p99_ttft_ms", "p50_ttft_vs_baseline", "p99_ttft_vs_baseline",
              "load_request_rate", "load_p99_ttft_ms", "load_p99_ttft_vs_baseline", "load_request_throughput",
              "load_throughput_vs_baseline")]))
    print("\nheadline\n" + json.dumps(headline, indent=1))
    print("\nselected arm vs oracle, golden set (prompts from " + str(PROMPTS.relative_to(REPO)) + " and "
          + str(QLM_PROMPTS.name) + ")\n"
          + (json.dumps(vs_oracle, indent=1) if vs_oracle else "prompts not found: run make_prompts.py first"))
    print("\nplots: " + ", ".join(str(p.relative_to(REPO)) for p in plots))


if __name__ == "__main__":
    main()
