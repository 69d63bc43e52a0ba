"""Hostile growth: every case that was once super-linear timed at n and 4n; linear code gives about 4x, quadratic 16x.

The inputs come from ``ragtrim_bench.pipeline.hostile_inputs`` (runs of dots, quoted prose, fences, digit-led sentences for
compression, deep HTML with unclosed scripts or comments, a stream of similar chunks, a long conversation), plus the
CLI repro (``ragtrim trim`` of a run of dots). Each time is the best of ``repeats`` runs after one warm-up at the
small size; the acceptance bound is a ratio of at most 8.
Run: ragtrim-bench pipeline hostile_growth  -> benchmarks/results/pipeline/hostile_growth.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim._util.table import format_table
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.pipeline.hostile_inputs import CASES, HostileCase, dots

MAX_RATIO = 8.0


@dataclass(frozen=True)
class GrowthConfig:
    repeats: int = 3
    factor: int = 4
    cli_dots: int = 40_000
    cases: tuple[str, ...] = tuple(c.name for c in CASES)


def best_time_s(call: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``call``, in seconds (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def growth_record(name: str, unit: str, n: int, factor: int, time_n_s: float, time_large_s: float,
                  issue_report: str) -> dict[str, Any]:
    """One flat result row."""
    ratio = time_large_s / time_n_s if time_n_s > 0 else float("inf")
    return {"case": name, "unit": unit, "n": n, "factor": factor, "time_n_s": time_n_s,
            "time_4n_s": time_large_s, "ratio": ratio, "max_ratio": MAX_RATIO, "within_bound": ratio <= MAX_RATIO,
            "issue_report_before_fix": issue_report}


def measure_case(case: HostileCase, cfg: GrowthConfig) -> dict[str, Any]:
    small, large = case.build(case.n), case.build(cfg.factor * case.n)
    small()  # warm-up: imports, tokenizer load, regex compilation
    time_n = best_time_s(small, cfg.repeats)
    time_large = best_time_s(large, cfg.repeats)
    return growth_record(case.name, case.unit, case.n, cfg.factor, time_n, time_large, case.issue_report)


def _cli_call(path: Path) -> Callable[[], object]:
    command = [sys.executable, "-m", "ragtrim", "trim", str(path), "-q", "How tall is the tower?", "-b", "100",
               "--scorer", "bm25"]
    return lambda: subprocess.run(command, check=True, capture_output=True)


def measure_cli(cfg: GrowthConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        calls = []
        for n in (cfg.cli_dots, cfg.factor * cfg.cli_dots):
            path = Path(tmp) / f"dots{n}.json"
            path.write_text(json.dumps([dots(n)]), encoding="utf-8")
            calls.append(_cli_call(path))
        calls[0]()
        time_n = best_time_s(calls[0], cfg.repeats)
        time_large = best_time_s(calls[1], cfg.repeats)
    record = growth_record("cli_trim_dots", "chars", cfg.cli_dots, cfg.factor, time_n, time_large,
                           "40k dots 13 s")
    record["note"] = "wall time of the whole command, interpreter start and imports included"
    return record


def measure(cfg: GrowthConfig) -> list[dict[str, Any]]:
    rows = [measure_case(case, cfg) for case in CASES if case.name in cfg.cases]
    rows.append(measure_cli(cfg))
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    print(format_table(rows, [("case", "case"), ("n", "n"), ("unit", "unit"), ("time_n_s", "n: s"),
                              ("time_4n_s", "4n: s"), ("ratio", "ratio"), ("within_bound", "<= 8x"),
                              ("issue_report_before_fix", "before the fix")]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=GrowthConfig.repeats)
    parser.add_argument("--case", action="append", help="run only these cases (the CLI case always runs)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/pipeline/hostile_growth.json")
    args = parser.parse_args(argv)
    cfg = GrowthConfig(repeats=args.repeats, cases=tuple(args.case) if args.case else GrowthConfig.cases)
    rows = measure(cfg)
    out = write_result(args.output or result_path(__spec__.name), rows, command=command_line(__spec__.name, argv))
    report(rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
