"""Running the golden set through every arm: one arm after another (so arms sharing a GPU never load it at once),
a readiness check and warm-up requests on prompts the timed run never sends, then at most ``concurrency`` requests in
flight, a progress bar, and each result appended to the results file as it comes, so a rerun sends only the rest.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError, RagtrimError, require
from ragtrim.gate.arms import Arm, scrub
from ragtrim.gate.client import Reply, send, wait_ready
from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.prompt import Trimmed, build_body, trim_documents
from ragtrim.gate.records import RequestRecord, ResultsWriter, read_results

WARMUP_QUESTION = "Warm-up request {n}: reply with the word ready."


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """How requests are sent. ``concurrency``: requests in flight per arm (latency figures are under that load;
    1 gives single-request latency). ``retries`` more tries after a retryable failure, ``backoff_s`` before the
    first, doubling. ``warmup`` requests per arm before timing, on prompts the golden set does not hold.
    ``ready_timeout_s``: how long to wait for each arm's ``GET /models``. ``retry_errors``: a rerun sends again the
    requests that failed (else they stand, counted). ``progress``: a bar per arm on stderr."""

    concurrency: int = 4
    retries: int = 2
    backoff_s: float = 0.5
    warmup: int = 2
    ready_timeout_s: float = 30.0
    check_ready: bool = True
    retry_errors: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        for name, low in (("concurrency", 1), ("retries", 0), ("warmup", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        for name in ("backoff_s", "ready_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be a number of seconds >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """The records of every (arm, item) pair, and how they came: sent now per arm, reused from the results file,
    stale records ignored, failed ones sent again, and whether the file had a torn last line."""

    records: dict[tuple[str, str], RequestRecord]
    sent: dict[str, int]
    reused: int
    stale: int
    retried_errors: int
    torn_tail: bool
    seconds: float


def _api_key(arm: Arm) -> str | None:
    if arm.api_key_env is None:
        return None
    key = os.environ.get(arm.api_key_env)
    if not key:
        raise ConfigError(f"arm {arm.name!r} reads its API key from ${arm.api_key_env}, which is not set")
    return key


def _warmup_item(n: int) -> GoldenItem:
    return GoldenItem(id=f"warmup-{n}", question=WARMUP_QUESTION.format(n=n),
                      documents=(f"Warm-up document {n}: the gate sends this before timing any request.",))


async def _one(client: Any, arm: Arm, item: GoldenItem, *, api_key: str | None, config: RunConfig,
               secrets: Sequence[str]) -> RequestRecord:
    started = time.perf_counter()
    trimmed: Trimmed | None = None
    base: dict[str, Any] = {"arm": arm.name, "item": item.id, "arm_key": arm.fingerprint(),
                            "item_key": item.fingerprint()}
    documents: Sequence[str] = item.documents
    if arm.trim is not None and item.documents:
        try:
            trimmed = await asyncio.to_thread(trim_documents, item.documents, item.question, arm.trim)
        except RagtrimError as exc:
            return RequestRecord(**base, ok=False, error_kind="trim", error=scrub(str(exc), secrets)[:300],
                                 finished_at=time.time())
        documents = trimmed.documents
    body = build_body(item, arm, documents)
    lead_ms = (time.perf_counter() - started) * 1000
    reply: Reply = await send(client, arm, body, api_key=api_key, retries=config.retries,
                              backoff_s=config.backoff_s, secrets=secrets)
    return RequestRecord(
        **base, ok=reply.ok, reply=reply.text, error_kind=reply.error_kind, error=reply.error, status=reply.status,
        attempts=reply.attempts,
        ttft_ms=round(lead_ms + reply.ttft_ms, 3) if reply.ttft_ms is not None else None,
        latency_ms=round(lead_ms + reply.latency_ms, 3) if reply.latency_ms is not None else None,
        trim_ms=round(trimmed.trim_ms, 3) if trimmed is not None else None,
        prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
        usage_source=reply.usage_source,
        documents_before=trimmed.tokens_before if trimmed is not None else None,
        documents_after=trimmed.tokens_after if trimmed is not None else None,
        gateway_prompt_before=reply.gateway_before, gateway_prompt_after=reply.gateway_after,
        finished_at=round(time.time(), 3))


async def _run_arm(arm: Arm, todo: Sequence[GoldenItem], writer: ResultsWriter, config: RunConfig,
                   secrets: Sequence[str], found: dict[tuple[str, str], RequestRecord],
                   on_record: Callable[[RequestRecord], None] | None) -> int:
    import httpx
    from tqdm import tqdm

    api_key = _api_key(arm)
    limits = httpx.Limits(max_connections=config.concurrency + 2, max_keepalive_connections=config.concurrency + 2)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(arm.timeout_s, connect=10.0)) as client:
        if config.check_ready:
            await wait_ready(client, arm, api_key=api_key, timeout_s=config.ready_timeout_s, secrets=secrets)
        for n in range(config.warmup):  # one at a time: engines compile and allocate on their first requests
            await _one(client, arm, _warmup_item(n), api_key=api_key, config=config, secrets=secrets)
        sem = asyncio.Semaphore(config.concurrency)
        bar = tqdm(total=len(todo), desc=arm.name, unit="req", file=sys.stderr, disable=not config.progress,
                   leave=False)

        async def task(item: GoldenItem) -> None:
            async with sem:
                rec = await _one(client, arm, item, api_key=api_key, config=config, secrets=secrets)
            writer.write(rec)
            found[(arm.name, item.id)] = rec
            bar.update(1)
            if on_record is not None:
                on_record(rec)

        try:
            await asyncio.gather(*(task(item) for item in todo))
        finally:
            bar.close()
    return len(todo)


def run_arms(items: Sequence[GoldenItem], arms: Sequence[Arm], results_path: str | Path,
             config: RunConfig | None = None, *,
             on_record: Callable[[RequestRecord], None] | None = None) -> RunOutcome:
    """Send every item to every arm that has no matching result in ``results_path`` yet, appending each result
    there; return all records. Needs httpx (the ``serve`` extra)."""
    require("httpx", "serve", "ragtrim gate (its HTTP client)")
    cfg = config or RunConfig()
    started = time.perf_counter()
    keys = {(a.name, i.id): (a.fingerprint(), i.fingerprint()) for a in arms for i in items}
    stored = read_results(results_path, keys, retry_errors=cfg.retry_errors)
    found = dict(stored.records)
    secrets = [k for k in (os.environ.get(a.api_key_env) for a in arms if a.api_key_env) if k]
    sent: dict[str, int] = {}

    async def main() -> None:
        with ResultsWriter(results_path) as writer:
            for arm in arms:
                todo = [i for i in items if (arm.name, i.id) not in found]
                sent[arm.name] = await _run_arm(arm, todo, writer, cfg, secrets, found, on_record) if todo else 0

    asyncio.run(main())
    return RunOutcome(records=found, sent=sent, reused=len(stored.records), stale=stored.stale,
                      retried_errors=stored.errors_to_retry, torn_tail=stored.torn_tail,
                      seconds=time.perf_counter() - started)
