"""Load generation: fixed concurrency or Poisson arrivals, with warm-up and a readiness check before timing.

A backend is anything with ``async stream(request_id, prompt, max_tokens) -> RequestRecord``-like behaviour; see
``backends.StreamingBackend``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ragtrim_bench.gpu.records import RequestRecord


class StreamingBackend(Protocol):
    async def ready(self, timeout_s: float) -> None: ...

    async def complete(self, request_id: str, prompt: str, *, max_tokens: int, arm: str) -> RequestRecord: ...


@dataclass(frozen=True)
class LoadSpec:
    """``request_rate`` (req/s, Poisson) or ``concurrency`` (closed loop); ``num_requests`` prompts are sent."""

    num_requests: int
    request_rate: float | None = None
    concurrency: int | None = None
    max_tokens: int = 32
    seed: int = 0
    warmup_requests: int = 4
    prompt_offset: int = 0
    """Index of the first prompt to send; warm-up requests use the prompts just before it, so the timed requests
    never repeat a warm-up prompt (a repeat would be served from vLLM's prefix cache)."""


def poisson_offsets(rate: float, n: int, seed: int) -> list[float]:
    """Arrival times (s from start) of ``n`` requests with exponential gaps of mean ``1/rate``; deterministic."""
    rng = random.Random(seed)
    t = 0.0
    out = []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


async def run_load(
    backend: StreamingBackend, prompts: Sequence[tuple[str, str]], spec: LoadSpec, *, arm: str
) -> tuple[list[RequestRecord], float]:
    """Send ``prompts`` ((id, text) pairs, cycled) under ``spec``; return records and the run's wall time (s)."""
    await backend.ready(600.0)
    n = len(prompts)
    for i in range(spec.warmup_requests):  # warm-up: untimed, sequential, on prompts the timed run does not send
        rid, text = prompts[(spec.prompt_offset - 1 - i) % n]
        await backend.complete(f"warmup-{arm}-{i}-{rid}", text, max_tokens=spec.max_tokens, arm=arm)
    items = [prompts[(spec.prompt_offset + i) % n] for i in range(spec.num_requests)]
    started = time.perf_counter()

    async def one(i: int, rid: str, text: str) -> RequestRecord:
        sent = time.perf_counter() - started
        rec = await backend.complete(f"{arm}-{i}-{rid}", text, max_tokens=spec.max_tokens, arm=arm)
        return replace(rec, send_time_s=sent)

    if spec.request_rate is not None:
        offsets = poisson_offsets(spec.request_rate, len(items), spec.seed)

        async def delayed(i: int, rid: str, text: str) -> RequestRecord:
            await asyncio.sleep(max(0.0, offsets[i] - (time.perf_counter() - started)))
            return await one(i, rid, text)

        records = await asyncio.gather(*(delayed(i, rid, t) for i, (rid, t) in enumerate(items)))
    else:
        limit = asyncio.Semaphore(spec.concurrency or 1)

        async def bounded(i: int, rid: str, text: str) -> RequestRecord:
            async with limit:
                return await one(i, rid, text)

        records = await asyncio.gather(*(bounded(i, rid, t) for i, (rid, t) in enumerate(items)))
    return list(records), time.perf_counter() - started
