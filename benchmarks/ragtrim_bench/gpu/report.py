"""The GPU report: turn the GPU suites' JSON (results/gpu/gpu_suite_*.json) into flat summaries, the planner
comparison, and plots (matplotlib, Agg); ``main`` writes results/gpu/summary.json and the PNGs, and prints the tables.

Run: ragtrim-bench gpu report  (from the repository root: the planner configs are read from tests/fixtures/configs
and the prompts, for the arm-vs-oracle split, from .gpu/prompts). It reads run 2's files (gpu_suite_a/b/c/c0), run
3's and run 4's (gpu_suite_<suite>_<tag>, written by gpu/run.sh; RUN4_TAGS tells them apart); from the first run
in run1/ only the KV-capacity rows of configurations the later runs did not start.

The trimmed arm the golden-set headline reports beside trimmed_4x is chosen by a rule fixed before the run
(``select_candidate``): the ``cand_*`` arm with the best accuracy on the dev questions (disjoint from the golden set)
among those with >= 4x fewer prompt tokens, on 270m_bf16kv_len4096.

Pure functions build the rows; ``write_plots`` draws them; ``main`` is the only part that reads files or prints.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrim._util.table import format_table
from ragtrim_bench.common.results import command_line, results_root, shown_path, write_result
from ragtrim_bench.gpu.engine_logs import cudagraph_max_tokens
from ragtrim_bench.gpu.worker import load_prompts


def suite_tasks(suites: Iterable[Mapping[str, Any]], type_: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(run name, task) for every task of ``type_`` in every run of every suite."""
    for suite in suites:
        for run in suite.get("runs", []):
            for task in run.get("tasks", []):
                if task.get("type") == type_:
                    yield run["name"], task


def accuracy_rows(suites: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (engine configuration, arm) of every accuracy task."""
    rows = []
    for name, task in suite_tasks(suites, "accuracy"):
        base = task["arms"].get("untrimmed", {}).get("mean_prompt_tokens")
        for arm, a in task["arms"].items():
            rows.append({
                "config": name, "set": task.get("set", "golden"), "arm": arm,
                "questions": a["questions"], "accuracy": a["accuracy"],
                "refusal_accuracy": a.get("refusal_accuracy"), "mean_prompt_tokens": a["mean_prompt_tokens"],
                "prompt_token_ratio": (base / a["mean_prompt_tokens"]) if base else None,
                "answer_in_prompt_rate": a["answer_in_prompt_rate"],
            })
    return rows


def select_candidate(rows: Sequence[Mapping[str, Any]], *, config: str, min_ratio: float = 4.0,
                     prefix: str = "cand_") -> str | None:
    """The rule fixed before the run: among ``prefix`` arms of ``config`` on the dev set whose prompts are at least
    ``min_ratio`` times smaller than untrimmed, the one with the best dev accuracy (ties: the smaller prompt).
    The golden set then reports that arm; its golden numbers play no part in the choice."""
    dev = [r for r in rows if r["config"] == config and r.get("set") == "dev" and str(r["arm"]).startswith(prefix)
           and r["accuracy"] is not None and (r["prompt_token_ratio"] or 0) >= min_ratio]
    if not dev:
        return None
    return str(max(dev, key=lambda r: (r["accuracy"], r["prompt_token_ratio"]))["arm"])


def arm_vs_oracle(predictions: Sequence[Mapping[str, Any]], prompt_rows: Sequence[Mapping[str, Any]], arm: str,
                  oracle: str = "oracle") -> dict[str, Any]:
    """Where does ``arm`` lose to ``oracle``? Splits the questions by whether the arm's prompt holds an answer
    (``answer_in_prompt`` of the prompt rows) and gives both arms' accuracy on each part, plus how many of the arm's
    prompts are identical to the oracle's. ``predictions`` are an accuracy task's items (id, arm, score)."""
    score = {(p["id"], p["arm"]): float(p["score"]) for p in predictions}
    rows = {(r["id"], r["arm"]): r for r in prompt_rows}
    ids = [i for (i, a) in rows if a == arm and (i, arm) in score and (i, oracle) in score and (i, oracle) in rows]

    def part(sel: list[str]) -> dict[str, Any]:
        n = len(sel)
        return {"questions": n,
                f"{arm}_accuracy": sum(score[(i, arm)] for i in sel) / n if n else None,
                f"{oracle}_accuracy": sum(score[(i, oracle)] for i in sel) / n if n else None}

    held = [i for i in ids if rows[(i, arm)]["answer_in_prompt"]]
    missed = [i for i in ids if not rows[(i, arm)]["answer_in_prompt"]]
    return {"arm": arm, "questions": len(ids),
            "prompt_identical_to_oracle": sum(rows[(i, arm)]["prompt"] == rows[(i, oracle)]["prompt"] for i in ids),
            "answer_in_prompt": part(held), "answer_not_in_prompt": part(missed)}


def latency_rows(suites: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Single-request rows (one per configuration and arm)."""
    return [{"config": name, "arm": arm, "mean_prompt_tokens": s["mean_prompt_tokens"],
             "p50_ttft_ms": s["p50_ttft_ms"], "p99_ttft_ms": s["p99_ttft_ms"],
             "p50_tpot_ms": s["p50_tpot_ms"], "p50_e2el_ms": s["p50_e2el_ms"]}
            for name, task in suite_tasks(suites, "single") for arm, s in task["arms"].items()]


def ladder_rows(suites: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"config": name, "arm": arm, "request_rate": step["request_rate"],
             "request_throughput": step["request_throughput"],
             "p50_ttft_ms": step["p50_ttft_ms"], "p95_ttft_ms": step["p95_ttft_ms"],
             "p99_ttft_ms": step["p99_ttft_ms"], "goodput": step.get("goodput"),
             "max_kv_cache_usage": step.get("max_kv_cache_usage"),
             "prefix_cache_hit_rate": step.get("prefix_cache_hit_rate"),
             "mean_prompt_tokens": step["mean_prompt_tokens"]}
            for name, task in suite_tasks(suites, "ladder") for arm, data in task["arms"].items()
            for step in data["steps"] if "completed" in step]


