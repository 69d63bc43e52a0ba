"""The gateway under 10x overload: a fake upstream whose prefill grows with the prompt and that runs a fixed
number of requests at once; 4 users of one org with equal limits, one of them sending half of all requests.

Unloaded: sequential streaming requests through the gateway give the reference p99 TTFT. Loaded: open-loop
Poisson arrivals at ``overload`` times the upstream's capacity. Reported: admitted p99 TTFT (and its ratio to
the unloaded p99), 429 latency p99, lost (connection errors) and hung (no answer within the client timeout)
requests, and Jain's fairness index of admitted requests across users.
Targets: admitted p99 TTFT <= 2x unloaded p99; 429 p99 <= 5 ms; 0 lost or hung; Jain >= 0.9.
Run: ragtrim-bench serve overload  -> benchmarks/results/serve/overload.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile, summarize_ms
from ragtrim_bench.serve.load import (
    RawClient,
    Reply,
    free_port,
    jain_index,
    open_loop,
    start_process,
    stop_process,
)

USERS = ("noisy", "quiet1", "quiet2", "quiet3")


@dataclass(frozen=True, slots=True)
class OverloadConfig:
    slots: int = 4                 # requests the fake upstream runs at once
    base_ms: float = 100.0         # prefill floor
    per_1k_ms: float = 100.0       # prefill per 1,000 prompt tokens
    decode_ms: float = 5.0
    output_tokens: int = 4
    prompt_words: int = 600        # about 1,000 tokens for the fake's chars/4 count
    overload: float = 10.0         # offered load / upstream capacity
    noisy_share: float = 0.5       # the noisy user's share of the offered load
    duration_s: float = 20.0
    unloaded_requests: int = 40
    key_concurrency: int | None = 1  # equal per-user limits; None: only the org's fair queue
    max_queued: int = 0
    max_queued_per_user: int = 0
    queue_timeout_s: float = 2.0
    client_timeout_s: float = 30.0
    seed: int = 0

    @property
    def service_ms(self) -> float:
        prompt_tokens = self.prompt_words * 6 / 4  # "wordN " is ~6 characters; the fake counts chars / 4
        return self.base_ms + self.per_1k_ms * prompt_tokens / 1000 + self.decode_ms * (self.output_tokens - 1)

    @property
    def capacity_per_s(self) -> float:
        return self.slots * 1000 / self.service_ms


def gateway_toml(cfg: OverloadConfig, upstream_port: int) -> str:
    conc = "" if cfg.key_concurrency is None else f"concurrency = {cfg.key_concurrency}\n"
    keys = "\n".join(f'[keys."sk-{u}"]\nuser = "{u}"\norg = "acme"\nrpm = 100000\ntpm = 100000000\n{conc}'
                     for u in USERS)
    return f"""
