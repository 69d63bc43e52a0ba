"""What the gateway adds, without trimming: ``ragtrim serve`` in front of a fast fake upstream vs. the fake directly.

Both servers run as their own processes (uvicorn; uvloop and httptools when installed). Latency: sequential
keep-alive requests, direct and through the gateway interleaved, added p50/p99 = gateway minus direct. Throughput:
non-streaming requests/s through the gateway with ``wrk`` (Debian package) when installed, else the stdlib client.
The gateway authenticates a key with rpm/tpm windows (memory), clamps output and counts tokens on every request.
Targets: added p50 <= 2 ms, added p99 <= 10 ms, >= 1,000 requests/s.
Run: ragtrim-bench serve overhead  -> benchmarks/results/serve/overhead.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import summarize_ms
from ragtrim_bench.serve.load import RawClient, free_port, start_process, stop_process

BODY = json.dumps({"model": "fake", "max_tokens": 8, "messages": [
    {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France, and what river runs through it?"}]}).encode()
KEY = "sk-bench"


@dataclass(frozen=True, slots=True)
class OverheadConfig:
    latency_requests: int = 2000
    warmup_requests: int = 300
    throughput_seconds: float = 10.0
    connections: int = 64
    wrk_threads: int = 1
    request_log: Path | None = None  # the gateway logs every request as sent ([log] log_request), for ragtrim audit


def gateway_toml(upstream_port: int, request_log: Path | None = None) -> str:
    log = f'[log]\npath = "{request_log}"\nlog_request = true\n' if request_log else ""
    return log + f"""
