"""``ragtrim audit`` at scale: wall time and peak memory on the synthetic 100k-request log (``audit synth``).

The audit runs as its own process (``python -m ragtrim audit``), so its peak RSS is the child's (getrusage); the
breakdown covers every request (no sampling), the savings run trims a uniform sample (``--sample``).
Targets: <= 60 s and <= 500 MB on 2 cores.
Run from the repository root (the planner reads tests/fixtures/configs/): ragtrim-bench audit scale
  -> benchmarks/results/audit/scale.json (+ the report in benchmarks/results/audit/synth-100k/)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.audit.synth import DEFAULT_OUT, SynthConfig, write_log
from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, results_root, shown_path, write_result

MODEL_CONFIG = Path("tests") / "fixtures" / "configs" / "gemma-3-12b-it.json"
"""The Gemma 3 12B config the planner reads, relative to the working directory (the repository root)."""


def planner_args() -> tuple[str, ...]:
    """The planner options of every committed audit (docs/audit.md): the Gemma 3 12B config on one H200 and GPU run
    4's TTFT curve."""
    return ("--model-config", str(MODEL_CONFIG), "--gpu-mem-gib", "141",
            "--ttft-curve", shown_path(results_root() / "gpu" / "summary.json"), "--ttft-config", "12b_graphs_1024")


@dataclass(frozen=True, slots=True)
class ScaleConfig:
    log: Path
    report_dir: Path
    requests: int = 100_000
    seed: int = 0
    sample: int = 200
    max_seconds: float = 60.0
    max_rss_mib: float = 500.0


def run(cfg: ScaleConfig) -> dict[str, Any]:
    if not cfg.log.exists():
        print(f"generating {cfg.requests:,} requests into {cfg.log} ...", flush=True)
        write_log(SynthConfig(requests=cfg.requests, seed=cfg.seed), cfg.log)
    cmd = [sys.executable, "-m", "ragtrim", "audit", shown_path(cfg.log), "--out", shown_path(cfg.report_dir),
           "--sample", str(cfg.sample), *planner_args()]
    load_before = load_average()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall_s = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"ragtrim audit failed ({done.returncode}): {done.stderr.strip()}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_mib = usage.ru_maxrss / 1024  # Linux: KiB
    cpu_s = usage.ru_utime + usage.ru_stime  # independent of other load on the machine, unlike wall time
    report = json.loads((cfg.report_dir / "audit.json").read_text(encoding="utf-8"))
    b = report["breakdown"]
    return {
        "benchmark": "audit_scale",
        "config": {k: shown_path(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "audit_command": " ".join(["ragtrim", *cmd[3:]]),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "log_bytes_gzip": cfg.log.stat().st_size,
        "requests": b["requests"],
        "prompt_tokens": b["prompt_tokens"],
        "wall_s": round(wall_s, 2),
        "cpu_s": round(cpu_s, 2),
        "audit_seconds": report["run"]["seconds"],
        "breakdown_seconds": report["run"]["breakdown_seconds"],
        "savings_seconds": report["run"]["savings_seconds"],
        "peak_rss_mib": round(peak_mib, 1),
        "requests_per_s": round(b["requests"] / wall_s, 1),
        "sampled_for_savings": report["savings"]["sampled_requests"],
        "breakdown_sampled": False,
        "targets": {"wall_s_le_60": wall_s <= cfg.max_seconds, "peak_rss_mib_le_500": peak_mib <= cfg.max_rss_mib},
        "stdout": done.stdout.strip().splitlines(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--log", type=Path, default=None, help="default: .cache/audit/synth-<N>k.jsonl.gz")
    parser.add_argument("--report-dir", type=Path, default=None,
                        help="the audit report's folder (default: results/audit/synth-<N>k)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/audit/scale.json")
    args = parser.parse_args(argv)
    tag = f"synth-{args.requests // 1000}k"
    cfg = ScaleConfig(log=args.log or DEFAULT_OUT / f"{tag}.jsonl.gz",
                      report_dir=args.report_dir or results_root() / "audit" / tag,
                      requests=args.requests, sample=args.sample)
    result = run(cfg)
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    print(f"{result['requests']:,} requests, {result['prompt_tokens']:,} tokens: {result['wall_s']} s wall "
          f"({result['cpu_s']} CPU-s, load average before {result['load_average_before'][0]:.1f}), "
          f"peak {result['peak_rss_mib']} MiB; targets {result['targets']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
