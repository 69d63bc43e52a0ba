"""What a cold trim would cost with each passage's analysis handed to worker processes, against the trim as it is.

  ragtrim-bench pipeline analysis_workers [--workers 1,2,4] [--scorer bm25] [--columns nq-title,nq-notitle]
                                          [--limit 50] [--rounds 3]

Most of a cold trim's CPU work that depends on one passage alone (its sentences, their BM25 tokens, its token count)
runs in the caller's Python thread, one passage after another. This benchmark measures how much of it worker
processes could take off the request: with ``N`` workers, the passages are cut into ``N + 1`` shares of about equal
length; each worker analyses a share (the prefetch of a BM25 pipeline's stages and the count of each text, into its
emptied caches) and sends back what its caches then hold; the caller analyses the last share meanwhile, puts what the
workers sent into its own caches, and runs the pipeline, which finds that work done. The time of a request includes
every part of it: the hand-over, the wait, the merge and the pipeline run. ``0`` workers is the trim as it is.

Every trim is cold (caches cleared before it, vector store off) and the arms take turns on each request; a request's
figure is its fastest of ``--rounds`` rounds. Reported per arm: p50 and mean of those, the parts of the handed-over
arms (``PARTS``), the ratio to the trim as it is, and whether every output (text and trace) is the
same as its. The worker processes are started (``spawn``) and warmed before the clock; nothing of this ships in
ragtrim.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim_bench.common.results import write_and_report
from ragtrim_bench.common.stats import mean, percentile
from ragtrim_bench.pipeline.stage_cost import budgeted_requests, drain_background, warm_up
from ragtrim_bench.relevance.columns import COLUMNS, Split

PACKAGES = ("ragtrim", "ragtrim-bench", "numpy", "tiktoken", "rs-bpe")
PARTS = ("own share", "wait", "slowest worker's analysis", "merge", "run")
"""A handed-over trim's parts: the caller's own share of the analysis, its wait for the workers' entries after that
(the slowest worker's analysis, measured in the worker, overlaps both), their merge into its caches, the pipeline."""


@dataclass(frozen=True)
class AnalysisWorkersConfig:
    workers: tuple[int, ...] = (1, 2, 4)
    scorer: str = "bm25"
    columns: tuple[str, ...] = ("nq-title", "nq-notitle")
    split: Split = "heldout"
    limit: int = 50
    ratio: int = 4
    rounds: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.workers or any(n < 1 for n in self.workers):
            raise ConfigError(f"workers must be counts of 1 or more, got {list(self.workers)}")
        if self.limit < 1 or self.rounds < 1:
            raise ConfigError(f"limit and rounds must be >= 1, got {self.limit} and {self.rounds}")
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown or not self.columns:
            raise ConfigError(f"unknown columns {unknown}; choose from {', '.join(COLUMNS)}")


def _caches() -> dict[str, Any]:
    """The per-text caches the analysis fills, by name (the same in every process)."""
    from ragtrim import get_counter
    from ragtrim.scoring import bm25
    from ragtrim.stages import compress
    from ragtrim.text import sentences

    return {"sentence spans": sentences._sentence_spans.cache, "sentences": compress._cached_parts.cache,
            "dependencies": compress._cached_dependencies.cache, "bm25 tokens": bm25._tokens.cache,
            "bm25 stems": bm25._stemmed.cache, "counts": get_counter(None)._cache}  # type: ignore[attr-defined]


def analyse(query: str, texts: Sequence[str]) -> None:
    """The analysis of ``texts`` a cold trim does first: the prefetch of a budgeted BM25 pipeline's stages
    (sentences and their BM25 tokens) and each text's token count, into this process's caches."""
    from ragtrim import get_counter
    from ragtrim.api import default_pipeline
    from ragtrim.inputs import coerce_chunks
    from ragtrim.models import TrimContext

    counter = get_counter(None)
    context = TrimContext(query=query, chunks=coerce_chunks([{"text": t, "id": f"s{i}"} for i, t in enumerate(texts)]))
    for stage in default_pipeline(budget=1, scorer="bm25").stages:  # a budget: the compression stage is in
        stage.prefetch(context, counter=counter)
    for text in texts:
        counter.count(text)


def worker_job(query: str, texts: Sequence[str]) -> tuple[dict[str, list[tuple[Any, Any]]], float]:
    """In a worker: analyse ``texts`` into emptied caches; every entry they then hold, and the analysis' seconds."""
    from ragtrim.caches import clear_caches

    clear_caches()
    started = time.perf_counter()
    analyse(query, texts)
    seconds = time.perf_counter() - started
    return {name: [(key, held[0]) for key, held in cache._data.items()] for name, cache in _caches().items()}, seconds


def merge(entries: dict[str, list[tuple[Any, Any]]]) -> None:
    """Put a worker's cache entries into this process's caches."""
    caches = _caches()
    for name, items in entries.items():
        cache = caches[name]
        for key, value in items:
            cache.put(key, value)


def shares(texts: Sequence[str], n: int) -> list[list[str]]:
    """``texts`` in ``n`` consecutive shares of about equal length in characters (some may be empty)."""
    total = sum(map(len, texts)) or 1
    out: list[list[str]] = [[] for _ in range(n)]
    done = 0
    for text in texts:
        out[min(n - 1, done * n // total)].append(text)
        done += len(text)
    return out


def _start(n: int) -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"))
    for f in [pool.submit(worker_job, "warm up", ["A first sentence. A second one."]) for _ in range(2 * n)]:
        f.result()
    return pool


def _digest(result: Any) -> str:
    trace = [(r.stage, r.chunks_out, r.tokens_out, [(x.chunk_id, x.action, x.tokens_removed) for x in r.removals])
             for r in result.trace]
    return hashlib.sha256(repr((result.text, trace)).encode()).hexdigest()


def measure(pool: ProcessPoolExecutor | None, n: int, scorer: str, question: str, passages: Sequence[str],
            budget: int) -> tuple[float, dict[str, float], str]:
    """One cold trim with ``n`` workers (0: as it is): its wall seconds, its parts' seconds and its output's digest."""
    from ragtrim.api import default_pipeline
    from ragtrim.caches import clear_caches

    chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate(passages)]
    drain_background()
    clear_caches()
    pipeline = default_pipeline(budget=budget, scorer=scorer)  # type: ignore[arg-type]
    parts: dict[str, float] = {}
    started = time.perf_counter()
    if n and pool is not None:
        plain = [t for t in passages if "<" not in t]  # as the prefetch: maybe HTML, which the HTML stage changes
        *theirs, own = shares(plain, n + 1)
        futures = [pool.submit(worker_job, question, share) for share in theirs if share]
        t = time.perf_counter()
        analyse(question, own)
        parts["own share"] = time.perf_counter() - t
        t = time.perf_counter()
        sent = [f.result() for f in futures]
        parts["wait"] = time.perf_counter() - t
        parts["slowest worker's analysis"] = max((seconds for _, seconds in sent), default=0.0)
        t = time.perf_counter()
        for entries, _ in sent:
            merge(entries)
        parts["merge"] = time.perf_counter() - t
    t = time.perf_counter()
    result = pipeline.run(chunks, query=question)
    parts["run"] = time.perf_counter() - t
    return time.perf_counter() - started, parts, _digest(result)


def run(config: AnalysisWorkersConfig, progress: bool = True) -> dict[str, Any]:
    load_at_start = os.getloadavg()
    requests = budgeted_requests(config.columns, config.split, config.limit, config.seed, config.ratio)
    warm_up((config.scorer,), requests)
    arms = (0, *config.workers)
    pools = {n: _start(n) for n in config.workers}
    best: dict[int, list[float]] = {n: [float("inf")] * len(requests) for n in arms}
    best_parts: dict[int, list[dict[str, float]]] = {n: [{} for _ in requests] for n in arms}
    differ = {n: 0 for n in config.workers}
    started = time.perf_counter()
    try:
        for round_ in range(config.rounds):
            for k, (request, budget) in enumerate(requests):
                order = arms if (k + round_) % 2 == 0 else tuple(reversed(arms))
                digests: dict[int, str] = {}
                for n in order:
                    wall, parts, digests[n] = measure(pools.get(n), n, config.scorer, request.question,
                                                      request.passages, budget)
                    if wall < best[n][k]:
                        best[n][k], best_parts[n][k] = wall, parts
                if round_ == 0:
                    for n in config.workers:
                        differ[n] += digests[n] != digests[0]
            if progress:
                print(f"  round {round_ + 1}/{config.rounds}, {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        for pool in pools.values():
            pool.shutdown()
    base = percentile(best[0], 50)
    by_arm: dict[str, Any] = {}
    for n in arms:
        walls = [w * 1000 for w in best[n]]
        by_arm[str(n)] = {
            "workers": n, "cold_p50_ms": percentile(walls, 50), "cold_mean_ms": mean(walls),
            "ratio_p50_to_in_process": percentile(best[n], 50) / base,
            "parts_mean_ms": {p: mean([d.get(p, 0.0) * 1000 for d in best_parts[n]]) for p in PARTS},
            "outputs_differing": differ.get(n, 0)}
    from ragtrim.vectors.store import default_store_spec

    return {"benchmark": "analysis_workers", "config": config.__dict__, "requests": len(requests),
            "cpu_count": os.cpu_count(), "state": "cold: in-process caches cleared before each request, each "
            "request's fastest of the rounds", "vector_store": default_store_spec()[0],
            "load_average_at_start": list(load_at_start), "by_arm": by_arm,
            "measure_wall_s": time.perf_counter() - started}


def report(result: dict[str, Any]) -> str:
    head = (f"{result['config']['scorer']}, {result['requests']} requests, {result['cpu_count']} cores, each "
            "request's fastest round, cold")
    lines = [head]
    for arm in result["by_arm"].values():
        parts = ", ".join(f"{p} {v:.2f}" for p, v in arm["parts_mean_ms"].items() if v)
        lines.append(f"  {arm['workers']} workers: p50 {arm['cold_p50_ms']:.2f} ms (x{arm['ratio_p50_to_in_process']:.3f}),"
                     f" mean {arm['cold_mean_ms']:.2f} ms; parts (mean ms) {parts}; "
                     f"outputs differing {arm['outputs_differing']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    defaults = AnalysisWorkersConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default=",".join(map(str, defaults.workers)),
                        help="worker counts to try beside the trim as it is (comma-separated)")
    parser.add_argument("--scorer", default=defaults.scorer)
    parser.add_argument("--columns", default=",".join(defaults.columns))
    parser.add_argument("--split", default=defaults.split, choices=("dev", "heldout"))
    parser.add_argument("--limit", type=int, default=defaults.limit, help="requests per column")
    parser.add_argument("--ratio", type=int, default=defaults.ratio)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/pipeline/analysis_workers.json")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        workers = tuple(int(x) for x in args.workers.split(",") if x)
    except ValueError:
        parser.error(f"--workers must be comma-separated counts, got {args.workers!r}")
    split: Split = "dev" if args.split == "dev" else "heldout"
    config = AnalysisWorkersConfig(workers=workers, scorer=args.scorer,
                                   columns=tuple(x for x in args.columns.split(",") if x), split=split,
                                   limit=args.limit, ratio=args.ratio, rounds=args.rounds)
    result = run(config, progress=not args.no_progress)
    write_and_report(__spec__.name, argv, args.output, result, report=report(result), packages=PACKAGES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
