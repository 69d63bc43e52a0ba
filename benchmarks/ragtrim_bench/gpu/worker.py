"""One engine configuration, run in its own process: start vLLM, run the tasks of a spec, write a JSON result.

Run as ``python -m ragtrim_bench.gpu.worker SPEC.json OUT.json``. The orchestrator captures this process's output
(vLLM's engine logs included) and reads KV-cache capacity from it. Each task records errors instead of raising.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim._util.jsonl import iter_jsonl
from ragtrim_bench.common.answers import best_subspan_em, normalize_answer
from ragtrim_bench.gpu.backends import (
    OpenAICompletionsBackend,
    VLLMInProcessBackend,
    engine_cli_args,
    start_vllm_server,
)
from ragtrim_bench.gpu.load import LoadSpec, run_load
from ragtrim_bench.gpu.metrics import summarize_records, throughput_at_slo


def load_prompts(path: str | Path) -> list[dict[str, Any]]:
    """The prompt rows of a JSONL file written by ``gpu make_prompts``."""
    return [row for _, row in iter_jsonl(path, what="prompts file")]


def gpu_memory_used_mib() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return float(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def prom_snapshot() -> dict[str, float]:
    """Sum of every ``vllm:`` sample in this process's Prometheus registry, by sample name."""
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        return {}
    out: dict[str, float] = {}
    for family in REGISTRY.collect():
        for s in family.samples:
            if s.name.startswith("vllm:") and not s.name.endswith(("_bucket", "_created")):
                out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


def score_answer(pred: str, row: dict[str, Any]) -> float:
    if row.get("is_impossible"):
        return 1.0 if "unanswerable" in normalize_answer(pred) else 0.0
    return best_subspan_em(pred, row["answers"])


async def task_accuracy(engine: Any, rows: Sequence[dict[str, Any]], task: dict[str, Any]) -> dict[str, Any]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=task.get("max_tokens", 32), stop=["\n"])

    async def one(i: int, row: dict[str, Any]) -> str:
        final = ""
        async for out in engine.generate(request_id=f"acc-{i}-{row['arm']}-{row['id']}", prompt=row["prompt"],
                                         sampling_params=params):
            final = out.outputs[0].text
        return final

    started = time.perf_counter()
    preds = await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))
    seconds = time.perf_counter() - started
    per_arm: dict[str, dict[str, Any]] = {}
    items = []
    for row, pred in zip(rows, preds):
        s = score_answer(pred, row)
        a = per_arm.setdefault(row["arm"], {"n": 0, "correct": 0.0, "prompt_tokens": 0, "answer_in_prompt": 0,
                                            "n_impossible": 0, "refusals_correct": 0.0})
        a["n"] += 1
        a["prompt_tokens"] += row["prompt_tokens"]
        a["answer_in_prompt"] += int(bool(row.get("answer_in_prompt")) and not row.get("is_impossible"))
        if row.get("is_impossible"):
            a["n_impossible"] += 1
            a["refusals_correct"] += s
        else:
            a["correct"] += s
        items.append({"id": row["id"], "arm": row["arm"], "prediction": pred, "score": s})
    summary = {}
    for arm, a in per_arm.items():
        answerable = a["n"] - a["n_impossible"]
        summary[arm] = {
            "questions": a["n"],
            "accuracy": a["correct"] / answerable if answerable else None,
            "refusal_accuracy": a["refusals_correct"] / a["n_impossible"] if a["n_impossible"] else None,
            "mean_prompt_tokens": a["prompt_tokens"] / a["n"],
            # over answerable questions only (an unanswerable one has no answer to be in the prompt)
            "answer_in_prompt_rate": a["answer_in_prompt"] / answerable if answerable else None,
        }
    return {"type": "accuracy", "seconds": seconds, "arms": summary, "predictions": items}


async def reset_prefix_cache(backend: Any) -> None:
    """Start every timed run with an empty prefix cache, so TTFT measures prefill, not an earlier run's cache."""
    if isinstance(backend, OpenAICompletionsBackend):
        await backend.reset_prefix_cache()
        return
    reset = getattr(backend._engine, "reset_prefix_cache", None)
    if reset is not None:
        result = reset()
        if asyncio.iscoroutine(result):
            await result