def slo_rows(suites: Iterable[Mapping[str, Any]], *, min_steps: int = 2) -> list[dict[str, Any]]:
    """Throughput at the TTFT SLO per (configuration, arm), for ladders of at least ``min_steps`` measured rates."""
    # a single-rate probe is not a ladder: its "throughput at SLO" says nothing about capacity
    return [{"config": name, "arm": arm, **data["at_slo"]}
            for name, task in suite_tasks(suites, "ladder") for arm, data in task["arms"].items()
            if sum("completed" in step for step in data["steps"]) >= min_steps]


def ratio(rows: Sequence[Mapping[str, Any]], key: str, arm_a: str, arm_b: str, config: str,
          set_: str | None = None) -> float | None:
    """``rows[arm_a][key] / rows[arm_b][key]`` within one configuration (and set, when rows have one; None when
    either is missing or zero)."""
    def pick(arm: str) -> Any:
        return next((r[key] for r in rows if r["config"] == config and r["arm"] == arm
                     and (set_ is None or r.get("set") == set_)), None)

    a, b = pick(arm_a), pick(arm_b)
    if not a or not b:
        return None
    return float(a) / float(b)


def knob_rows(latency: Sequence[Mapping[str, Any]], ladder: Sequence[Mapping[str, Any]], *, baseline: str,
              configs: Sequence[str], arms: Sequence[str] = ("untrimmed", "trimmed_4x")) -> list[dict[str, Any]]:
    """One serving knob at a time against ``baseline`` measured in the same run: per configuration and arm, the
    single-request p50/p99 TTFT and the highest Poisson step's p50/p99 TTFT and throughput, each also as a ratio to the
    baseline's (at the same request rate) (> 1: the knob is slower; for throughput > 1: the knob serves more). Missing measurements are None."""
    def single(config: str, arm: str) -> Mapping[str, Any]:
        return next((r for r in latency if r["config"] == config and r["arm"] == arm), {})

    def step(config: str, arm: str, rate: Any = None) -> Mapping[str, Any]:
        steps = [r for r in ladder if r["config"] == config and r["arm"] == arm
                 and (rate is None or r["request_rate"] == rate)]
        return max(steps, key=lambda r: r["request_rate"]) if steps else {}

    def over(a: Any, b: Any) -> float | None:
        return float(a) / float(b) if a and b else None

    out: list[dict[str, Any]] = []
    for config in [baseline, *[c for c in configs if c != baseline]]:
        for arm in arms:
            s, b, ld = single(config, arm), single(baseline, arm), step(config, arm)
            bl = step(baseline, arm, ld.get("request_rate")) if ld else {}
            if not s and not ld:
                continue
            out.append({
                "config": config, "arm": arm,
                "p50_ttft_ms": s.get("p50_ttft_ms"), "p99_ttft_ms": s.get("p99_ttft_ms"),
                "p50_ttft_vs_baseline": over(s.get("p50_ttft_ms"), b.get("p50_ttft_ms")),
                "p99_ttft_vs_baseline": over(s.get("p99_ttft_ms"), b.get("p99_ttft_ms")),
                "load_request_rate": ld.get("request_rate"),
                "load_p50_ttft_ms": ld.get("p50_ttft_ms"), "load_p99_ttft_ms": ld.get("p99_ttft_ms"),
                "load_p99_ttft_vs_baseline": over(ld.get("p99_ttft_ms"), bl.get("p99_ttft_ms")),
                "load_request_throughput": ld.get("request_throughput"),
                "load_throughput_vs_baseline": over(ld.get("request_throughput"), bl.get("request_throughput")),
            })
    return out


