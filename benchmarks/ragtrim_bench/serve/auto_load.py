"""``trim.scorer = "auto"`` under load: ``ragtrim serve`` in front of a fake upstream that prefills one request at a
time, a Poisson ladder per arm, on this host's CPU.

The fake upstream (``ragtrim serve-fake-upstream --slots 1``) takes ``--base-ms`` plus ``--per-1k-ms`` per 1,000
prompt tokens for each request's prefill and serves one at a time, so requests queue behind each other as they do
for a GPU's prefill; at 37 ms per 1,000 tokens (about a 12B model on an H200) a golden request's 2,400 tokens take
about 110 ms. Arms, as in ``ragtrim-bench serve auto_e2e``: ``direct`` (the upstream itself, untrimmed), ``notrim``
(a gateway that trims nothing), ``default`` (the ``balanced`` default at a quarter of the documents' tokens) and
``auto`` (``scorer = "auto"`` at the same budget, no prefill figure given: it learns from the ``--learn`` single
requests sent first to every gateway). Every request is new to every arm: the golden NQ questions with every passage
made new (``ragtrim_bench.gpu.prompts.cold_prompts``), so every trim is cold. Each arm climbs ``--rates`` (requests
per second, Poisson, ``--step-s`` seconds a step) until its p95 TTFT passes four times the SLO; TTFT runs from send to
the first streamed token at the client, the gateway's time and the trim included. Reported per arm: each step's
p50 / p95 TTFT and throughput, the highest throughput within ``--slo-ms`` p95, and for ``auto`` its choices and
learned prefill cost after each step (from its ``/metrics``). The client, the gateways and the fake upstream share the
host's cores, as a gateway shares its host with whatever else runs there.

The claim under test: under load, ``auto`` serves at least what not trimming serves within the SLO, and its TTFT at
each rate is no worse than ``notrim``'s where ``notrim`` still meets the SLO.
Run: ragtrim-bench serve auto_load [--per-1k-ms 37] [--rates 2,4,6,8,12,16] [--step-s 8]
     -> benchmarks/results/serve/auto_load.json
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import measure_and_write
from ragtrim_bench.serve.auto_e2e import TRIMS, auto_metrics, metrics_text, start_servers

ARMS = ("direct", *TRIMS)


@dataclass(frozen=True, slots=True)
class AutoLoadConfig:
    per_1k_ms: float = 37.0
    base_ms: float = 20.0
    rates: tuple[float, ...] = (2.0, 4.0, 6.0, 8.0, 12.0, 16.0)
    step_s: float = 8.0
    learn: int = 30
    slo_ms: float = 500.0
    max_tokens: int = 4

    def __post_init__(self) -> None:
        if not self.rates or any(r <= 0 for r in self.rates) or list(self.rates) != sorted(self.rates):
            raise ValueError(f"rates must be rising and above 0, got {self.rates}")
        if self.step_s <= 0 or self.learn < 0 or self.slo_ms <= 0 or self.per_1k_ms < 0 or self.base_ms < 0:
            raise ValueError("step_s and slo_ms must be above 0; learn, per_1k_ms and base_ms at least 0")


def step_requests(config: AutoLoadConfig) -> list[int]:
    """Requests sent at each rate of the ladder (at least 12)."""
    return [max(12, round(rate * config.step_s)) for rate in config.rates]


async def _ladder(config: AutoLoadConfig) -> dict[str, Any]:
    from ragtrim_bench.gpu.load import LoadSpec, run_load
    from ragtrim_bench.gpu.metrics import summarize_records, throughput_at_slo
    from ragtrim_bench.gpu.prompts import cold_prompts
    from ragtrim_bench.serve.load import stop_process

    per_arm = config.learn + sum(step_requests(config)) + 2 * len(config.rates)  # + 2 warm-ups a step
    direct_rows, wrapped_rows = cold_prompts(per_arm)
    procs: list[Any] = []
    out: dict[str, Any] = {}
    try:
        ports, backends = start_servers(procs, ["--base-ms", str(config.base_ms), "--per-1k-ms", str(config.per_1k_ms),
                                                "--slots", "1", "--output-tokens", str(config.max_tokens)], ARMS)
        for name in ARMS:
            print(f"[auto_load] {name} ...", file=sys.stderr, flush=True)
            rows = direct_rows if name == "direct" else wrapped_rows
            learned = await run_load(backends[name], rows, LoadSpec(num_requests=config.learn, concurrency=1,
                                                                    max_tokens=config.max_tokens, warmup_requests=0),
                                     arm=name)
            offset = config.learn
            steps: list[dict[str, Any]] = []
            for rate, n in zip(config.rates, step_requests(config), strict=True):
                records, duration = await run_load(backends[name], rows, LoadSpec(
                    num_requests=n, request_rate=rate, max_tokens=config.max_tokens, seed=int(rate * 1000),
                    warmup_requests=2, prompt_offset=offset + 2), arm=name)
                offset += n + 2
                s = summarize_records(records, duration_s=duration, ttft_slo_ms=config.slo_ms) | {"request_rate": rate}
                if name == "auto":
                    s["auto"] = auto_metrics(metrics_text(ports[name]))
                steps.append(s)
                if s["p95_ttft_ms"] > 4 * config.slo_ms or s["failed"]:
                    break
            out[name] = {"learning_phase": summarize_records(learned[0], duration_s=learned[1]), "steps": steps,
                         "at_slo": throughput_at_slo(steps, slo_ms=config.slo_ms)}
    finally:
        for proc in procs:
            stop_process(proc)
    for name in TRIMS:
        for ref in ("direct", "notrim"):
            if name != ref:
                mine, theirs = out[name]["at_slo"]["request_throughput"], out[ref]["at_slo"]["request_throughput"]
                out[name][f"throughput_gain_vs_{ref}"] = mine / theirs if theirs else None
    return out


def measure(config: AutoLoadConfig) -> dict[str, Any]:
    return {"arms": asyncio.run(_ladder(config))}


def report(result: Mapping[str, Any]) -> str:
    lines = ["| arm | rate offered | served req/s | p50 / p95 TTFT ms | auto's choices so far |",
             "| --- | --- | --- | --- | --- |"]
    for name, a in result["results"]["arms"].items():
        for s in a["steps"]:
            choices = s.get("auto", {}).get("choices", "")
            lines.append(f"| {name} | {s['request_rate']:g} | {s['request_throughput']:.1f} | "
                         f"{s['p50_ttft_ms']:.0f} / {s['p95_ttft_ms']:.0f} | {choices} |")
        gain = a.get("throughput_gain_vs_notrim")
        lines.append(f"| {name} | within the SLO | {a['at_slo']['request_throughput']:.1f} | | "
                     f"{'' if gain is None else f'{gain:.2f}x notrim'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragtrim-bench serve auto_load", description=__doc__.split("\n\n")[0])
    p.add_argument("--per-1k-ms", type=float, default=37.0, help="the fake upstream's prefill ms per 1,000 tokens")
    p.add_argument("--base-ms", type=float, default=20.0, help="the fake upstream's prefill floor per request")
    p.add_argument("--rates", default="2,4,6,8,12,16", help="the ladder's request rates, comma-separated")
    p.add_argument("--step-s", type=float, default=8.0, help="seconds of arrivals per step")
    p.add_argument("--learn", type=int, default=30, help="single requests per arm before the ladder (auto learns)")
    p.add_argument("--slo-ms", type=float, default=500.0, help="the p95 TTFT a step must meet to count")
    p.add_argument("-o", "--output", default=None)
    args = p.parse_args(argv)
    config = AutoLoadConfig(per_1k_ms=args.per_1k_ms, base_ms=args.base_ms, step_s=args.step_s, learn=args.learn,
                            rates=tuple(float(x) for x in args.rates.split(",") if x.strip()), slo_ms=args.slo_ms)
    measure_and_write(__spec__.name, argv, Path(args.output) if args.output else None, {"config": asdict(config)},
                      lambda: measure(config), report, packages=["ragtrim", "starlette", "uvicorn", "onnxruntime"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