async def task_single(backend: Any, rows: Sequence[dict[str, Any]], task: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "single", "arms": {}}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        prompts = [(r["id"], r["prompt"]) for r in rows if r["arm"] == arm][: task.get("n", 20) + 4]
        if not prompts:
            continue
        await reset_prefix_cache(backend)
        before = prom_snapshot()
        records, duration = await run_load(backend, prompts, LoadSpec(num_requests=len(prompts) - 4, concurrency=1,
                                                                       max_tokens=task.get("max_tokens", 32),
                                                                       prompt_offset=4), arm=arm)
        out["arms"][arm] = (summarize_records(records, duration_s=duration) | _prefix_cache_delta(before, prom_snapshot())
                            | {"ttft_ms_each": [round(r.ttft_ms, 3) for r in records],  # for bimodality checks
                               "prompt_tokens_each": [r.prompt_tokens for r in records]})
    return out


async def task_ladder(backend: Any, rows: Sequence[dict[str, Any]], task: dict[str, Any],
                      deadline: float) -> dict[str, Any]:
    slo = float(task.get("slo_ms", 500.0))
    out: dict[str, Any] = {"type": "ladder", "slo_ms": slo, "arms": {}}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        prompts = [(r["id"], r["prompt"]) for r in rows if r["arm"] == arm]
        steps: list[dict[str, Any]] = []
        offset = 0
        for rate in task["rates"]:
            if time.time() > deadline - task.get("reserve_s", 60):
                steps.append({"request_rate": rate, "skipped": "deadline"})
                break
            # never more than the distinct prompts: a repeat inside one step would hit the prefix cache
            n = min(max(task.get("min_requests", 30), int(rate * task.get("step_seconds", 6))), len(prompts) - 2)
            kv_max = 0.0
            stop = asyncio.Event()

            async def poll_kv(stop: asyncio.Event) -> None:
                nonlocal kv_max
                while not stop.is_set():
                    kv_max = max(kv_max, prom_snapshot().get("vllm:kv_cache_usage_perc", 0.0))
                    await asyncio.sleep(0.25)

            await reset_prefix_cache(backend)
            before = prom_snapshot()
            poller = asyncio.create_task(poll_kv(stop))
            records, duration = await run_load(backend, prompts, LoadSpec(num_requests=n, request_rate=rate,
                                                                           max_tokens=task.get("max_tokens", 32),
                                                                           seed=int(rate * 1000), warmup_requests=2,
                                                                           prompt_offset=offset + 2),
                                               arm=arm)
            offset = (offset + n + 2) % len(prompts)
            stop.set()
            await poller
            after = prom_snapshot()
            s = summarize_records(records, duration_s=duration, ttft_slo_ms=slo)
            s["request_rate"] = rate
            s["max_kv_cache_usage"] = kv_max
            s.update(_prefix_cache_delta(before, after))
            steps.append(s)
            if s["p95_ttft_ms"] > task.get("stop_p95_ttft_ms", 4 * slo) or s["failed"]:
                break
        out["arms"][arm] = {"steps": steps, "at_slo": throughput_at_slo([x for x in steps if "completed" in x],
                                                                         slo_ms=slo)}
    return out


def _wanted(arm: str, task: dict[str, Any]) -> bool:
    """A task's ``arms`` lists arm names; an entry ending in ``*`` is a prefix (``"cand_*"``, ``"len_*"``)."""
    arms = task.get("arms")
    if arms is None:
        return True
    return any(arm == a or (a.endswith("*") and arm.startswith(a[:-1])) for a in arms)


def _prefix_cache_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    q = after.get("vllm:prefix_cache_queries_total", 0.0) - before.get("vllm:prefix_cache_queries_total", 0.0)
    h = after.get("vllm:prefix_cache_hits_total", 0.0) - before.get("vllm:prefix_cache_hits_total", 0.0)
    return {"prefix_cache_queries": q, "prefix_cache_hits": h, "prefix_cache_hit_rate": h / q if q else 0.0}