def capacity_rows(suites: Iterable[Mapping[str, Any]], config_dir: Path) -> list[dict[str, Any]]:
    """vLLM's reported KV capacity and max concurrency next to the planner's, from the same available KV memory."""
    from ragtrim.plan.estimate import planner_from_available_kv_memory
    from ragtrim.plan.model import ModelSpec

    rows = []
    for suite in suites:
        configs = (suite.get("prepare") or {}).get("model_configs") or {}
        for run in suite.get("runs", []):
            kv = run.get("vllm_kv_log") or {}
            eng = run.get("engine") or _engine_from_name(run["name"])
            if "kv_cache_tokens" not in kv or "available_kv_cache_gib" not in kv or not eng.get("max_model_len"):
                continue
            if int(eng.get("tensor_parallel_size", 1)) > 1:
                continue  # the planner does not model tensor parallelism
            size = run["name"].split("_", 1)[0]
            if size in configs:  # the exact config vLLM was started with
                model = ModelSpec.from_config_dict(configs[size])
            else:
                cfg_name = "gemma-3-270m.json" if size == "270m" else f"gemma-3-{size}-text.json"
                model = ModelSpec.from_config_file(config_dir / cfg_name)
            kv_dtype = "fp8" if eng.get("kv_cache_dtype") == "fp8" else "bf16"
            est = planner_from_available_kv_memory(
                float(kv["available_kv_cache_gib"]), model, kv_dtype=kv_dtype,  # type: ignore[arg-type]
                max_model_len=int(eng["max_model_len"]),
                max_num_batched_tokens=int(eng.get("max_num_batched_tokens", 8192)),
            )
            rows.append({
                "config": run["name"], "kv_cache_dtype": kv_dtype, "max_model_len": eng["max_model_len"],
                "available_kv_cache_gib": kv["available_kv_cache_gib"],
                "vllm_kv_cache_tokens": kv["kv_cache_tokens"], "planner_kv_cache_tokens": est.vllm_kv_cache_tokens,
                "kv_tokens_error_pct": 100 * (est.vllm_kv_cache_tokens - kv["kv_cache_tokens"]) / kv["kv_cache_tokens"],
                "vllm_max_concurrency": kv.get("max_concurrency"), "planner_max_concurrency": est.vllm_max_concurrency,
                "concurrency_error_pct": (100 * (est.vllm_max_concurrency - kv["max_concurrency"]) / kv["max_concurrency"]
                                          if kv.get("max_concurrency") else None),
            })
    return rows


