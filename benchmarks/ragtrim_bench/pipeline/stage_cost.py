"""Where a cold trim's time goes: wall and CPU time per stage, prefetch and model pass, on quality-matrix requests.

  ragtrim-bench pipeline stage_cost [--scorers auto,bm25,fast] [--columns nq-title,...] [--limit N] [--ratio 4]
                                    [--warm]

Each request runs through ``default_pipeline`` (what ``trim()`` builds) cold: ``ragtrim.caches.clear_caches()`` just
before it, models loaded and warmed once before any timing. With ``--warm`` each cold trim is followed at once by a
warm one of the same request, caches kept: every passage's sentences, tokens, counts and embeddings are then found in
ragtrim's caches, so the warm figure is what the trim costs beyond analysing each passage's text, the floor that
faster text analysis (native code, say) could at most bring a cold trim down to. The pipeline is instrumented from
outside (its stages' ``prefetch`` and ``run``, its input and output counting, its final budget guard, and the
background model pass of every embedding scorer), so the code measured is the code users run. Per phase: wall time and
CPU time of the thread that ran it (``time.thread_time``); per request: wall time and CPU time of the whole process
(both threads). CPU time is what to compare on a busy machine: it moves little with load, while wall time waits for
the other processes. Scorers take turns per request, so load falls on all alike.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim_bench.common.results import write_and_report
from ragtrim_bench.common.stats import mean, percentile
from ragtrim_bench.relevance.columns import COLUMNS, Request, Split, build_column

MODEL_PASS = "model pass (background)"
COUNT_INPUT = "count input"
RECOUNT = "recount after stages"
FINAL_GUARD = "final budget guard"
OTHER = "other (coercion, checks, reports)"
PACKAGES = ("ragtrim", "numpy", "tiktoken", "tokenizers", "onnxruntime", "torch")


@dataclass(frozen=True)
class StageCostConfig:
    scorers: tuple[str, ...] = ("auto", "bm25", "fast")
    columns: tuple[str, ...] = ("nq-title", "nq-notitle", "squad-article", "korquad", "kv")
    split: Split = "heldout"
    limit: int = 50
    ratio: int = 4
    seed: int = 0
    warm: bool = False
    """Also time each request warm, right after its cold trim (see the module docstring)."""

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ConfigError(f"limit must be >= 1, got {self.limit}")
        if self.ratio < 1:
            raise ConfigError(f"ratio must be >= 1, got {self.ratio}")
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown or not self.columns:
            raise ConfigError(f"unknown columns {unknown}; choose from {list(COLUMNS)}")
        if not self.scorers:
            raise ConfigError("scorers must name at least one scorer")


class Phases:
    """Wall and thread-CPU seconds per phase of one request (the background model pass writes from its thread)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, phase: str, wall_s: float, cpu_s: float) -> None:
        with self._lock:
            self.wall[phase] = self.wall.get(phase, 0.0) + wall_s
            self.cpu[phase] = self.cpu.get(phase, 0.0) + cpu_s

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        w, c = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - w, time.thread_time() - c)