[upstream]
url = "http://127.0.0.1:{upstream_port}/v1"
[limits]
max_output_tokens = {cfg.output_tokens}
queue_timeout_s = {cfg.queue_timeout_s}
max_queued = {cfg.max_queued}
max_queued_per_user = {cfg.max_queued_per_user}
[orgs.acme]
concurrency = {cfg.slots}
{keys}
"""


def request_body(cfg: OverloadConfig, user: str) -> bytes:
    text = " ".join(f"w{i % 1000:04d}" for i in range(cfg.prompt_words))
    return json.dumps({"model": "fake", "stream": True, "messages": [
        {"role": "user", "content": f"{text}\nQuestion from {user}: summarise."}]}).encode()


async def unloaded(port: int, cfg: OverloadConfig) -> list[float]:
    client = RawClient("127.0.0.1", port)
    body = request_body(cfg, "quiet1")
    headers = {"authorization": "Bearer sk-quiet1"}
    ttfts = []
    for i in range(cfg.unloaded_requests + 3):
        status, first, _, _ = await client.request("POST", "/v1/chat/completions", body, headers)
        if status == 200 and i >= 3:  # three warm-up requests
            ttfts.append(first * 1000)
    await client.close()
    return ttfts


async def loaded(port: int, cfg: OverloadConfig) -> list[Reply]:
    client = RawClient("127.0.0.1", port)
    total_rate = cfg.overload * cfg.capacity_per_s
    quiet_rate = total_rate * (1 - cfg.noisy_share) / (len(USERS) - 1)
    rates = {u: (total_rate * cfg.noisy_share if u == "noisy" else quiet_rate) for u in USERS}
    replies = await open_loop(client, "/v1/chat/completions", {u: request_body(cfg, u) for u in USERS}, rates,
                              cfg.duration_s, {u: {"authorization": f"Bearer sk-{u}"} for u in USERS},
                              cfg.client_timeout_s, seed=cfg.seed)
    await client.close()
    return replies


def analyse(cfg: OverloadConfig, base_ttft: list[float], replies: list[Reply]) -> dict[str, Any]:
    ok = [r for r in replies if r.status == 200]
    limited = [r for r in replies if r.status == 429]
    lost = [r for r in replies if r.status == 0]
    hung = [r for r in replies if r.status == -1]
    admitted_per_user = {u: sum(1 for r in ok if r.user == u) for u in USERS}
    offered_per_user = {u: sum(1 for r in replies if r.user == u) for u in USERS}
    base_p99 = percentile(base_ttft, 99)
    ok_p99 = percentile([r.ttft_ms for r in ok], 99)
    limited_p99 = percentile([r.latency_ms for r in limited], 99)
    jain = jain_index(list(admitted_per_user.values()))
    return {
        "upstream_capacity_per_s": cfg.capacity_per_s,
        "offered_per_s": len(replies) / cfg.duration_s,
        "admitted_per_s": len(ok) / cfg.duration_s,
        "unloaded": summarize_ms(base_ttft, "ttft"),
        "admitted": summarize_ms([r.ttft_ms for r in ok], "ttft"),
        "admitted_e2e": summarize_ms([r.latency_ms for r in ok], "latency"),
        "rejected_429": summarize_ms([r.latency_ms for r in limited], "latency"),
        "requests": len(replies),
        "statuses": {str(k): v for k, v in sorted(Counter(r.status for r in replies).items())},
        "lost": len(lost),
        "hung": len(hung),
        "errors": sorted({r.error for r in lost})[:5],
        "offered_per_user": offered_per_user,
        "admitted_per_user": admitted_per_user,
        "jain_fairness_admitted": jain,
        "p99_ttft_ratio_loaded_to_unloaded": ok_p99 / base_p99 if base_p99 else math.nan,
        "targets": {
            "admitted_p99_ttft_le_2x_unloaded": ok_p99 <= 2 * base_p99,
            "rejection_p99_ms_le_5": limited_p99 <= 5.0,
            "zero_lost_or_hung": not lost and not hung,
            "jain_ge_0_9": jain >= 0.9,
        },
    }


def _loop_runner() -> Any:
    try:
        import uvloop

        return uvloop.run
    except ImportError:
        return asyncio.run


def run(cfg: OverloadConfig) -> dict[str, Any]:
    load_before = load_average()
    up_port, gw_port = free_port(), free_port()
    tmp = Path(tempfile.mkdtemp(prefix="ragtrim-serve-overload-"))
    (tmp / "gateway.toml").write_text(gateway_toml(cfg, up_port))
    upstream = start_process(["serve-fake-upstream", "--port", str(up_port), "--base-ms", str(cfg.base_ms),
                              "--per-1k-ms", str(cfg.per_1k_ms), "--decode-ms", str(cfg.decode_ms),
                              "--output-tokens", str(cfg.output_tokens), "--slots", str(cfg.slots)],
                             f"http://127.0.0.1:{up_port}/health")
    gateway = start_process(["serve", "--config", str(tmp / "gateway.toml"), "--port", str(gw_port)],
                            f"http://127.0.0.1:{gw_port}/healthz")
    try:
        runner = _loop_runner()
        base_ttft = runner(unloaded(gw_port, cfg))
        replies = runner(loaded(gw_port, cfg))
    finally:
        stop_process(gateway)
        stop_process(upstream)
    return {
        "benchmark": "serve_overload",
        "config": {**{k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
                   "service_ms": cfg.service_ms},
        "load_average_before": load_before,
        "load_average_after": load_average(),
        **analyse(cfg, base_ttft, replies),
    }


def report(r: dict[str, Any]) -> None:
    print(f"upstream capacity {r['upstream_capacity_per_s']:.1f} req/s; offered {r['offered_per_s']:.1f} req/s; "
          f"admitted {r['admitted_per_s']:.1f} req/s; statuses {r['statuses']}")
    print(f"TTFT unloaded p50 {r['unloaded']['p50_ttft_ms']:.1f} p99 {r['unloaded']['p99_ttft_ms']:.1f} ms; "
          f"admitted p50 {r['admitted']['p50_ttft_ms']:.1f} p99 {r['admitted']['p99_ttft_ms']:.1f} ms "
          f"(ratio {r['p99_ttft_ratio_loaded_to_unloaded']:.2f})")
    print(f"429 latency p50 {r['rejected_429']['p50_latency_ms']:.2f} p99 {r['rejected_429']['p99_latency_ms']:.2f} ms;"
          f" lost {r['lost']}, hung {r['hung']}")
    print(f"admitted per user {r['admitted_per_user']} (offered {r['offered_per_user']}); "
          f"Jain {r['jain_fairness_admitted']:.3f}")
    print(f"load average before {r['load_average_before']}, after {r['load_average_after']}")
    print("targets:", r["targets"])


def main(argv: Sequence[str] | None = None) -> int:
    d = OverloadConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=d.duration_s)
    parser.add_argument("--overload", type=float, default=d.overload)
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/serve/overload.json")
    args = parser.parse_args(argv)
    variants = {
        # Equal per-key limits (concurrency 1 each, no queue): the configuration the targets are for.
        "per_key_concurrency": OverloadConfig(duration_s=args.duration, overload=args.overload),
        # No per-key limit: only the org's queue, FIFO per user and round robin across users.
        "org_fair_queue_only": OverloadConfig(duration_s=args.duration, overload=args.overload,
                                              key_concurrency=None, max_queued=3, max_queued_per_user=1),
    }
    results = {}
    for name, cfg in variants.items():
        print(f"== {name}", flush=True)
        results[name] = run(cfg)
        report(results[name])
    out = write_result(args.output or result_path(__spec__.name), {"benchmark": "serve_overload", "variants": results},
                       command=command_line(__spec__.name, argv), packages=["starlette", "uvicorn", "uvloop"])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
