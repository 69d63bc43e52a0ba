"""Summarize committed GPU results: tables, the planner-vs-vLLM comparison, and plots.

Run: .venv/bin/python benchmarks/gpu/report.py  (reads benchmarks/results/gpu/gpu_suite_*.json: run 2's files
(gpu_suite_a/b/c/c0), run 3's and run 4's (gpu_suite_<suite>_<tag>, written by benchmarks/gpu/session.sh; RUN4_TAGS
tells them apart); from the first run in run1/ only the KV-capacity rows of configurations the later runs did not
start; writes benchmarks/results/gpu/summary.json and PNGs next to it)

The trimmed arm the golden-set headline reports beside trimmed_4x is chosen by a rule fixed before the run
(``select_candidate``): the ``cand_*`` arm with the best accuracy on the dev questions (disjoint from the golden set)
among those with >= 4x fewer prompt tokens, on 270m_bf16kv_len4096.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

from ragtrim._util.table import format_table
from ragtrim_bench.gpu.report import (
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
from ragtrim_bench.gpu.worker import load_prompts

RESULTS = REPO / "benchmarks" / "results" / "gpu"
PROMPTS = REPO / ".gpu" / "prompts" / "nq20_middle.jsonl"
QLM_PROMPTS = REPO / ".gpu" / "prompts" / "nq20_middle_qlm.jsonl"
RANDOM_PROMPTS = REPO / ".gpu" / "prompts" / "nq20_middle_random.jsonl"
QLM_CONFIG = "270m_bf16kv_qlm"  # run 3: plain and reader-reranked top-1 on the same engine as 270m_bf16kv_len4096
RANDOM_CONFIG = "270m_bf16kv_random"  # run 4: the first-probe setting (random distractors), same questions
# run 4's driver tags (session.sh `graphs`, `load` and `tp2g`, each on a fresh machine); other tagged files are run 3's
RUN4_TAGS = {"_g0g", "_g1g", "_g1r", "_g0l", "_g1h", "_tp2g"}
# run 4's second call repeated 12b_graphs_1024 on the other GPU: its rows get their own name
RENAMED = {("_g1h", "12b_graphs_1024"): "12b_graphs_1024_repeat"}
# one serving knob at a time, each table against the BF16 baseline started by the same command (same session)
KNOB_TABLES = {  # plot file stem: (run, baseline, driver tags of that command)
    "knobs_vs_baseline": (3, "12b_baseline", {"_g0", "_g1"}),
    "cuda_graphs_vs_baseline": (4, "12b_baseline_n100", {"_g0g", "_g1g"}),
}
LOGS = RESULTS / "logs"
# (log archive, configuration): engines whose largest CUDA-graph size the TTFT plot marks, read from their logs
GRAPH_LOGS = [(LOGS / "run3" / "gpu_suite_c_g0_logs.tar.gz", "12b_baseline"),
              (LOGS / "run4" / "gpu_suite_c_g0g_logs.tar.gz", "12b_baseline_n100"),
              (LOGS / "run4" / "gpu_suite_c_g0g_logs.tar.gz", "12b_graphs_1024")]
# the TTFT plot: run 4's same-command pair with length sweeps (the default engine and 1,024-token graphs)
TTFT_12B_CONFIGS = ("12b_baseline_n100", "12b_graphs_1024")


def run_of(suite: dict[str, Any]) -> int:
    tag = suite.get("tag") or ""
    return 4 if tag in RUN4_TAGS else 3 if tag else 2


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
    for suite in suites:
        for run in suite["runs"]:
            run["name"] = RENAMED.get((suite.get("tag") or "", run["name"]), run["name"])
    run1 = [json.loads(p.read_text()) for p in sorted((RESULTS / "run1").glob("gpu_suite_*.json"))]
    acc, lat, lad, slo = accuracy_rows(suites), latency_rows(suites), ladder_rows(suites), slo_rows(suites)
    # KV capacity: each configuration once, from the latest run that started it
    cap: list[dict[str, Any]] = []
    for run_no, run_suites in [(n, [x for x in suites if run_of(x) == n]) for n in (4, 3, 2)] + [(1, run1)]:
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
    for config in dict.fromkeys(c for c, _ in golden if c not in (base, RANDOM_CONFIG)):  # same prompts as base
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
    # run 4: the first-probe setting, random distractors; the arm chosen by the same dev rule
    random_chosen = select_candidate(acc, config=RANDOM_CONFIG, min_ratio=4.0)
    if random_chosen:
        headline[f"{RANDOM_CONFIG}_selected_arm_by_dev_accuracy"] = random_chosen
        for arm in ("untrimmed", "trimmed_4x", random_chosen, "oracle"):
            if (RANDOM_CONFIG, arm) in golden:
                headline[f"{RANDOM_CONFIG}_golden_accuracy_{arm}"] = golden[(RANDOM_CONFIG, arm)]["accuracy"]
                headline[f"{RANDOM_CONFIG}_golden_prompt_token_ratio_{arm}"] = golden[(RANDOM_CONFIG, arm)][
                    "prompt_token_ratio"]
    headline = {k: v for k, v in headline.items() if v is not None}
    # where the selected arm loses to the oracle, per question; needs the prompts (make_prompts.py), not committed
    vs_oracle: dict[str, Any] = {}
    prompt_rows: dict[Path, list[dict[str, Any]]] = {}
    for name, task in suite_tasks(suites, "accuracy"):
        if task.get("set") != "golden" or not name.startswith("270m"):
            continue
        path, arms = {QLM_CONFIG: (QLM_PROMPTS, ["cand_top1", "cand_top1_qlm"]),
                      RANDOM_CONFIG: (RANDOM_PROMPTS, [random_chosen])}.get(name, (PROMPTS, [chosen]))
        if not path.is_file() or not all(arms):
            continue
        if path not in prompt_rows:
            prompt_rows[path] = load_prompts(str(path))
        present = {r["arm"] for r in prompt_rows[path]}
        for arm in arms:
            if arm in present:
                vs_oracle[f"{name}/{arm}"] = arm_vs_oracle(task["predictions"], prompt_rows[path], str(arm))
    knobs: dict[str, list[dict[str, Any]]] = {}
    for stem, (run_no, baseline, tags) in KNOB_TABLES.items():
        # rows of that command's files only: names such as 12b_eager recur across runs
        same = [x for x in suites if run_of(x) == run_no and x.get("tag") in tags]
        configs = [r["name"] for suite in same for r in suite["runs"] if r["name"].startswith("12b_")]
        if baseline in configs:
            knobs[stem] = knob_rows(latency_rows(same), ladder_rows(same), baseline=baseline, configs=configs)
    summary = {"headline": headline, "accuracy": acc, "single_request": lat, "load_ladder": lad,
               "throughput_at_slo": slo, "capacity_vs_planner": cap, "knobs_vs_baseline": knobs,
               "selected_arm_vs_oracle": vs_oracle}
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    # the TTFT plot: run 4's same-command pair with length sweeps, and other model shapes (knobs have their own plots)
    ttft_configs = [c for c in dict.fromkeys(r["config"] for r in lat)
                    if not c.startswith(("12b_", "270m")) or c in TTFT_12B_CONFIGS]
    graph_limits = {config: n for archive, config in GRAPH_LOGS if (n := cudagraph_max_tokens(archive, config))}
    plots = write_plots(lat, acc, lad, slo, RESULTS, accuracy_target=0.40,  # issue 6's target
                        ttft_configs=ttft_configs, knobs=knobs, cudagraph_max_tokens=graph_limits)
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
    for stem, table in knobs.items():
        run_no, baseline, _ = KNOB_TABLES[stem]
        print(f"\n{stem}: serving knobs vs {baseline} (run {run_no}, same command; ratios > 1: slower / more "
              "throughput)\n" + format_table(table, [(k, k) for k in (
                  "config", "arm", "p50_ttft_ms", "p99_ttft_ms", "p50_ttft_vs_baseline", "p99_ttft_vs_baseline",
                  "load_request_rate", "load_p99_ttft_ms", "load_p99_ttft_vs_baseline", "load_request_throughput",
                  "load_throughput_vs_baseline")]))
    print("\nlargest CUDA-graph size from the engine logs: " + json.dumps(graph_limits))
    print("\nheadline\n" + json.dumps(headline, indent=1))
    print("\nselected arm vs oracle, golden set (prompts from " + str(PROMPTS.relative_to(REPO)) + " and "
          + ", ".join(p.name for p in (QLM_PROMPTS, RANDOM_PROMPTS)) + ")\n"
          + (json.dumps(vs_oracle, indent=1) if vs_oracle else "prompts not found: run make_prompts.py first"))
    print("\nplots: " + ", ".join(str(p.relative_to(REPO)) for p in plots))


if __name__ == "__main__":
    main()
