"""End-to-end TTFT on the GPU host with trim() in line: e2e TTFT = trim + queue + prefill, trim time included.

Run on the GPU machine (vLLM importable, the 12B dummy model folder written by ``gpu suites --prepare-only``):

  RAGTRIM_DATA=.gpu/data RAGTRIM_MINILM=.gpu/minilm RAGTRIM_CACHE_DIR=.gpu/cache \
    python -m ragtrim_bench.gpu.e2e --out $OUT   (run_e2e.sh runs it)

Arms (the same questions; each request's 20 NQ passages are new to the trimming process only on its first use):
  untrimmed   the full prompt, no trim
  trim_cpu    ``trim()`` in line on the host's CPU: the ``fast`` scorer with MiniLM on ONNX Runtime (int8)
  trim_gpu    ``trim()`` in line with MiniLM on the host's GPU (torch, CUDA), BM25 and the rest on the CPU
Each trimmed request keeps 1/4 of its documents' cl100k tokens. Trimming runs in a worker thread per request
(``asyncio.to_thread``), so concurrent requests trim concurrently, as in a sidecar. Steps:
  1. trims per second per host: every CPU core trimming (a process each, ONNX with one thread), and 4 processes
     sharing the GPU; before the engine starts, so the numbers are the trimmer's alone;
  2. single requests (one at a time, arms interleaved): trim, TTFT and e2e TTFT per arm;
  3. a Poisson ladder per arm: p95 e2e TTFT per rate, and the throughput within a 500 ms p95 e2e SLO.
Writes ``$OUT/gpu_e2e.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim.scoring.auto import Backend
from ragtrim_bench.common.results import command_line, write_result
from ragtrim_bench.common.stats import mean, summarize
from ragtrim_bench.gpu.load import poisson_offsets
from ragtrim_bench.gpu.metrics import throughput_at_slo
from ragtrim_bench.gpu.prompts import format_prompt

ARMS = ("untrimmed", "trim_cpu", "trim_gpu")
BACKEND: dict[str, Backend] = {"trim_cpu": "onnxruntime-int8-cpu", "trim_gpu": "torch-cuda"}


def minilm() -> str:
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL

    return os.environ.get("RAGTRIM_MINILM", DEFAULT_EMBEDDING_MODEL)


class Trimmer:
    """trim() with the fast scorer on one backend; one per arm, shared by all of the arm's requests."""

    def __init__(self, backend: Backend, *, threads: int | None = None) -> None:
        from ragtrim.api import default_stages
        from ragtrim.scoring.auto import fast_scorer
        from ragtrim.stages.relevance import RelevanceFilter
        from ragtrim.text.tokens import get_counter

        self.scorer = fast_scorer(backend, model=minilm(), threads=threads)
        self.counter = get_counter("cl100k_base")
        self._stages = default_stages
        self._relevance = RelevanceFilter

    def __call__(self, question: str, docs: Sequence[str]) -> tuple[str, float]:
        """The trimmed prompt and the time trim() took (ms), counting included."""
        from ragtrim.pipeline import Pipeline

        started = time.perf_counter()
        budget = max(1, sum(self.counter.count(d) for d in docs) // 4)
        stages = [self._relevance(scorer=self.scorer, top_k=None) if isinstance(s, self._relevance) else s
                  for s in self._stages(budget=budget, scorer="bm25")]
        result = Pipeline(stages, tokenizer=self.counter).run(list(docs), query=question)
        prompt = format_prompt(question, [c.text for c in result.chunks])
        return prompt, (time.perf_counter() - started) * 1000


def questions(n: int, offset: int = 0) -> list[tuple[str, str, list[str]]]:
    from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open

    qs = load_nq_open()
    inst = build_multidoc(qs[offset:offset + n], n_docs=20, gold_position="middle", distractors="bm25", pool=qs)
    return [(i.id, i.question, [p.content for p in i.passages]) for i in inst]


# -- 1. trims per second per host -----------------------------------------------------------------------------------
_WORKER: Trimmer | None = None


def _init(backend: Backend) -> None:
    global _WORKER
    _WORKER = Trimmer(backend, threads=1 if backend.startswith("onnx") else None)
    _WORKER("warm up", ["a passage", "another passage"])


def _trim_one(item: tuple[str, list[str]]) -> float:
    assert _WORKER is not None
    return _WORKER(item[0], item[1])[1]


def trims_per_second(backend: str, workers: int, items: list[tuple[str, list[str]]]) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers, initializer=_init, initargs=(backend,)) as pool:
        pool.map(_trim_one, items[:workers * 2])  # warm-up: every worker loads its model
        started = time.perf_counter()
        times = pool.map(_trim_one, items, chunksize=1)
        wall = time.perf_counter() - started
    return {"backend": backend, "processes": workers, "trims": len(items), "wall_s": wall,
            "trims_per_s": len(items) / wall, **summarize(times, "trim_under_full_load", "ms")}


