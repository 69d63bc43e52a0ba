"""What learning the upstream's prefill cost costs the gateway per request: ``AutoTrim.observe_request``, which every
gateway runs on its event loop as each request finishes, and ``PrefillModel.per_token_ms``, which ``trim.scorer =
"auto"`` reads in a worker thread before each trim.

Streamed requests whose prompt sizes spread evenly over ``--octaves`` octaves from 64 tokens (a gateway in front of
varied traffic keeps ``BAND_KEEP`` requests in each of ``BANDS_PER_OCTAVE`` bands per octave, so the Theil-Sen fit
grows with the spread), each followed by one read as ``auto`` makes it. Anything the event loop spends here delays
every other request in flight on it.
Run: ragtrim-bench serve learn_cost [--requests 2000] [--octaves 8] -> benchmarks/results/serve/learn_cost.json
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import summarize_ms


@dataclass(frozen=True, slots=True)
class LearnCostConfig:
    requests: int = 2000
    octaves: float = 8.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.requests < 1 or self.octaves <= 0:
            raise ValueError(f"requests must be >= 1 and octaves > 0, got {self.requests} and {self.octaves}")


def measure(config: LearnCostConfig) -> dict[str, Any]:
    from prometheus_client import CollectorRegistry

    from ragtrim.serve.autotrim import AutoTrim

    rng = random.Random(config.seed)
    auto = AutoTrim(registry=CollectorRegistry())
    on_loop: list[float] = []
    reads: list[float] = []
    for _ in range(config.requests):
        tokens = int(64 * 2 ** rng.uniform(0, config.octaves))
        prepared = SimpleNamespace(stream=True, prompt_tokens=tokens)
        ttft_ms = 5.0 + 0.037 * tokens + rng.expovariate(0.2)
        started = time.perf_counter()
        auto.observe_request(prepared, ttft_ms, "ok")
        on_loop.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        auto.prefill.per_token_ms()
        reads.append((time.perf_counter() - started) * 1000)
    return {"config": asdict(config), "kept_observations": auto.prefill.observations,
            "learned_prefill_ms_per_token": auto.prefill.per_token_ms(),
            "observe_request_on_event_loop": summarize_ms(on_loop, "call"),
            "per_token_ms_in_worker": summarize_ms(reads, "call")}


def report(result: dict[str, Any]) -> str:
    lines = ["| call | p50 ms | p99 ms | max ms |", "| --- | --- | --- | --- |"]
    for key in ("observe_request_on_event_loop", "per_token_ms_in_worker"):
        s = result[key]
        lines.append(f"| {key} | {s['p50_call_ms']:.3f} | {s['p99_call_ms']:.3f} | {s['max_call_ms']:.3f} |")
    lines.append(f"kept {result['kept_observations']} observations; learned "
                 f"{result['learned_prefill_ms_per_token']:.4f} ms per token (0.037 set)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragtrim-bench serve learn_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--octaves", type=float, default=8.0, help="prompt sizes spread over 64 * 2**[0, octaves] tokens")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)
    config = LearnCostConfig(requests=args.requests, octaves=args.octaves, seed=args.seed)
    result = measure(config) | {"load_average_end": load_average()}
    out = Path(args.output) if args.output else result_path(__spec__.name)
    write_result(out, result, command=command_line(__spec__.name, argv), packages=["numpy", "prometheus_client"])
    print(report(result))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