def _timed_method(phases: Callable[[], Phases | None], phase: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        current = phases()
        if current is None:
            return method(*args, **kwargs)
        with current.timed(phase):
            return method(*args, **kwargs)

    return wrapped


@contextlib.contextmanager
def instrumented(pipeline: Any, phases: Phases) -> Iterator[None]:
    """Time ``pipeline``'s phases into ``phases`` while the block runs (everything is restored after)."""
    import ragtrim.pipeline as pipeline_module
    from ragtrim.scoring.embedding import CachedEmbedder
    from ragtrim.text.counting import PendingCounts

    def get() -> Phases:
        return phases

    calls = {"counts": 0}
    original_counts = pipeline_module._verified_counts
    original_fill = CachedEmbedder._fill
    original_guard = type(pipeline)._final_budget_guard
    original_result = PendingCounts.result

    def counts(*args: Any, **kwargs: Any) -> Any:
        calls["counts"] += 1
        with phases.timed(COUNT_INPUT if calls["counts"] == 1 else RECOUNT):
            return original_counts(*args, **kwargs)

    patched: list[tuple[Any, str]] = []
    for stage in pipeline.stages:
        for name, phase in (("prefetch", f"prefetch: {stage.name}"), ("run", stage.name)):
            object.__setattr__(stage, name, _timed_method(get, phase, getattr(stage, name)))
            patched.append((stage, name))
    pipeline_module._verified_counts = counts
    CachedEmbedder._fill = _timed_method(get, MODEL_PASS, original_fill)  # type: ignore[method-assign]
    type(pipeline)._final_budget_guard = _timed_method(get, FINAL_GUARD, original_guard)
    # the wait for the input's counts from the counting threads is part of counting the input (the pipeline asks
    # for them as it calls _verified_counts, so that wrapper alone would leave the wait to OTHER)
    PendingCounts.result = _timed_method(get, COUNT_INPUT, original_result)  # type: ignore[method-assign]
    try:
        yield
    finally:
        PendingCounts.result = original_result  # type: ignore[method-assign]
        pipeline_module._verified_counts = original_counts
        CachedEmbedder._fill = original_fill  # type: ignore[method-assign]
        type(pipeline)._final_budget_guard = original_guard
        for stage, name in patched:
            object.__delattr__(stage, name)


@dataclass(frozen=True)
class Measured:
    scorer: str
    column: str
    request_id: str
    wall_ms: float
    cpu_ms: float
    phase_wall_ms: dict[str, float]
    phase_cpu_ms: dict[str, float]


def drain_background() -> None:
    """Wait until ragtrim's background thread is idle (a prefetch the trim did not need may still run)."""
    from ragtrim._util.background import background_busy

    while background_busy():
        time.sleep(0.001)


def measure_one(scorer: str, request: Request, budget: int, *, cold: bool = True) -> Measured:
    from ragtrim.api import default_pipeline
    from ragtrim.caches import clear_caches

    chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate(request.passages)]
    drain_background()
    if cold:
        clear_caches()
    pipeline = default_pipeline(budget=budget, scorer=scorer)  # type: ignore[arg-type]
    phases = Phases()
    with instrumented(pipeline, phases):
        w, c = time.perf_counter(), time.process_time()
        pipeline.run(chunks, query=request.question)
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        drain_background()  # a model pass left running belongs to this request's CPU time
        cpu = max(cpu, time.process_time() - c) if phases.cpu.get(MODEL_PASS) else cpu
    main_thread = sum(v for k, v in phases.wall.items() if k != MODEL_PASS)
    phase_wall = {k: v * 1000 for k, v in phases.wall.items()}
    phase_cpu = {k: v * 1000 for k, v in phases.cpu.items()}
    phase_wall[OTHER] = max(0.0, wall - main_thread) * 1000
    return Measured(scorer, request.column, request.id, wall * 1000, cpu * 1000, phase_wall, phase_cpu)


def phase_table(rows: Sequence[Measured]) -> list[dict[str, Any]]:
    """One record per phase: mean and p50 wall ms, mean CPU ms (phases a request did not enter count 0)."""
    names: dict[str, None] = {}
    for r in rows:
        names.update(dict.fromkeys(r.phase_wall_ms))
    out = []
    for name in names:
        walls = [r.phase_wall_ms.get(name, 0.0) for r in rows]
        cpus = [r.phase_cpu_ms.get(name, 0.0) for r in rows]
        out.append({"phase": name, "mean_wall_ms": mean(walls), "p50_wall_ms": percentile(walls, 50),
                    "mean_cpu_ms": mean(cpus) if name != OTHER else None})
    return out


def summary(rows: Sequence[Measured], state: str = "cold") -> dict[str, Any]:
    """Percentiles of ``rows`` under keys that name their ``state`` (``cold_p50_ms``, ``warm_p50_ms``)."""
    walls = [r.wall_ms for r in rows]
    cpus = [r.cpu_ms for r in rows]
    return {"n": len(rows), f"{state}_p50_ms": percentile(walls, 50), f"{state}_p99_ms": percentile(walls, 99),
            f"{state}_mean_ms": mean(walls), f"{state}_p50_cpu_ms": percentile(cpus, 50),
            f"{state}_mean_cpu_ms": mean(cpus), "phases": phase_table(rows)}