[upstream]
url = "http://127.0.0.1:{upstream_port}/v1"
[limits]
max_output_tokens = 512
max_input_tokens = 8192
[keys."{KEY}"]
user = "bench"
org = "bench"
rpm = 100000000
tpm = 1000000000
"""


async def sequential_latency(direct_port: int, gateway_port: int, n: int, warmup: int) -> tuple[list[float],
                                                                                                list[float]]:
    direct = RawClient("127.0.0.1", direct_port)
    gateway = RawClient("127.0.0.1", gateway_port)
    headers = {"authorization": f"Bearer {KEY}"}
    for _ in range(warmup):
        await direct.request("POST", "/v1/chat/completions", BODY)
        await gateway.request("POST", "/v1/chat/completions", BODY, headers)
    d_ms: list[float] = []
    g_ms: list[float] = []
    for _ in range(n):
        status, _, total, _ = await direct.request("POST", "/v1/chat/completions", BODY)
        if status == 200:
            d_ms.append(total * 1000)
        status, _, total, _ = await gateway.request("POST", "/v1/chat/completions", BODY, headers)
        if status == 200:
            g_ms.append(total * 1000)
    await direct.close()
    await gateway.close()
    return d_ms, g_ms


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_ms_per_request(before: float | None, after: float | None, requests: int) -> float | None:
    if before is None or after is None or requests <= 0:
        return None
    return (after - before) * 1000 / requests


def wrk_throughput(port: int, cfg: OverheadConfig, with_key: bool) -> dict[str, Any]:
    wrk = shutil.which("wrk")
    if wrk is None:
        return asyncio.run(closed_loop_throughput(port, cfg, with_key))
    lua = "wrk.method = 'POST'\nwrk.body = [[" + BODY.decode() + "]]\nwrk.headers['content-type'] = 'application/json'\n"
    if with_key:
        lua += f"wrk.headers['authorization'] = 'Bearer {KEY}'\n"
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua)
    out = subprocess.run([wrk, f"-t{cfg.wrk_threads}", f"-c{cfg.connections}", f"-d{cfg.throughput_seconds:g}s",
                          "--latency", "-s", f.name, f"http://127.0.0.1:{port}/v1/chat/completions"],
                         capture_output=True, text=True, check=True)
    os.unlink(f.name)
    text = out.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errors = re.search(r"Socket errors:.*", text)
    total = int(re.search(r"(\d+) requests in", text).group(1))  # type: ignore[union-attr]
    return {"tool": "wrk", "requests_per_s": rps, "requests": total, "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errors.group(0) if errors else "", "raw": text}


async def closed_loop_throughput(port: int, cfg: OverheadConfig, with_key: bool) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {KEY}"} if with_key else {}
    client = RawClient("127.0.0.1", port)
    done = 0
    bad = 0
    stop = time.perf_counter() + cfg.throughput_seconds

    async def worker() -> None:
        nonlocal done, bad
        while time.perf_counter() < stop:
            status, _, _, _ = await client.request("POST", "/v1/chat/completions", BODY, headers)
            done += 1
            bad += status != 200

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(cfg.connections)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return {"tool": "python-raw-client", "requests_per_s": done / elapsed, "requests": done, "non_2xx": bad}


def run(cfg: OverheadConfig) -> dict[str, Any]:
    load_before = load_average()
    up_port, gw_port = free_port(), free_port()
    tmp = Path(tempfile.mkdtemp(prefix="ragtrim-serve-bench-"))
    (tmp / "gateway.toml").write_text(gateway_toml(up_port, cfg.request_log))
    upstream = start_process(["serve-fake-upstream", "--port", str(up_port), "--base-ms", "0", "--per-1k-ms", "0",
                              "--output-tokens", "8"], f"http://127.0.0.1:{up_port}/health")
    gateway = start_process(["serve", "--config", str(tmp / "gateway.toml"), "--port", str(gw_port)],
                            f"http://127.0.0.1:{gw_port}/healthz")
    try:
        d_ms, g_ms = asyncio.run(sequential_latency(up_port, gw_port, cfg.latency_requests, cfg.warmup_requests))
        direct = summarize_ms(d_ms, "latency")
        via = summarize_ms(g_ms, "latency")
        gw0, up0 = cpu_seconds(gateway.pid), cpu_seconds(upstream.pid)
        thr_gateway = wrk_throughput(gw_port, cfg, with_key=True)
        gw1, up1 = cpu_seconds(gateway.pid), cpu_seconds(upstream.pid)
        thr_gateway["gateway_cpu_ms_per_request"] = cpu_ms_per_request(gw0, gw1, thr_gateway["requests"])
        thr_gateway["upstream_cpu_ms_per_request"] = cpu_ms_per_request(up0, up1, thr_gateway["requests"])
        thr_direct = wrk_throughput(up_port, cfg, with_key=False)
    finally:
        stop_process(gateway)
        stop_process(upstream)
    try:
        import httptools  # noqa: F401
        import uvloop  # noqa: F401
        fast_stack = True
    except ImportError:
        fast_stack = False
    added_p50 = via["p50_latency_ms"] - direct["p50_latency_ms"]
    added_p99 = via["p99_latency_ms"] - direct["p99_latency_ms"]
    return {
        "benchmark": "serve_overhead",
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "uvloop_httptools": fast_stack,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "direct": {**direct, "requests_ok": len(d_ms)},
        "gateway": {**via, "requests_ok": len(g_ms)},
        "added_p50_ms": added_p50,
        "added_p99_ms": added_p99,
        "gateway_throughput": {k: v for k, v in thr_gateway.items() if k != "raw"},
        "direct_throughput": {k: v for k, v in thr_direct.items() if k != "raw"},
        "gateway_requests_per_s": thr_gateway["requests_per_s"],
        # What one otherwise idle core could carry at the measured CPU cost per request.
        "gateway_requests_per_cpu_s": (1000 / thr_gateway["gateway_cpu_ms_per_request"]
                                       if thr_gateway.get("gateway_cpu_ms_per_request") else None),
        "targets": {"added_p50_ms_le_2": added_p50 <= 2.0, "added_p99_ms_le_10": added_p99 <= 10.0,
                    "requests_per_s_ge_1000": thr_gateway["requests_per_s"] >= 1000 and thr_gateway["non_2xx"] == 0},
    }


def report(result: dict[str, Any]) -> None:
    d, g = result["direct"], result["gateway"]
    print(f"direct   p50 {d['p50_latency_ms']:.2f} ms  p99 {d['p99_latency_ms']:.2f} ms")
    print(f"gateway  p50 {g['p50_latency_ms']:.2f} ms  p99 {g['p99_latency_ms']:.2f} ms")
    print(f"added    p50 {result['added_p50_ms']:.2f} ms  p99 {result['added_p99_ms']:.2f} ms")
    gt, dt = result["gateway_throughput"], result["direct_throughput"]
    print(f"throughput gateway {gt['requests_per_s']:.0f} req/s ({gt['tool']}, non-2xx {gt['non_2xx']}), "
          f"direct {dt['requests_per_s']:.0f} req/s")
    if gt.get("gateway_cpu_ms_per_request"):
        print(f"gateway CPU {gt['gateway_cpu_ms_per_request']:.3f} ms/request "
              f"(= {result['gateway_requests_per_cpu_s']:.0f} requests per CPU-second); fake upstream "
              f"{gt['upstream_cpu_ms_per_request']:.3f} ms/request")
    print(f"load average before {result['load_average_before']}, after {result['load_average_after']}")
    print("targets:", result["targets"])


def main(argv: Sequence[str] | None = None) -> int:
    d = OverheadConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-requests", type=int, default=d.latency_requests)
    parser.add_argument("--seconds", type=float, default=d.throughput_seconds)
    parser.add_argument("--connections", type=int, default=d.connections)
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/serve/overhead.json")
    parser.add_argument("--request-log", type=Path, default=None,
                        help="also log every request the gateway gets, as sent (input for ragtrim audit)")
    args = parser.parse_args(argv)
    cfg = OverheadConfig(latency_requests=args.latency_requests, throughput_seconds=args.seconds,
                         connections=args.connections,
                         request_log=args.request_log.resolve() if args.request_log else None)
    result = run(cfg)
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=["starlette", "uvicorn", "uvloop", "httptools", "aiohttp"])
    report(result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
