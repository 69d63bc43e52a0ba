"""CPU per relayed request of the two async HTTP clients the gateway could use for its upstream: httpx and aiohttp.

Each client sends the same small non-streaming chat request to the fake upstream (a separate process) from 16
concurrent workers; the client process's own CPU time per request is what the gateway would pay on every request.
Run: ragtrim-bench serve upstream_client  -> benchmarks/results/serve/upstream_client.json
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.serve.load import free_port, start_process, stop_process

BODY = b'{"model":"fake","max_tokens":8,"messages":[{"role":"user","content":"What is the capital of France?"}]}'


@dataclass(frozen=True, slots=True)
class ClientConfig:
    requests: int = 2000
    concurrency: int = 16
    warmup: int = 200


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def drive(send: Callable[[], Awaitable[None]], cfg: ClientConfig) -> dict[str, float]:
    for _ in range(cfg.warmup):
        await send()
    per_worker = cfg.requests // cfg.concurrency

    async def worker() -> None:
        for _ in range(per_worker):
            await send()

    c0, t0 = cpu_s(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(cfg.concurrency)))
    n = per_worker * cfg.concurrency
    return {"cpu_ms_per_request": (cpu_s() - c0) * 1000 / n, "wall_s": time.perf_counter() - t0, "requests": n}


async def with_httpx(url: str, cfg: ClientConfig) -> dict[str, float]:
    import httpx

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=1000)) as c:
        async def send() -> None:
            r = await c.post(url, content=BODY, headers={"content-type": "application/json"})
            r.raise_for_status()

        return await drive(send, cfg)


async def with_aiohttp(url: str, cfg: ClientConfig) -> dict[str, float]:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000)) as s:
        async def send() -> None:
            async with s.post(url, data=BODY, headers={"content-type": "application/json"}) as r:
                r.raise_for_status()
                await r.read()

        return await drive(send, cfg)


def run(cfg: ClientConfig) -> dict[str, Any]:
    load_before = load_average()
    port = free_port()
    upstream = start_process(["serve-fake-upstream", "--port", str(port), "--base-ms", "0", "--per-1k-ms", "0"],
                             f"http://127.0.0.1:{port}/health")
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        try:
            import uvloop
            runner: Any = uvloop.run
        except ImportError:
            runner = asyncio.run
        results = {"httpx": runner(with_httpx(url, cfg)), "aiohttp": runner(with_aiohttp(url, cfg))}
    finally:
        stop_process(upstream)
    import aiohttp
    import httpx

    return {"benchmark": "serve_upstream_client",
            "config": asdict(cfg),
            "versions": {"httpx": httpx.__version__, "aiohttp": aiohttp.__version__},
            "load_average_before": load_before,
            "load_average_after": load_average(),
            **results,
            "httpx_to_aiohttp_cpu_ratio": results["httpx"]["cpu_ms_per_request"]
            / results["aiohttp"]["cpu_ms_per_request"]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/serve/upstream_client.json")
    args = parser.parse_args(argv)
    result = run(ClientConfig())
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=["httpx", "aiohttp", "uvloop"])
    for name in ("httpx", "aiohttp"):
        r = result[name]
        print(f"{name:8s} {r['cpu_ms_per_request']:.3f} ms CPU per request ({r['requests']} requests, "
              f"{r['wall_s']:.1f} s wall)")
    print(f"load average before {result['load_average_before']}, after {result['load_average_after']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