# -- 2 and 3. requests through vLLM ---------------------------------------------------------------------------------
async def one_request(backend: Any, arm: str, rid: str, question: str, docs: list[str],
                      trimmers: dict[str, Trimmer], max_tokens: int) -> dict[str, Any]:
    if arm == "untrimmed":
        prompt, trim_ms = format_prompt(question, docs), 0.0
    else:
        prompt, trim_ms = await asyncio.to_thread(trimmers[arm], question, docs)
    rec = await backend.complete(f"{arm}-{rid}", prompt, max_tokens=max_tokens, arm=arm)
    return {"arm": arm, "id": rid, "success": rec.success, "error": rec.error, "prompt_tokens": rec.prompt_tokens,
            "trim_ms": trim_ms, "ttft_ms": rec.ttft_ms, "e2e_ttft_ms": trim_ms + rec.ttft_ms}


def arm_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["success"]]
    return {"completed": len(ok), "failed": len(rows) - len(ok),
            "mean_prompt_tokens": mean([r["prompt_tokens"] for r in ok]),
            **summarize([r["trim_ms"] for r in ok], "trim", "ms"),
            **summarize([r["ttft_ms"] for r in ok], "ttft", "ms"),
            **summarize([r["e2e_ttft_ms"] for r in ok], "e2e_ttft", "ms")}


async def single(backend: Any, items: list[tuple[str, str, list[str]]], trimmers: dict[str, Trimmer],
                 max_tokens: int) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {a: [] for a in ARMS}
    for k, (rid, q, docs) in enumerate(items):
        for arm in ARMS if k % 2 == 0 else tuple(reversed(ARMS)):
            rows[arm].append(await one_request(backend, arm, rid, q, docs, trimmers, max_tokens))
    out = {arm: arm_summary(r) for arm, r in rows.items()}
    base = out["untrimmed"]
    for arm in ARMS[1:]:
        out[arm]["p50_e2e_gain_vs_untrimmed"] = base["p50_e2e_ttft_ms"] / out[arm]["p50_e2e_ttft_ms"]
        out[arm]["p99_e2e_gain_vs_untrimmed"] = base["p99_e2e_ttft_ms"] / out[arm]["p99_e2e_ttft_ms"]
    return out


async def ladder(backend: Any, items: list[tuple[str, str, list[str]]], trimmers: dict[str, Trimmer],
                 rates: Sequence[float], step_s: float, slo_ms: float, max_tokens: int,
                 deadline: float) -> dict[str, Any]:
    from ragtrim_bench.gpu.worker import reset_prefix_cache

    out: dict[str, Any] = {}
    for arm in ARMS:
        steps: list[dict[str, Any]] = []
        offset = 0
        for rate in rates:
            if time.time() > deadline:
                steps.append({"request_rate": rate, "skipped": "deadline"})
                break
            n = min(len(items), max(24, int(rate * step_s)))
            chosen = [items[(offset + i) % len(items)] for i in range(n)]
            offset += n
            await reset_prefix_cache(backend)
            offsets = poisson_offsets(rate, n, seed=int(rate * 1000))
            started = time.perf_counter()

            async def arrive(i: int, item: tuple[str, str, list[str]], t0: float = started,
                             offs: list[float] = offsets, arm: str = arm, rate: float = rate) -> dict[str, Any]:
                await asyncio.sleep(max(0.0, offs[i] - (time.perf_counter() - t0)))
                return await one_request(backend, arm, f"{rate}-{i}-{item[0]}", item[1], item[2], trimmers,
                                         max_tokens)

            rows = await asyncio.gather(*(arrive(i, it) for i, it in enumerate(chosen)))
            duration = time.perf_counter() - started
            s = arm_summary(list(rows)) | {"request_rate": rate, "duration_s": duration}
            s["request_throughput"] = s["completed"] / duration
            steps.append(s)
            if s["p95_e2e_ttft_ms"] > 4 * slo_ms or s["failed"]:
                break
        out[arm] = {"steps": steps, "at_slo": throughput_at_slo(
            [x for x in steps if "completed" in x], slo_ms=slo_ms, key="p95_e2e_ttft_ms")}
    base = out["untrimmed"]["at_slo"]["request_throughput"]
    for arm in ARMS[1:]:
        got = out[arm]["at_slo"]["request_throughput"]
        out[arm]["throughput_gain_at_slo"] = got / base if base else None
    return out


