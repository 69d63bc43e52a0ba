"""``ragtrim audit`` at scale: wall time and peak memory on the synthetic 100k-request log (benchmarks/audit_synth.py).

The audit runs as its own process (``python -m ragtrim audit``), so its peak RSS is the child's (getrusage); the
breakdown covers every request (no sampling), the savings run trims a uniform sample (``--sample``).
Targets (issue 17): <= 60 s and <= 500 MB on 2 cores.
Run: .venv/bin/python benchmarks/audit_scale.py  -> benchmarks/results/audit_scale.json (+ the report in
benchmarks/results/audit/synth-100k/)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from audit_synth import (  # benchmarks/ is on the path of a script run from it
    DEFAULT_OUT,
    SynthConfig,
    write_log,
)

RESULTS = REPO / "benchmarks" / "results"


@dataclass(frozen=True, slots=True)
class ScaleConfig:
    requests: int = 100_000
    seed: int = 0
    sample: int = 200
    log: Path = DEFAULT_OUT / "synth-100k.jsonl.gz"
    report_dir: Path = RESULTS / "audit" / "synth-100k"
    output: Path = RESULTS / "audit_scale.json"
    max_seconds: float = 60.0
    max_rss_mib: float = 500.0


def run(cfg: ScaleConfig) -> dict[str, Any]:
    if not cfg.log.exists():
        print(f"generating {cfg.requests:,} requests into {cfg.log} ...", flush=True)
        write_log(SynthConfig(requests=cfg.requests, seed=cfg.seed), cfg.log)
    cmd = [sys.executable, "-m", "ragtrim", "audit", str(cfg.log.relative_to(REPO) if cfg.log.is_relative_to(REPO)
                                                         else cfg.log),
           "--out", str(cfg.report_dir.relative_to(REPO)), "--sample", str(cfg.sample),
           "--model-config", "tests/fixtures/configs/gemma-3-12b-it.json", "--gpu-mem-gib", "141",
           "--ttft-curve", "benchmarks/results/gpu/summary.json", "--ttft-config", "12b_graphs_1024"]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
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
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "command": " ".join(cmd[1:]),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_before": load_before,
                 "loadavg_after": os.getloadavg()},
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


def main() -> int:
    d = ScaleConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=d.requests)
    parser.add_argument("--sample", type=int, default=d.sample)
    parser.add_argument("--log", type=Path, default=None, help="default: .cache/audit/synth-<N>k.jsonl.gz")
    parser.add_argument("-o", "--output", type=Path, default=d.output)
    args = parser.parse_args()
    log = args.log or DEFAULT_OUT / f"synth-{args.requests // 1000}k.jsonl.gz"
    cfg = ScaleConfig(requests=args.requests, sample=args.sample, log=log.resolve(), output=args.output)
    result = run(cfg)
    cfg.output.parent.mkdir(parents=True, exist_ok=True)
    cfg.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{result['requests']:,} requests, {result['prompt_tokens']:,} tokens: {result['wall_s']} s wall "
          f"({result['cpu_s']} CPU-s, load average before {result['host']['loadavg_before'][0]:.1f}), "
          f"peak {result['peak_rss_mib']} MiB; targets {result['targets']}")
    print(f"wrote {cfg.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