async def run_spec(spec: dict[str, Any], partial: Path | None = None) -> dict[str, Any]:
    """Run one spec's tasks; with ``partial``, rewrite that file after every task, so a worker killed at its timeout
    still leaves the tasks it finished."""
    deadline = float(spec.get("deadline_unix", time.time() + 3600))
    result: dict[str, Any] = {"name": spec["name"], "engine": spec["engine"], "tasks": [], "errors": []}
    mem_before = gpu_memory_used_mib()
    started = time.perf_counter()
    server: Any = None
    backend: Any
    if spec.get("backend") == "server":  # `vllm serve` on loopback, requests over HTTP streaming
        os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # for POST /reset_prefix_cache
        port = int(spec.get("port", 8011))
        server = start_vllm_server(model=spec["engine"]["model"], port=port,
                                   extra_args=engine_cli_args(spec["engine"]), log_path=spec.get("server_log"))
        backend = OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{port}", model=spec["engine"]["model"])
        try:
            await backend.ready(float(spec.get("ready_timeout_s", 600)))
        except Exception as exc:  # noqa: BLE001 - recorded in the result; the worker must not crash
            result["errors"].append(f"server start: {type(exc).__name__}: {exc}")
            _stop_server(server)
            return result
    else:
        backend = VLLMInProcessBackend(engine_kwargs=spec["engine"])
        try:
            backend.start()
        except Exception as exc:  # noqa: BLE001 - recorded in the result; the worker must not crash
            result["errors"].append(f"engine start: {type(exc).__name__}: {exc}")
            return result
    result["engine_start_s"] = time.perf_counter() - started
    result["gpu_memory_used_mib_before"] = mem_before
    result["gpu_memory_used_mib_after_start"] = gpu_memory_used_mib()
    loaded: dict[str, list[dict[str, Any]]] = {}  # each prompt file is read once, however many tasks use it

    def prompts_of(files: str | Sequence[str] | None) -> list[dict[str, Any]]:
        paths = [] if not files else [files] if isinstance(files, str) else list(files)
        for f in paths:
            if f not in loaded:
                loaded[f] = load_prompts(f)
        return [r for f in paths for r in loaded[f]]

    try:
        for task in spec.get("tasks", []):
            if time.time() > deadline - 30:
                result["errors"].append(f"task {task['type']} skipped: deadline")
                continue
            t_rows = [r for r in prompts_of(task.get("prompts_file") or spec.get("prompts_file"))
                      if _wanted(r["arm"], task)]
            if task.get("limit"):
                keep = set(list(dict.fromkeys(r["id"] for r in t_rows))[: task["limit"]])
                t_rows = [r for r in t_rows if r["id"] in keep]
            try:
                if task["type"] == "accuracy":
                    if server is not None:
                        raise ValueError("accuracy needs the in-process backend (greedy with a newline stop)")
                    acc = await task_accuracy(backend._engine, t_rows, task)
                    result["tasks"].append(acc | {"set": task.get("set", "golden")})
                elif task["type"] == "single":
                    result["tasks"].append(await task_single(backend, t_rows, task))
                elif task["type"] == "ladder":
                    result["tasks"].append(await task_ladder(backend, t_rows, task, deadline))
            except Exception as exc:  # noqa: BLE001 - recorded; one failed task must not lose the others
                result["errors"].append(f"task {task['type']}: {type(exc).__name__}: {exc}")
            if partial is not None:
                partial.write_text(json.dumps(result | {"partial": True}, indent=1) + "\n", encoding="utf-8")
        result["gpu_memory_used_mib_end"] = gpu_memory_used_mib()
        result["prometheus"] = prom_snapshot()
    finally:
        if server is not None:
            _stop_server(server)
        else:
            backend.shutdown()
    return result


def _stop_server(proc: Any) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    result = asyncio.run(run_spec(spec, partial=Path(args[1])))
    Path(args[1]).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
