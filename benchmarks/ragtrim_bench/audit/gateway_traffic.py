"""The gateway's own log of RAG traffic, audited: ``ragtrim serve`` (trimming and the request log on) in front of the
fake upstream, the golden NQ requests sent through it as chat requests, then ``ragtrim audit`` on the log it wrote,
checked against the gateway's own token counts (its log and ``/metrics``).

``ragtrim-bench audit gateway_rag`` runs it (200 requests); tests/bench/audit/test_gateway_traffic.py runs it on 10.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim.audit.reader import AuditRequest
from ragtrim.errors import ConfigError
from ragtrim.text.tokens import TokenCounter
from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import results_root
from ragtrim_bench.common.stats import summarize_ms
from ragtrim_bench.datasets.nq import QAInstance
from ragtrim_bench.gpu.prompts import INSTRUCTION, context_block
from ragtrim_bench.serve.load import RawClient, free_port, start_process, stop_process

LOG_TOKEN_KEYS = ("prompt_before", "prompt_after", "saved", "documents_before", "documents_after",
                  "history_before", "history_after")
"""The per-request token counts of the gateway's log (``tokens``) that the run adds up."""


@dataclass(frozen=True, slots=True)
class GatewayAuditConfig:
    """One run. ``log`` is where the gateway writes its request log (emptied first; it holds the passages' text, so
    keep it out of the repository; relative paths are from the working directory); ``audit_args`` are further ``ragtrim audit`` options (the planner, the TTFT
    curve). The fake upstream's prefill takes ``base_ms + per_1k_ms`` per 1,000 prompt tokens (the H200 12B shape)."""

    requests: int = 200
    offset: int = 0
    budget: float = 0.25
    scorer: str = "bm25"
    history_every: int = 3
    base_ms: float = 20.0
    per_1k_ms: float = 37.0
    output_tokens: int = 8
    tokenizer: str = "cl100k_base"
    log: Path = Path(".cache/audit/gateway-rag-requests.jsonl")
    report_dir: Path | None = None
    """The audit report's folder; None: ``results/audit/gateway-rag``."""
    audit_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("requests", "history_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.offset < 0:
            raise ConfigError(f"offset must be >= 0, got {self.offset}")
        if not (0 < self.budget < 1 or (self.budget >= 1 and float(self.budget).is_integer())):
            raise ConfigError(f"budget must be a share in (0, 1) or a whole number of tokens >= 1, got {self.budget!r}")


def rag_chat_bodies(instances: Sequence[QAInstance], *, history_every: int = 3,
                    max_tokens: int = 8) -> list[dict[str, Any]]:
    """One chat request per instance, as a RAG application sends them: the QA instruction as the system prompt, the
    passages as ``documents`` (even positions) or in a ``<context>`` block before the question (odd positions), and
    on every ``history_every``-th request the previous question and its first answer as an earlier exchange."""
    bodies: list[dict[str, Any]] = []
    for i, inst in enumerate(instances):
        docs = [p.content for p in inst.passages]
        messages: list[dict[str, str]] = [{"role": "system", "content": INSTRUCTION}]
        if i % history_every == history_every - 1 and i > 0:
            earlier = instances[i - 1]
            messages += [{"role": "user", "content": earlier.question},
                         {"role": "assistant", "content": earlier.answers[0] if earlier.answers else "unanswerable"}]
        body: dict[str, Any] = {"model": "fake", "max_tokens": max_tokens, "messages": messages}
        if i % 2 == 0:
            messages.append({"role": "user", "content": inst.question})
            body["documents"] = docs
        else:
            messages.append({"role": "user", "content": f"{context_block(docs)}\n\n{inst.question}"})
        bodies.append(body)
    return bodies


def gateway_toml(upstream_port: int, cfg: GatewayAuditConfig) -> str:
    """Open mode, memory state, trimming at ``cfg.budget`` and the request log with each request as sent."""
    budget = int(cfg.budget) if cfg.budget >= 1 else cfg.budget
    return f"""
[upstream]
url = "http://127.0.0.1:{upstream_port}/v1"
tokenizer = {json.dumps(cfg.tokenizer)}

[trim]
budget = {budget!r}
scorer = {json.dumps(cfg.scorer)}

[log]
path = {json.dumps(str(cfg.log.resolve()))}
log_request = true
"""


def audit_argv(cfg: GatewayAuditConfig) -> list[str]:
    """``ragtrim audit`` on the gateway's log: every request trimmed (``--sample 0``), the gateway's budget and
    scorer, so the audit's savings can be compared with what the gateway removed."""
    budget = str(int(cfg.budget)) if cfg.budget >= 1 else str(cfg.budget)
    report_dir = cfg.report_dir if cfg.report_dir is not None else results_root() / "audit" / "gateway-rag"
    return ["audit", str(cfg.log), "--out", str(report_dir), "--tokenizer", cfg.tokenizer, "--budget", budget,
            "--sample", "0", "--scorer", cfg.scorer, *cfg.audit_args]


def token_counters(metrics_text: str) -> dict[str, int]:
    """``ragtrim_serve_tokens_total`` by ``kind`` from the gateway's Prometheus text."""
    found = re.findall(r'^ragtrim_serve_tokens_total\{kind="(\w+)"\} (\S+)$', metrics_text, re.MULTILINE)
    return {kind: int(float(value)) for kind, value in found}


def log_totals(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The gateway log's token counts summed over its lines (``LOG_TOKEN_KEYS``), and its lines by outcome."""
    sums = dict.fromkeys(LOG_TOKEN_KEYS, 0)
    outcomes: Counter[str] = Counter()
    lines = 0
    for e in entries:
        lines += 1
        outcomes[str(e.get("outcome"))] += 1
        tokens = e.get("tokens") or {}
        for k in LOG_TOKEN_KEYS:
            sums[k] += int(tokens.get(k) or 0)
    return {"lines": lines, "outcomes": dict(sorted(outcomes.items())), **sums}


def numbering_tokens(requests: Iterable[AuditRequest], counter: TokenCounter) -> int:
    """Tokens the gateway's numbered block adds to the prompts it counts, beyond the documents and the question
    themselves: its ``Documents:`` header, the ``[i]`` labels and the seams where they join. The gateway counts the
    last user message as one text (``render_documents``, then the question); the audit counts each piece."""
    from ragtrim.serve.render import render_documents

    total = 0
    for req in requests:
        docs = req.texts("context")
        if not docs:
            continue
        question = req.question
        block = render_documents(docs)
        message = f"{block}\n\n{question}" if question else block
        pieces = sum(counter.count(d) for d in docs) + (counter.count(question) if question else 0)
        total += counter.count(message) - pieces
    return total


async def _send(port: int, requests: Sequence[tuple[str, dict[str, Any]]]) -> list[int]:
    """One request at a time over a keep-alive connection; the request id goes in ``x-request-id``."""
    client = RawClient("127.0.0.1", port)
    statuses = []
    try:
        for rid, body in requests:
            status, _, _, _ = await client.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                                                   {"x-request-id": rid})
            statuses.append(status)
    finally:
        await client.close()
    return statuses


def serve_and_log(cfg: GatewayAuditConfig, requests: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Start the fake upstream and the gateway, send ``requests`` (id, body) through the gateway, read its token
    counters; both servers are stopped before this returns, so the log is complete."""
    cfg.log.parent.mkdir(parents=True, exist_ok=True)
    cfg.log.unlink(missing_ok=True)  # the gateway appends
    up_port, gw_port = free_port(), free_port()
    config = Path(tempfile.mkdtemp(prefix="ragtrim-gateway-audit-")) / "gateway.toml"
    config.write_text(gateway_toml(up_port, cfg), encoding="utf-8")
    upstream = start_process(["serve-fake-upstream", "--port", str(up_port), "--base-ms", str(cfg.base_ms),
                              "--per-1k-ms", str(cfg.per_1k_ms), "--output-tokens", str(cfg.output_tokens)],
                             f"http://127.0.0.1:{up_port}/health")
    try:
        gateway = start_process(["serve", "--config", str(config), "--port", str(gw_port)],
                                f"http://127.0.0.1:{gw_port}/healthz")
        try:
            t0 = time.perf_counter()
            statuses = asyncio.run(_send(gw_port, requests))
            send_s = time.perf_counter() - t0
            with urllib.request.urlopen(f"http://127.0.0.1:{gw_port}/metrics", timeout=10) as r:
                metrics = token_counters(r.read().decode("utf-8"))
        finally:
            stop_process(gateway)
    finally:
        stop_process(upstream)
    return {"statuses": statuses, "send_s": send_s, "metrics": metrics}


def run(cfg: GatewayAuditConfig) -> dict[str, Any]:
    """The whole run: requests through the gateway, the audit of its log (report in ``cfg.report_dir``), and the
    comparison of the audit's totals with the gateway's own counts."""
    from ragtrim.audit.cli import config_from_args
    from ragtrim.audit.core import run_audit, write_report
    from ragtrim.audit.reader import SkipLog, read_requests
    from ragtrim.cli import build_parser
    from ragtrim.text.tokens import get_counter
    from ragtrim_bench.datasets.nq import golden_multidoc

    load_before = load_average()
    instances = golden_multidoc(cfg.requests, offset=cfg.offset)
    bodies = rag_chat_bodies(instances, history_every=cfg.history_every, max_tokens=cfg.output_tokens)
    served = serve_and_log(cfg, [(inst.id, body) for inst, body in zip(instances, bodies, strict=True)])
    entries = [json.loads(line) for line in cfg.log.read_text(encoding="utf-8").splitlines() if line.strip()]

    argv = audit_argv(cfg)
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    report = run_audit(args.logs, config_from_args(args))
    audit_s = time.perf_counter() - t0
    json_path, html_path = write_report(report, args.out)
    numbering = numbering_tokens(read_requests(cfg.log, skipped=SkipLog()), get_counter(cfg.tokenizer))
    return summarize(cfg, served, entries, report, numbering) | {
        "argv": argv,
        "report_bytes": {"json": json_path.stat().st_size, "html": html_path.stat().st_size},
        "seconds": {"send": round(served["send_s"], 2), "audit": round(audit_s, 2)},
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def summarize(cfg: GatewayAuditConfig, served: Mapping[str, Any], entries: Sequence[Mapping[str, Any]],
              report: Mapping[str, Any], numbering: int) -> dict[str, Any]:
    """Flat numbers: the audit's totals, the gateway's (log and metrics) and whether they agree."""
    gw = log_totals(entries)
    metrics = dict(served["metrics"])
    b = report["breakdown"]
    parts = {p: d["tokens"] for p, d in b["parts"].items()}
    sv = report.get("savings") or {}
    context_saved = sv["parts"]["context"]["sample_tokens_saved"] if sv.get("sampled_requests") else None
    gateway_documents_saved = gw["documents_before"] - gw["documents_after"]
    ok = [e for e in entries if e.get("outcome") == "ok"]
    timings = {name: summarize_ms([e["timings_ms"][key] for e in ok if e["timings_ms"].get(key) is not None], name)
               for name, key in (("gateway_trim", "trim"), ("upstream_ttft", "upstream_ttft"))} if ok else {}
    return {
        "benchmark": "audit_gateway",
        "config": {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
                   for k, v in asdict(cfg).items()},
        "requests_sent": len(served["statuses"]),
        "requests_ok": sum(s == 200 for s in served["statuses"]),
        "audit": {
            "requests": b["requests"],
            "prompt_tokens": b["prompt_tokens"],
            "parts": parts,
            "largest_part": max(parts, key=lambda p: parts[p]),
            "context_share": round(parts["context"] / b["prompt_tokens"], 4) if b["prompt_tokens"] else 0.0,
            "prefix_cache_served_share_as_logged": report["prefix_cache"]["as_logged"][
                "served_share_of_prompt_tokens"],
            "prefix_cache_served_share_recommended": report["prefix_cache"]["recommended_order"][
                "served_share_of_prompt_tokens"],
            "saved_share_of_prompt": sv["prompt"]["saved_share"] if context_saved is not None else None,
            "context_tokens_saved": context_saved,
            "saved_by_stage": {s: d["sample_tokens_saved"] for s, d in sv.get("by_stage", {}).items()},
        },
        "gateway": {
            "log": gw,
            "metrics": metrics,
            "numbering_tokens": numbering,
            "documents_saved": gateway_documents_saved,
            "saved_share_of_prompt": round(gw["saved"] / gw["prompt_before"], 4) if gw["prompt_before"] else 0.0,
        },
        # The audit counts what the client sent, piece by piece; the gateway counts the prompt it would forward
        # untrimmed, its numbered documents block included. So the prompt totals differ by exactly that block.
        "prompt_tokens_gap": gw["prompt_before"] - b["prompt_tokens"],
        "match": {
            "log_lines_equal_requests": gw["lines"] == len(served["statuses"]) == b["requests"],
            "metrics_equal_log": metrics.get("prompt_in") == gw["prompt_before"]
                                 and metrics.get("prompt_out") == gw["prompt_after"],
            "context_equals_gateway_documents_before": parts["context"] == gw["documents_before"],
            "prompt_plus_numbering_equals_gateway_prompt_before":
                b["prompt_tokens"] + numbering == gw["prompt_before"],
            "context_saved_equals_gateway_documents_saved": context_saved == gateway_documents_saved,
        },
        "timings_ms": timings,
    }