async def serve(args: argparse.Namespace, result: dict[str, Any], deadline: float) -> None:
    from ragtrim_bench.gpu.backends import VLLMInProcessBackend

    engine = {"model": str(args.model), "dtype": "bfloat16", "max_model_len": 4096, "kv_cache_dtype": "auto",
              "gpu_memory_utilization": 0.8, "max_num_batched_tokens": 8192, "seed": 0, "enforce_eager": False,
              "load_format": "dummy", "compilation_config": {"max_cudagraph_capture_size": 1024}}
    result["engine"] = engine
    backend = VLLMInProcessBackend(engine_kwargs=engine)
    t0 = time.perf_counter()
    backend.start()
    result["engine_start_s"] = time.perf_counter() - t0
    trimmers = {arm: Trimmer(BACKEND[arm]) for arm in ARMS[1:]}
    golden = questions(args.single + 6)
    for rid, q, docs in golden[:6]:  # warm-up: graphs, scorers, the tokenizer; these questions are not timed
        for arm in ARMS:
            await one_request(backend, arm, rid, q, docs, trimmers, args.max_tokens)
    try:
        result["single"] = await single(backend, golden[6:], trimmers, args.max_tokens)
        path = Path(args.out) / "gpu_e2e.json"
        path.write_text(json.dumps(result | {"partial": True}, indent=1) + "\n")
        pool = questions(args.ladder_questions, offset=400)
        result["ladder"] = await ladder(backend, pool, trimmers, args.rates, args.step_s, args.slo_ms,
                                        args.max_tokens, deadline)
    finally:
        backend.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/ragtrim-gpu-out"))
    parser.add_argument("--model", default="/tmp/gemma-dummy/12b")
    parser.add_argument("--single", type=int, default=100)
    parser.add_argument("--ladder-questions", type=int, default=600)
    parser.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")],
                        default=[4, 8, 12, 16, 24, 32, 48])
    parser.add_argument("--step-s", type=float, default=6.0)
    parser.add_argument("--slo-ms", type=float, default=500.0)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--tps-trims", type=int, default=320)
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--skip", default="", help="comma-separated: tps,serve")
    args = parser.parse_args(argv)
    deadline = time.time() + args.budget_s - 30
    Path(args.out).mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"benchmark": "gpu_e2e", "minilm": minilm(),
                              "budget": "1/4 of the documents' cl100k tokens", "errors": []}
    skip = set(filter(None, args.skip.split(",")))
    if "tps" not in skip:
        items = [(q, docs) for _, q, docs in questions(args.tps_trims, offset=1062)]
        result["trims_per_second"] = [trims_per_second("onnxruntime-int8-cpu", os.cpu_count() or 1, items),
                                      trims_per_second("torch-cuda", 4, items)]
    if "serve" not in skip:
        try:
            asyncio.run(serve(args, result, deadline))
        except Exception as exc:  # noqa: BLE001 - recorded: the file must still hold what finished
            result["errors"].append(f"{type(exc).__name__}: {exc}")
    write_result(Path(args.out) / "gpu_e2e.json", result, command=command_line(__spec__.name, argv),
                 packages=["vllm", "onnxruntime"])
    print(json.dumps({k: v for k, v in result.items() if k in ("single", "errors")}, indent=1)[:4000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