def budgeted_requests(columns: Sequence[str], split: Split, limit: int, seed: int,
                      ratio: int) -> list[tuple[Request, int]]:
    """Each column's requests with the budget the quality matrix gives them at ``ratio``."""
    from ragtrim import get_counter
    from ragtrim_bench.relevance.matrix import budget_for, context_tokens

    counter = get_counter(None)
    return [(r, budget_for(context_tokens(r, counter), ratio))
            for c in columns for r in build_column(c, split, limit=limit, seed=seed)]


def warm_up(scorers: Sequence[str], requests: Sequence[tuple[Request, int]]) -> None:
    """Load and warm every scorer's models once, on each column's first request (outside any timing)."""
    from ragtrim.api import default_pipeline

    for scorer in scorers:
        for column in dict.fromkeys(r.column for r, _ in requests):
            request, budget = next((r, b) for r, b in requests if r.column == column)
            pipe = default_pipeline(budget=budget, scorer=scorer)  # type: ignore[arg-type]
            pipe.warm_up()
            pipe.run([{"text": t, "id": f"p{i}"} for i, t in enumerate(request.passages)], query=request.question)


def run(config: StageCostConfig, progress: bool = True) -> dict[str, Any]:
    load_at_start = os.getloadavg()
    requests = budgeted_requests(config.columns, config.split, config.limit, config.seed, config.ratio)
    warm_up(config.scorers, requests)
    measured: list[Measured] = []
    warm: list[Measured] = []
    started = time.perf_counter()
    for k, (request, budget) in enumerate(requests):
        order = config.scorers if k % 2 == 0 else tuple(reversed(config.scorers))
        for s in order:
            measured.append(measure_one(s, request, budget))
            if config.warm:
                warm.append(measure_one(s, request, budget, cold=False))
        if progress and (k + 1) % 25 == 0:
            print(f"  {k + 1}/{len(requests)} requests, {time.perf_counter() - started:.0f} s", flush=True)
    by_scorer: dict[str, Any] = {}
    for scorer in config.scorers:
        rows = [m for m in measured if m.scorer == scorer]
        by_scorer[scorer] = {"all": summary(rows),
                             "by_column": {c: summary([m for m in rows if m.column == c]) for c in config.columns}}
        if config.warm:
            by_scorer[scorer]["warm"] = summary([m for m in warm if m.scorer == scorer], "warm")
    from ragtrim._util.background import SWITCH_INTERVAL_S
    from ragtrim.scoring.auto import choose
    from ragtrim.vectors.store import default_store_spec

    return {"benchmark": "stage_cost", "config": config.__dict__, "auto": choose().to_dict(),
            "state": "cold: in-process caches cleared before each request (models loaded and warmed)"
                     + ("; warm: the same request again at once, caches kept" if config.warm else ""),
            "vector_store": default_store_spec()[0], "load_average_at_start": list(load_at_start),
            "switch_interval_s": SWITCH_INTERVAL_S, "by_scorer": by_scorer,
            "measure_wall_s": time.perf_counter() - started}


