"""Hostile bounds: memory, GIL holds, work and outcome of each hostile class of dedup, the prefix, index and the store.

Each case of ``ragtrim_bench.pipeline.hostile_bound_cases`` runs in a fresh Python process: its inputs are built first,
then the call runs while a thread of the same process sleeps 1 ms at a time and records how late it wakes (a C call
that holds the GIL makes it late by as long as it holds it: the ``/health/liveness`` stall of a gateway that trims in
a worker thread). Recorded per case: wall time, RSS growth over the call, the longest and the 99th-percentile wake-up
delay, and the case's own outcome (chunks kept, characters tokenized, largest WAL, exit codes, ...). ``baseline``
measures the same delays around a pure-Python loop, which gives the GIL up every 5 ms: what the host's load alone
adds. Targets: RSS growth <= 100 MB and the longest delay <= 50 ms above the baseline's.
Run: ragtrim-bench pipeline hostile_bounds [--case NAME] [--scale F]  -> benchmarks/results/pipeline/hostile_bounds.json
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragtrim._util.stats import percentile
from ragtrim._util.table import format_table
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.pipeline.hostile_bound_cases import CASES, BoundCase

MAX_RSS_GROWTH_MB = 100.0
MAX_EXTRA_HOLD_MS = 50.0
BASELINE_S = 2.0


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def reset_peak_rss() -> None:
    """Start VmHWM again from the current RSS (Linux: ``5`` to ``/proc/self/clear_refs``), so the inputs' own
    building leaves no peak behind."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_mb() -> float:
    """The process's peak RSS since the last ``reset_peak_rss`` (VmHWM), MB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1000
    return float("nan")


def delays_during(call: Callable[[], Any]) -> tuple[Any, float, list[float]]:
    """``call()``'s result, its wall time (s), and how late (ms) a 1 ms sleeper thread woke up while it ran."""
    late: list[float] = []
    done = threading.Event()

    def sleeper() -> None:
        while not done.is_set():
            before = time.perf_counter()
            time.sleep(0.001)
            late.append(max(0.0, (time.perf_counter() - before) * 1000 - 1.0))

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    time.sleep(0.01)
    started = time.perf_counter()
    try:
        result = call()
    finally:
        wall = time.perf_counter() - started
        done.set()
        thread.join()
    return result, wall, late


def _busy(seconds: float) -> int:
    n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n


def measure_in_child(case: BoundCase, scale: float) -> dict[str, Any]:
    """The measured run of ``case`` in this process (called in the child)."""
    with tempfile.TemporaryDirectory() as tmp:
        n = max(1, int(case.n * scale))
        state = case.prepare(Path(tmp), n)
        gc.collect()
        reset_peak_rss()
        before = rss_mb()
        outcome, wall, late = delays_during(lambda: case.run(state))
        growth = max(rss_mb(), peak_rss_mb()) - before
    record: dict[str, Any] = {"case": case.name, "unit": case.unit, "n": n, "wall_s": round(wall, 3),
                              "before_the_fix": case.before}
    if case.in_process:
        record.update(rss_growth_mb=round(max(0.0, growth), 1), longest_hold_ms=round(max(late, default=0.0), 1),
                      p99_hold_ms=round(percentile(late, 99), 1) if late else 0.0)
    record.update(outcome)
    return record


def baseline() -> dict[str, Any]:
    _, wall, late = delays_during(lambda: _busy(BASELINE_S))
    return {"case": "baseline", "unit": "s", "n": BASELINE_S, "wall_s": round(wall, 3), "rss_growth_mb": 0.0,
            "longest_hold_ms": round(max(late, default=0.0), 1), "p99_hold_ms": round(percentile(late, 99), 1),
            "before_the_fix": "a pure-Python loop: the host's own delays"}


def run_case(name: str, scale: float) -> dict[str, Any]:
    """``name`` measured in a fresh Python process."""
    command = [sys.executable, "-m", "ragtrim_bench.pipeline.hostile_bounds", "--child", name, "--scale", str(scale)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"case": name, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    record: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return record


def judge(rows: list[dict[str, Any]]) -> None:
    """Mark each in-process row against the targets (the longest delay above the baseline's)."""
    base = next((r["longest_hold_ms"] for r in rows if r["case"] == "baseline"), 0.0)
    for r in rows:
        if r["case"] != "baseline" and "rss_growth_mb" in r:
            r["within_bound"] = (r["rss_growth_mb"] <= MAX_RSS_GROWTH_MB
                                 and r["longest_hold_ms"] <= base + MAX_EXTRA_HOLD_MS)


def report(rows: list[dict[str, Any]]) -> None:
    print(format_table(rows, [("case", "case"), ("n", "n"), ("wall_s", "s"), ("rss_growth_mb", "RSS +MB"),
                              ("longest_hold_ms", "longest hold ms"), ("p99_hold_ms", "p99 ms"),
                              ("within_bound", "in bound")]))
    for r in rows:
        extra = {k: v for k, v in r.items() if k not in {"case", "unit", "n", "wall_s", "rss_growth_mb",
                                                         "longest_hold_ms", "p99_hold_ms", "within_bound",
                                                         "before_the_fix"}}
        if extra:
            print(f"{r['case']}: {json.dumps(extra, ensure_ascii=False)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument("--scale", type=float, default=1.0, help="input sizes times this (default 1)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/pipeline/hostile_bounds.json")
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}
    if args.child is not None:
        print(json.dumps(measure_in_child(by_name[args.child], args.scale)))
        return 0
    names = args.case or list(by_name)
    rows = [baseline(), *(run_case(name, args.scale) for name in names)]
    judge(rows)
    out = write_result(args.output or result_path(__spec__.name), rows, command=command_line(__spec__.name, argv))
    report(rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
