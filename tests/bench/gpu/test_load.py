from __future__ import annotations

import asyncio
import itertools
import statistics

from ragtrim_bench.gpu.load import LoadSpec, poisson_offsets, run_load
from ragtrim_bench.gpu.records import RequestRecord


def test_poisson_offsets_deterministic_and_rate() -> None:
    a = poisson_offsets(10.0, 2000, seed=3)
    assert a == poisson_offsets(10.0, 2000, seed=3)
    assert a[0] == 0.0 and a == sorted(a)
    gaps = [y - x for x, y in itertools.pairwise(a)]
    assert abs(statistics.mean(gaps) - 0.1) < 0.01


class EchoBackend:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.active = 0
        self.max_active = 0

    async def ready(self, timeout_s: float) -> None:
        return None

    async def complete(self, request_id: str, prompt: str, *, max_tokens: int, arm: str) -> RequestRecord:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        await asyncio.sleep(0.005)
        self.active -= 1
        self.seen.append(request_id)
        return RequestRecord(request_id, arm, True, len(prompt.split()), max_tokens, ttft_ms=1.0, e2e_ms=5.0)


def test_concurrency_bound_and_warmup() -> None:
    backend = EchoBackend()
    prompts = [("q1", "a b"), ("q2", "c")]
    records, duration = asyncio.run(run_load(backend, prompts, LoadSpec(num_requests=10, concurrency=3), arm="x"))
    assert len(records) == 10 and duration > 0
    assert backend.max_active <= 3
    assert sum(r.startswith("warmup") for r in backend.seen) == 4
    assert [r.prompt_tokens for r in records[:2]] == [2, 1]


def test_poisson_run_records_send_times() -> None:
    backend = EchoBackend()
    records, _ = asyncio.run(run_load(backend, [("q", "p")], LoadSpec(num_requests=5, request_rate=200.0,
                                                                         warmup_requests=0), arm="y"))
    assert all(r.arm == "y" for r in records)
    assert records[-1].send_time_s >= records[0].send_time_s


def test_warmup_prompts_are_not_timed_again() -> None:
    backend = EchoBackend()
    prompts = [(f"q{i}", f"p{i}") for i in range(10)]
    asyncio.run(run_load(backend, prompts, LoadSpec(num_requests=5, concurrency=1, warmup_requests=2,
                                                    prompt_offset=2), arm="z"))
    warm = {r.rsplit("-", 1)[1] for r in backend.seen if r.startswith("warmup")}
    timed = {r.rsplit("-", 1)[1] for r in backend.seen if not r.startswith("warmup")}
    assert warm == {"q0", "q1"} and timed == {"q2", "q3", "q4", "q5", "q6"}