def report(result: dict[str, Any]) -> str:
    lines = []
    for scorer, body in result["by_scorer"].items():
        s = body["all"]
        lines.append(f"{scorer}: n={s['n']} cold p50 {s['cold_p50_ms']:.1f} ms, p99 {s['cold_p99_ms']:.1f} ms, "
                     f"CPU p50 {s['cold_p50_cpu_ms']:.1f} ms (mean {s['cold_mean_cpu_ms']:.1f})")
        lines.append(f"  {'phase':40s} {'mean wall':>10s} {'p50 wall':>10s} {'mean CPU':>10s}")
        for p in s["phases"]:
            cpu = "" if p["mean_cpu_ms"] is None else f"{p['mean_cpu_ms']:10.2f}"
            lines.append(f"  {p['phase']:40s} {p['mean_wall_ms']:10.2f} {p['p50_wall_ms']:10.2f} {cpu:>10s}")
        per_column = ", ".join(f"{c} {v['cold_p50_ms']:.1f}/{v['cold_p50_cpu_ms']:.1f}"
                               for c, v in body["by_column"].items())
        lines.append(f"  p50 wall/CPU ms by column: {per_column}")
        if "warm" in body:
            w, by_phase = body["warm"], {p["phase"]: p["mean_wall_ms"] for p in s["phases"]}
            lines.append(f"  warm (each request again at once, caches kept): p50 {w['warm_p50_ms']:.1f} ms, p99 "
                         f"{w['warm_p99_ms']:.1f} ms, CPU p50 {w['warm_p50_cpu_ms']:.1f} ms, "
                         f"x{w['warm_p50_ms'] / s['cold_p50_ms']:.2f} of cold at p50")
            lines.append(f"  {'phase':40s} {'cold mean':>10s} {'warm mean':>10s}")
            for p in w["phases"]:
                lines.append(f"  {p['phase']:40s} {by_phase.get(p['phase'], 0.0):10.2f} {p['mean_wall_ms']:10.2f}")
    return "\n".join(lines)


def use_count_threads(threads: int) -> None:
    """Count the input on ``threads`` threads from now on in this process (1: in the caller's thread), whatever the
    host's cores (``ragtrim._util.background.count_workers``)."""
    from ragtrim._util import background
    from ragtrim.text import counting

    background.count_workers = lambda: threads
    counting.count_workers = background.count_workers  # type: ignore[attr-defined]  # its own name, read per trim


def add_count_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--count-threads N``: the input counted on N threads whatever this host's cores (``apply_count_threads``)."""
    parser.add_argument("--count-threads", type=int, default=None,
                        help="threads that count the input beside the caller's, whatever this host's cores "
                             "(default: one per core, at most 4); 1 counts it in the caller's thread")


def apply_count_threads(parser: argparse.ArgumentParser, threads: int | None) -> None:
    """``--count-threads``'s value: a usage error below 1, ``use_count_threads`` otherwise (None: as the host has)."""
    if threads is None:
        return
    if threads < 1:
        parser.error(f"--count-threads must be >= 1, got {threads}")
    use_count_threads(threads)


def _names(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def main(argv: Sequence[str] | None = None) -> int:
    defaults = StageCostConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scorers", default=",".join(defaults.scorers))
    parser.add_argument("--columns", default=",".join(defaults.columns))
    parser.add_argument("--split", default=defaults.split, choices=("dev", "heldout"))
    parser.add_argument("--limit", type=int, default=defaults.limit, help="requests per column")
    parser.add_argument("--ratio", type=int, default=defaults.ratio)
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/pipeline/stage_cost.json")
    parser.add_argument("--switch-interval-s", type=float, default=None,
                        help="the interpreter's switch interval while a model pass is in flight "
                             "(ragtrim._util.background.SWITCH_INTERVAL_S; 0.005, the interpreter's default, turns "
                             "the shorter interval off)")
    add_count_threads_argument(parser)
    parser.add_argument("--warm", action="store_true",
                        help="also time each request warm, at once after its cold trim, caches kept: the cost "
                             "beyond analysing each passage's text")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    apply_count_threads(parser, args.count_threads)
    from ragtrim._util import background

    if args.switch_interval_s is not None:
        background.SWITCH_INTERVAL_S = args.switch_interval_s
    split: Split = "dev" if args.split == "dev" else "heldout"
    config = StageCostConfig(scorers=_names(args.scorers), columns=_names(args.columns), split=split,
                             limit=args.limit, ratio=args.ratio, warm=args.warm)
    result = run(config, progress=not args.no_progress)
    write_and_report(__spec__.name, argv, args.output, result, report=report(result), packages=PACKAGES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