def _engine_from_name(name: str) -> dict[str, Any]:
    """Fallback for runs whose worker wrote no result: names read ``<size>_<kv>kv_len<N>[_...]``."""
    parts = name.split("_")
    kv = next((p[: -len("kv")] for p in parts if p.endswith("kv")), "bf16")
    length = next((int(p[3:]) for p in parts if p.startswith("len") and p[3:].isdigit()), 0)
    tp = next((int(p[2:]) for p in parts if p.startswith("tp") and p[2:].isdigit()), 1)
    return {"kv_cache_dtype": "fp8" if kv == "fp8" else "auto", "max_model_len": length, "tensor_parallel_size": tp}


def write_plots(latency: Sequence[Mapping[str, Any]], accuracy: Sequence[Mapping[str, Any]],
                ladder: Sequence[Mapping[str, Any]], slo: Sequence[Mapping[str, Any]], out_dir: Path,
                *, accuracy_target: float | None = None, ttft_configs: Sequence[str] | None = None,
                cudagraph_max_tokens: Mapping[str, int] | None = None,
                knobs: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> list[Path]:
    """The report's PNGs. ``ttft_configs`` limits the TTFT-vs-prompt-tokens plot (default: every configuration);
    ``cudagraph_max_tokens`` (configuration -> tokens) marks the largest prompt each engine runs in a captured CUDA
    graph, in that configuration's colour; ``knobs`` (file stem -> ``knob_rows``) adds one plot per table of each
    serving knob's TTFT against that table's baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    graph_limits = dict(cudagraph_max_tokens or {})
    if latency:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for config in dict.fromkeys(r["config"] for r in latency
                                    if ttft_configs is None or r["config"] in ttft_configs):
            rows_c = [r for r in latency if r["config"] == config]
            sweep = sorted((r for r in rows_c if str(r["arm"]).startswith("len_")), key=lambda r: r["mean_prompt_tokens"])
            sel = sorted((r for r in rows_c if not str(r["arm"]).startswith("len_")),
                         key=lambda r: r["mean_prompt_tokens"])
            x = [r["mean_prompt_tokens"] for r in sel]
            line = ax.plot(x, [r["p50_ttft_ms"] for r in sel], "o", label=f"{config} arms p50")[0]
            ax.plot(x, [r["p99_ttft_ms"] for r in sel], "s", mfc="none", color=line.get_color(),
                    label=f"{config} arms p99")
            if sweep:
                ax.plot([r["mean_prompt_tokens"] for r in sweep], [r["p50_ttft_ms"] for r in sweep], "-",
                        color=line.get_color(), lw=1, label=f"{config} length sweep p50")
            for r in sel:
                ax.annotate(r["arm"], (r["mean_prompt_tokens"], r["p50_ttft_ms"]), fontsize=6)
            if config in graph_limits:
                ax.axvline(graph_limits[config], color=line.get_color(), ls=":", lw=1,
                           label=f"{config} largest CUDA graph ({graph_limits[config]} tokens)")
        ax.set(xlabel="mean prompt tokens", ylabel="TTFT (ms), single request", title="TTFT vs prompt tokens per arm")
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(out_dir / "ttft_vs_prompt_tokens.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    if accuracy:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for config in dict.fromkeys(r["config"] for r in accuracy if r.get("set", "golden") == "golden"):
            sel = [r for r in accuracy if r["config"] == config and r["accuracy"] is not None
                   and r.get("set", "golden") == "golden"]
            ax.scatter([r["prompt_token_ratio"] for r in sel], [r["accuracy"] for r in sel], label=config)
            for r in sel:
                ax.annotate(r["arm"], (r["prompt_token_ratio"], r["accuracy"]), fontsize=7)
        if accuracy_target is not None:
            ax.axhline(accuracy_target, color="grey", ls=":", lw=1, label=f"target {accuracy_target:g}")
        ax.set(xscale="log", xlabel="prompt-token compression ratio (untrimmed / arm)", ylabel="accuracy",
               title="Reader accuracy vs compression (NQ-20 golden set)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(out_dir / "accuracy_vs_compression.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    if ladder:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 5.5))
        for key in dict.fromkeys((r["config"], r["arm"]) for r in ladder):
            sel = sorted((r for r in ladder if (r["config"], r["arm"]) == key), key=lambda r: r["request_rate"])
            if len(sel) < 2:  # single-step probes are in the tables, not the curves
                continue
            name = f"{key[0]} {key[1]}"
            line = ax1.plot([r["request_rate"] for r in sel], [r["p95_ttft_ms"] for r in sel], "o-",
                            label=f"{name} p95")[0]
            ax1.plot([r["request_rate"] for r in sel], [r["p50_ttft_ms"] for r in sel], "x:", color=line.get_color(),
                     label=f"{name} p50")
        if slo:
            ax1.axhline(slo[0]["slo_ms"], color="grey", ls="--", lw=1, label="SLO")
        ax1.set(xscale="log", yscale="log", xlabel="Poisson request rate (req/s)", ylabel="TTFT (ms)",
                title="TTFT under load")
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        rates = sorted({r["request_rate"] for r in ladder})
        ax1.set_xticks(rates)
        ax1.xaxis.set_major_formatter(ScalarFormatter())
        ax1.xaxis.set_minor_formatter(NullFormatter())
        ax1.tick_params(axis="x", labelsize=7)
        ax1.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15))  # below: curves fill the axes
        ax2.barh([f"{r['config']}\n{r['arm']}" for r in slo], [r["request_throughput"] for r in slo])
        ax2.tick_params(axis="y", labelsize=6)
        ax2.set(xlabel="req/s", title=f"throughput at p95 TTFT <= {slo[0]['slo_ms']:.0f} ms" if slo else "")
        fig.tight_layout()
        paths.append(out_dir / "load_and_throughput_at_slo.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    for stem, table in (knobs or {}).items():
        if table:
            paths.append(_knob_plot(plt, table, out_dir / f"{stem}.png"))
    return paths


def _knob_plot(plt: Any, table: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Bars of each configuration's TTFT (single p50, single p99, Poisson-load p99) per arm, baseline first."""
    import numpy as np

    configs = list(dict.fromkeys(r["config"] for r in table))
    arms = list(dict.fromkeys(r["arm"] for r in table))
    panels = (("p50_ttft_ms", "single request, p50"), ("p99_ttft_ms", "single request, p99"),
              ("load_p99_ttft_ms", "Poisson load, p99"))
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 3.8), sharey=False)
    width = 0.8 / max(1, len(arms))
    for ax, (metric, title) in zip(axes, panels):
        for i, arm in enumerate(arms):
            vals = [next((r[metric] for r in table if r["config"] == c and r["arm"] == arm), None) or 0.0
                    for c in configs]
            ax.bar(np.arange(len(configs)) + i * width, vals, width, label=arm)
        rate = next((r["load_request_rate"] for r in table if r.get("load_request_rate")), None)
        ax.set_title(f"{title}" + (f" at {rate:g} req/s" if metric.startswith("load") and rate else ""), fontsize=9)
        ax.set_xticks(np.arange(len(configs)) + width * (len(arms) - 1) / 2)
        ax.set_xticklabels(configs, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("TTFT (ms)")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"One serving knob at a time against {configs[0]} (started by the same command)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- the report: read the committed suites, write summary.json and the plots, print ------------------------------
PROMPTS = Path(".gpu") / "prompts" / "nq20_middle.jsonl"
"""The golden prompts (``gpu make_prompts``, not committed), relative to the working directory."""
QLM_PROMPTS = PROMPTS.with_name("nq20_middle_qlm.jsonl")
RANDOM_PROMPTS = PROMPTS.with_name("nq20_middle_random.jsonl")
PLANNER_CONFIGS = Path("tests") / "fixtures" / "configs"
QLM_CONFIG = "270m_bf16kv_qlm"  # run 3: plain and reader-reranked top-1 on the same engine as 270m_bf16kv_len4096
RANDOM_CONFIG = "270m_bf16kv_random"  # run 4: the easier setting (random distractors), same questions
# run 4's driver tags (run.sh `graphs`, `load` and `tp2g`, each on a fresh machine); other tagged files are run 3's
RUN4_TAGS = {"_g0g", "_g1g", "_g1r", "_g0l", "_g1h", "_tp2g"}
# run 4's second call repeated 12b_graphs_1024 on the other GPU: its rows get their own name
RENAMED = {("_g1h", "12b_graphs_1024"): "12b_graphs_1024_repeat"}
# one serving knob at a time, each table against the BF16 baseline started by the same command (same machine, same run)
KNOB_TABLES = {  # plot file stem: (run, baseline, driver tags of that command)
    "knobs_vs_baseline": (3, "12b_baseline", {"_g0", "_g1"}),
    "cuda_graphs_vs_baseline": (4, "12b_baseline_n100", {"_g0g", "_g1g"}),
}
# (engine log, configuration): engines whose largest CUDA-graph size the TTFT plot marks, from the summary of the
# engine logs (gpu engine_logs -> results/gpu/engine_logs.json; the raw logs are not committed)
GRAPH_LOGS = [("logs/run3/gpu_suite_c_g0_logs.tar.gz:12b_baseline.log", "12b_baseline"),
              ("logs/run4/gpu_suite_c_g0g_logs.tar.gz:12b_baseline_n100.log", "12b_baseline_n100"),
              ("logs/run4/gpu_suite_c_g0g_logs.tar.gz:12b_graphs_1024.log", "12b_graphs_1024")]
# the TTFT plot: run 4's same-command pair with length sweeps (the default engine and 1,024-token graphs)
TTFT_12B_CONFIGS = ("12b_baseline_n100", "12b_graphs_1024")


def run_of(suite: dict[str, Any]) -> int:
    tag = suite.get("tag") or ""
    return 4 if tag in RUN4_TAGS else 3 if tag else 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    results = results_root() / "gpu"
    suites = [json.loads(p.read_text()) for p in sorted(results.glob("gpu_suite_*.json"))]
    for suite in suites:
        for run in suite["runs"]:
            run["name"] = RENAMED.get((suite.get("tag") or "", run["name"]), run["name"])
    run1 = [json.loads(p.read_text()) for p in sorted((results / "run1").glob("gpu_suite_*.json"))]
    acc, lat, lad, slo = accuracy_rows(suites), latency_rows(suites), ladder_rows(suites), slo_rows(suites)
    # KV capacity: each configuration once, from the latest run that started it
    cap: list[dict[str, Any]] = []
    for run_no, run_suites in [(n, [x for x in suites if run_of(x) == n]) for n in (4, 3, 2)] + [(1, run1)]:
        for row in capacity_rows(run_suites, PLANNER_CONFIGS):
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
    # run 4: the easier setting, random distractors; the arm chosen by the same dev rule
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
        prompt_files: dict[str, tuple[Path, list[str | None]]] = {
            QLM_CONFIG: (QLM_PROMPTS, ["cand_top1", "cand_top1_qlm"]), RANDOM_CONFIG: (RANDOM_PROMPTS, [random_chosen])}
        path, arms = prompt_files.get(name, (PROMPTS, [chosen]))
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
    write_result(results / "summary.json", summary, command=command_line(__spec__.name, argv))
    # the TTFT plot: run 4's same-command pair with length sweeps, and other model shapes (knobs have their own plots)
    ttft_configs = [c for c in dict.fromkeys(r["config"] for r in lat)
                    if not c.startswith(("12b_", "270m")) or c in TTFT_12B_CONFIGS]
    engine_logs = json.loads((results / "engine_logs.json").read_text(encoding="utf-8"))
    graph_limits = {config: n for log, config in GRAPH_LOGS if (n := cudagraph_max_tokens(engine_logs, log))}
    plots = write_plots(lat, acc, lad, slo, results, accuracy_target=0.40,  # the 270M reader's accuracy target
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
    print("\nselected arm vs oracle, golden set (prompts from " + str(PROMPTS) + " and "
          + ", ".join(p.name for p in (QLM_PROMPTS, RANDOM_PROMPTS)) + ")\n"
          + (json.dumps(vs_oracle, indent=1) if vs_oracle else "prompts not found: run gpu make_prompts first"))
    print("\nplots: " + ", ".join(shown_path(p) for p in plots))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
