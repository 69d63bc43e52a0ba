"""Turn the GPU suites' JSON into flat summaries, the planner comparison, and plots (matplotlib, Agg).

Pure functions build the rows; ``write_plots`` draws them; ``benchmarks/gpu/report.py`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any


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
