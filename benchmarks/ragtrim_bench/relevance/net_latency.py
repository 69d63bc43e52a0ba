"""Net latency of trim(): cold per-request cost of each relevance path against the answers it keeps.

Each candidate runs in its own worker process; requests go to the workers in turn (interleaved, so machine noise
falls on all of them alike). Every passage appears in exactly one request (``build_single_use``), so inside a
worker every request is cold: passages, sentences and query are new to the process, as in production. A worker
warms up (model load, imports) on made-up requests that share no text with a measured one; that one-time cost is
reported as ``first_call_ms``.

Per request and candidate: wall time and CPU seconds of ``trim()`` at 1/4 of the tokens (cold), then the answer
kept at 1/4 and 1/8 (the 1/8 pass reuses the 1/4 pass's caches, so it is not timed).

Usage: ragtrim-bench relevance net_latency [--split heldout|dev] [--limit N] [--candidates a,b,...]
A candidate named ``<name>-nopf`` runs with ``Pipeline(prefetch=False)``: stages strictly in turn, the model pass
not overlapped with the CPU stages. ``given-minilm`` reuses the retriever's scores (``scorer="given"``): full-length
MiniLM cosines, computed before the clock starts, as a MiniLM vector store computed them at retrieval time.
Writes benchmarks/results/relevance/net_latency_<split>.json.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.answers import answer_in_text
from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import mean, percentile, summarize


def candidate_scorer(name: str) -> Any:
    """The relevance scorer of a candidate (built inside the worker)."""
    from ragtrim.scoring.auto import (
        FAST_BM25_WEIGHT,
        FAST_CANDIDATES,
        FAST_PREFIX_TOKENS,
        Backend,
        fast_scorer,
    )
    from ragtrim.scoring.bm25 import BM25Scorer
    from ragtrim.scoring.cascade import CascadeScorer
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, EmbeddingScorer
    from ragtrim.scoring.hybrid import HybridScorer
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer
    from ragtrim.scoring.torch_backend import TorchEmbeddingScorer

    table: dict[str, Callable[[], Any]] = {
        "bm25": BM25Scorer,
        "minilm-torch-t1": lambda: EmbeddingScorer(threads=1),
        "minilm-torch-t2": lambda: EmbeddingScorer(threads=2),
        "minilm-onnx-fp32": lambda: OnnxEmbeddingScorer(quantized=False, threads=1),
        "minilm-onnx-int8": lambda: OnnxEmbeddingScorer(threads=1),
    }
    if name in table:
        return table[name]()
    if name.startswith("cascade"):  # cascade-<int8|fp32>-<candidates>-<max_seq_length>
        _, kind, cands, seq = name.split("-")
        second = OnnxEmbeddingScorer(quantized=kind == "int8", max_seq_length=int(seq), threads=1)
        return CascadeScorer(first="bm25", second=second, candidates=int(cands))
    if name.startswith("mix-"):  # mix-<max_seq_length>-<bm25 weight>-<threads>: BM25 + MiniLM on leading pieces
        _, seq, weight, threads = name.split("-")
        w = float(weight)
        return HybridScorer(scorers=(BM25Scorer(), OnnxEmbeddingScorer(max_seq_length=int(seq), threads=int(threads))),
                            method="mix", weights=(w, 1 - w))
    if name in ("fast-cuda-st", "fast-cuda-eager"):  # MiniLM on CUDA through sentence-transformers (before run 7)
        model = os.environ.get("RAGTRIM_MINILM", DEFAULT_EMBEDDING_MODEL)  # or called directly, without CUDA graphs
        prefix = (EmbeddingScorer(model=model, device="cuda", max_seq_length=FAST_PREFIX_TOKENS) if name.endswith("st")
                  else TorchEmbeddingScorer(model=model, device="cuda", max_seq_length=FAST_PREFIX_TOKENS,
                                            cuda_graphs=False))
        mixed = HybridScorer(scorers=(BM25Scorer(), prefix), method="mix",
                             weights=(FAST_BM25_WEIGHT, 1 - FAST_BM25_WEIGHT))
        return CascadeScorer(first="bm25", second=mixed, candidates=FAST_CANDIDATES)
    if name.startswith("fast-"):  # fast-<onnx|cuda|torchcpu>[-t<threads>][-p<pieces>-w<bm25 weight>]: the fast path
        parts = name.split("-")  # on a forced backend, with its own recipe unless -p/-w say otherwise
        backends: dict[str, Backend] = {"onnx": "onnxruntime-int8-cpu", "cuda": "torch-cuda", "torchcpu": "torch-cpu"}
        backend = backends[parts[1]]
        opts = {p[0]: p[1:] for p in parts[2:]}
        return fast_scorer(backend, model=os.environ.get("RAGTRIM_MINILM", DEFAULT_EMBEDDING_MODEL),
                           threads=int(opts["t"]) if "t" in opts else None,
                           pieces=int(opts["p"]) if "p" in opts else None,
                           bm25_weight=float(opts["w"]) if "w" in opts else None)
    if name == "auto":
        return None
    raise SystemExit(f"unknown candidate {name!r}")


def _worker(name: str, conn: Any) -> None:
    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter

    prefetch = not name.endswith("-nopf")  # "<candidate>-nopf": stages strictly in turn, no background model pass
    # "given-minilm": the retriever (a vector store of full-length MiniLM embeddings) scored the passages already;
    # trim() reuses those scores (scorer="given"). The retriever's scoring is done before the clock starts.
    retriever = candidate_scorer("minilm-onnx-fp32") if name == "given-minilm" else None
    scorer = None if retriever is not None else candidate_scorer(name.removesuffix("-nopf"))

    def pipeline(budget: int) -> Any:
        if retriever is not None:
            return Pipeline(default_stages(budget=budget, scorer="given"), prefetch=prefetch)
        if scorer is None:
            return Pipeline(default_stages(budget=budget), prefetch=prefetch)
        stages = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                  for s in default_stages(budget=budget, scorer="bm25")]
        return Pipeline(stages, prefetch=prefetch)

    from ragtrim.text.tokens import get_counter

    counter = get_counter("cl100k_base")
    first_call_ms = None
    while True:
        msg = conn.recv()
        if msg is None:
            break
        kind, question, texts, answers = msg
        budget4 = max(1, sum(counter.count(t) for t in texts) // 4)
        if retriever is not None:
            texts = [{"text": t, "id": str(i), "score": s}
                     for i, (t, s) in enumerate(zip(texts, retriever.score(question, texts)))]
        w0, c0 = time.perf_counter(), time.process_time()
        result = pipeline(budget4).run(texts, query=question)
        wall_ms, cpu_s = (time.perf_counter() - w0) * 1000, time.process_time() - c0
        if kind == "warmup":
            first_call_ms = wall_ms if first_call_ms is None else first_call_ms
            conn.send({"warmup": True})
            continue
        r8 = pipeline(max(1, budget4 // 2)).run(texts, query=question)
        info: Mapping[str, Any] = next((s.info for s in result.trace if s.stage == "relevance"), {})
        conn.send({"trim_ms": wall_ms, "cpu_s": cpu_s, "first_call_ms": first_call_ms,
                   "kept_4x": answer_in_text(answers, result.text), "kept_8x": answer_in_text(answers, r8.text),
                   "ratio_4x": result.tokens_before / max(1, result.tokens_after),
                   "ratio_8x": r8.tokens_before / max(1, r8.tokens_after), "scorer": info.get("scorer")})
    conn.send({"max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


@dataclass(frozen=True)
class Config:
    split: str = "heldout"
    limit: int | None = None
    candidates: tuple[str, ...] = ("bm25", "auto")
    warmup: int = 3


def requests(config: Config) -> list[Any]:
    from ragtrim_bench.datasets.nq import build_single_use, load_nq_open

    qs = load_nq_open()
    held = config.split == "heldout"
    return build_single_use(qs[1062:] if held else qs[:1062], pool=qs, limit=config.limit)


def warmup_requests(n: int) -> list[tuple[str, list[str]]]:
    """Made-up requests for the warm-up: they load models and imports but share no text with a measured one."""
    return [(f"warm-up question {k}?", [f"Warm-up passage {k}.{j} about topic {j}. It has two sentences."
                                        for j in range(20)]) for k in range(n)]


def run(config: Config) -> dict[str, Any]:
    measured = requests(config)
    ctx = mp.get_context("spawn")
    workers: dict[str, Any] = {}
    for name in config.candidates:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(name, child), daemon=True)
        proc.start()
        workers[name] = (proc, parent)
    started = time.perf_counter()
    for question, texts in warmup_requests(config.warmup):
        for _, conn in workers.values():
            conn.send(("warmup", question, texts, ("none",)))
        for _, conn in workers.values():
            conn.recv()
    records: dict[str, list[dict[str, Any]]] = {n: [] for n in workers}
    for k, inst in enumerate(measured):
        names = list(workers) if k % 2 == 0 else list(reversed(workers))  # alternate who goes first
        for name in names:
            conn = workers[name][1]
            conn.send(("measure", inst.question, [p.content for p in inst.passages], inst.answers))
            records[name].append(conn.recv())
    rows = []
    for name, (proc, conn) in workers.items():
        conn.send(None)
        tail = conn.recv()
        proc.join(timeout=30)
        recs = records[name]
        rows.append({
            "candidate": name, "scorer": recs[0]["scorer"] if recs else None, "n_requests": len(recs),
            "condition": "cold", **summarize([r["trim_ms"] for r in recs], "trim_cold", "ms"),
            "mean_cpu_s_per_request": mean([r["cpu_s"] for r in recs]),
            "p50_cpu_s_per_request": percentile([r["cpu_s"] for r in recs], 50),
            "trims_per_s_per_core": 1 / mean([r["cpu_s"] for r in recs]) if recs else None,
            "first_call_ms": recs[0]["first_call_ms"] if recs else None,
            "answer_recall_4x": mean([float(r["kept_4x"]) for r in recs]),
            "answer_recall_8x": mean([float(r["kept_8x"]) for r in recs]),
            "mean_token_ratio_4x": mean([r["ratio_4x"] for r in recs]),
            "mean_token_ratio_8x": mean([r["ratio_8x"] for r in recs]),
            **tail,
        })
    base = next((r for r in rows if r["candidate"] == "bm25"), None)
    if base:
        for r in rows:
            r["p50_vs_bm25"] = r["p50_trim_cold_ms"] / base["p50_trim_cold_ms"]
    return {"benchmark": "net_latency", "split": config.split,
            "questions": "1062-2123" if config.split == "heldout" else "0-1061",
            "setting": "NQ, 20 passages, hard BM25 distractors, gold in the middle, every passage used once",
            "budgets": "1/4 (timed, cold) and 1/8 of the request's cl100k tokens", "rows": rows,
            "load_average_at_end": load_average(), "wall_s": time.perf_counter() - started}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["heldout", "dev"], default="heldout")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--candidates", default="bm25,auto")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/relevance/net_latency_<split>.json")
    args = parser.parse_args(argv)
    config = Config(split=args.split, limit=args.limit, candidates=tuple(args.candidates.split(",")))
    result = run(config)
    out = write_result(args.output or result_path(__spec__.name, f"_{config.split}"), result,
                       command=command_line(__spec__.name, argv), packages=["onnxruntime", "torch"])
    for r in result["rows"]:
        print(f"{r['candidate']:28s} cold p50 {r['p50_trim_cold_ms']:7.1f} ms  p99 {r['p99_trim_cold_ms']:7.1f} ms  "
              f"cpu {r['mean_cpu_s_per_request'] * 1000:6.1f} ms  recall 4x {r['answer_recall_4x']:.3f}  "
              f"8x {r['answer_recall_8x']:.3f}  x bm25 {r.get('p50_vs_bm25', float('nan')):.1f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
