"""The audit in one pass over the log: count every request's parts, follow prefixes, documents and conversations,
keep a sample for the savings run (``ragtrim.audit.state``), then assemble the report (a JSON-ready dict with every
number). ``run_audit`` is the local engine; the Ray engine builds the same state from shards and calls
``build_report`` too."""

from __future__ import annotations

import json
import resource
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim.audit.capacity import plan_section
from ragtrim.audit.config import AuditConfig
from ragtrim.audit.formats import READ_FORMATS
from ragtrim.audit.html import bin_values, prompt_edges, render_html, shares
from ragtrim.audit.levers import levers
from ragtrim.audit.reader import MAX_SKIP_EXAMPLES, PARTS, EmptyLogError, SkipLog
from ragtrim.audit.savings import (
    SampleRecord,
    measure,
    summarize_savings,
    ttft_change,
)
from ragtrim.audit.shards import plan_shards
from ragtrim.audit.state import AuditState, Workspace
from ragtrim.errors import ConfigError
from ragtrim.text.tokens import TokenCounter

REPORT_VERSION = 1
PLOTS = ("part_share", "part_share_per_request", "prompt_tokens_before_after", "prefix_cache", "savings_by_part",
         "top_requests")
"""The plots of the HTML report, each an ``<svg data-plot="...">``; the JSON lists those drawn."""


def run_audit(path: str | Path | Sequence[str | Path], config: AuditConfig | None = None) -> dict[str, Any]:
    """Audit the request log at ``path`` (JSONL, plain or gzip; ``-`` for stdin), or several logs read as one in
    the order given, in this process, and return the report. ``ragtrim.engines.ray_audit`` gives the same report
    from a Ray cluster."""
    cfg = config or AuditConfig()
    started = time.perf_counter()
    paths = log_paths(path)
    state = AuditState(cfg)
    workspace = Workspace(cfg, state.documents)
    for shard in plan_shards(paths):
        state.read(shard, workspace, cfg)
    check_not_empty(state)
    breakdown_seconds = time.perf_counter() - started
    savings_started = time.perf_counter()
    records = measure_sample(state, workspace.counter, cfg)
    return build_report(state, cfg, records, tokenizer=workspace.counter.name, started=started,
                        breakdown_seconds=breakdown_seconds, savings_seconds=time.perf_counter() - savings_started,
                        engine={"engine": "local", "workers": 1, "shards": len(paths)})


def log_paths(path: str | Path | Sequence[str | Path]) -> list[str]:
    """One log or several, as a list of paths (an empty list is a usage error)."""
    paths = [str(path)] if isinstance(path, (str, Path)) else [str(p) for p in path]
    if not paths:
        raise ConfigError("give at least one request log")
    return paths


def check_not_empty(state: AuditState) -> None:
    """Raise EmptyLogError when no file gave a request, saying why for each."""
    if state.breakdown.requests:
        return
    files = state.ordered_files()
    if len(files) == 1:
        raise EmptyLogError(_empty_message(files[0].path, files[0].skipped))
    raise EmptyLogError(f"none of the {len(files)} request logs holds a request the audit reads: "
                        + "; ".join(_empty_message(f.path, f.skipped) for f in files))


def measure_sample(state: AuditState, counter: TokenCounter, cfg: AuditConfig) -> list[SampleRecord]:
    """ragtrim's pipeline on every sampled request, in input order (none without ``cfg.savings``)."""
    if cfg.savings is None:
        return []
    return [measure(req, parts, output, counter, cfg.savings) for req, parts, output in state.sample.items]


def build_report(state: AuditState, cfg: AuditConfig, records: Sequence[SampleRecord], *, tokenizer: str,
                 started: float, breakdown_seconds: float, savings_seconds: float,
                 engine: dict[str, Any]) -> dict[str, Any]:
    """The report of a whole input's state and its sample's savings records (both engines call this)."""
    breakdown, prefix, cache_tokens = state.breakdown, state.prefix, state.cache_tokens
    report: dict[str, Any] = {
        "version": REPORT_VERSION,
        "input": _input(state, cfg),
        "tokenizer": tokenizer,
        "text_included": cfg.keep_text,
        "breakdown": breakdown.to_dict(),
        "conversations": state.growth.to_dict(),
        "prefix_cache": {
            "capacity_tokens": cache_tokens, "block_size": cfg.block_size,
            "as_logged": prefix.as_logged.to_dict(), "recommended_order": prefix.recommended.to_dict(),
            "system_prompts": prefix.system_summary(breakdown.requests),
            "advice": prefix.advice(breakdown.requests),
            "method": "LRU over prompt prefixes at segment granularity (message, document), in log order; served "
                      "tokens rounded down to full blocks; message framing not counted as served",
        },
        "documents": state.documents.to_dict(sum(breakdown.part_totals.values())),
    }
    if cfg.savings is not None:
        report["savings"] = summarize_savings(records, breakdown.part_totals, breakdown.requests, cfg.savings)
    if cfg.planner is not None and breakdown.requests:
        report["plan"] = plan_section(cfg.planner, breakdown.prompt_hist, breakdown.output_hist,
                                      breakdown.total_hist, list(records))
    if cfg.ttft_curve is not None and records:
        report["ttft"] = ttft_change(records, cfg.ttft_curve)
    report["levers"] = levers(report, list(records), cfg.planner,
                              history_turns=cfg.savings.history_turns if cfg.savings else 0)
    edges = prompt_edges(breakdown.prompt_hist.max())
    report["prompt_distribution"] = {
        "edges": edges, "log": shares(breakdown.prompt_hist.bins(edges)),
        "sample_before": shares(bin_values([r.prompt_before for r in records], edges)) if records else [],
        "sample_after": shares(bin_values([r.prompt_after for r in records], edges)) if records else [],
        "unit": "share of requests whose prompt tokens fall in [edge, next edge)",
    }
    report["plots"] = [p for p in PLOTS if p != "savings_by_part" or records]
    report["run"] = {
        "seconds": round(time.perf_counter() - started, 3),
        "breakdown_seconds": round(breakdown_seconds, 3),
        "savings_seconds": round(savings_seconds, 3),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "counting": state.counting,
        "parts": list(PARTS),
        **engine,
    }
    return report


def _input(state: AuditState, cfg: AuditConfig) -> dict[str, Any]:
    files = state.ordered_files()
    several = len(files) > 1
    first = files[0]
    stopped = next((f for f in files if f.skipped.stopped_after_line is not None), None)
    formats = list(dict.fromkeys(f.skipped.log_format for f in files))
    seen: Counter[str] = Counter()
    for f in files:
        seen.update(f.skipped.formats_seen)
    by_reason: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    for f in files:
        by_reason.update(f.skipped.counts)
        for e in f.skipped.examples:
            if len(examples) < MAX_SKIP_EXAMPLES:
                e = {"line": e["line"], "reason": e["reason"]} if not cfg.keep_text else dict(e)
                examples.append({"file": f.path, **e} if several else e)
    images = state.images
    return {
        "path": first.path if not several else f"{len(files)} files",
        "format": formats[0] if len(formats) == 1 else "mixed",
        "format_description": "; ".join(dict.fromkeys(_format_description(f.skipped) for f in files)),
        "formats_in_first_lines": dict(seen.most_common()),
        "requests": state.breakdown.requests, "lines_read": sum(f.skipped.lines_read for f in files),
        "complete": stopped is None,
        "stopped_after_line": stopped.skipped.stopped_after_line if stopped else None,
        "stop_reason": stopped.skipped.stop_reason if stopped else None,
        **({"stopped_in": stopped.path} if stopped and several else {}),
        "skipped_lines": {"total": sum(by_reason.values()), "by_reason": dict(sorted(by_reason.items())),
                          "examples": examples},
        "images": {"count": sum(images.values()), "by_part": dict(sorted(images.items())),
                   "tokens_each": cfg.image_tokens,
                   "note": "counted as tokens_each tokens in the part that holds them" if cfg.image_tokens else
                           "not counted as tokens (set --image-tokens to what one image costs the model)"},
        "uncounted_blocks": dict(sorted(state.uncounted.items())),
        "files": [f.to_dict() for f in files],
    }


def write_report(report: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``audit.json`` (every number) and ``audit.html`` (the static page) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "audit.json", out / "audit.html"
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path


def _format_description(skipped: SkipLog) -> str:
    text = READ_FORMATS.get(skipped.log_format, "lines of no known request format")
    others = [k for k in skipped.formats_seen if k != skipped.log_format and k in READ_FORMATS]
    return text + (f", mixed with {', '.join(others)}" if others else "")


SKIP_ADVICE = {
    "log_without_text": "the gateway logged no request text: set [log] log_request = true",
    "vllm_request_without_prompt": "vLLM logged no prompt text: vLLM 0.10 and later log prompts only at DEBUG level "
                                   "(start it with VLLM_LOGGING_LEVEL=DEBUG and --enable-log-requests)",
    "vllm_other_log_line": "a vLLM server log without request lines: start vLLM with --enable-log-requests",
    "not_json": "lines are not JSON: the audit reads JSONL (one JSON object a line), plain or gzip",
}


def _empty_message(path: str, skipped: SkipLog) -> str:
    """Why a log gave no request, in one line: empty, cut short, or every line skipped (with the reasons)."""
    if skipped.stopped_after_line is not None and not skipped.total:
        return (f"request log {path!r} holds no request: reading stopped after line {skipped.stopped_after_line} "
                f"({skipped.stop_reason}); the file is truncated or corrupt")
    if not skipped.total:
        what = "0 lines" if not skipped.lines_read else f"{skipped.lines_read:,} blank lines"
        return f"request log {path!r} is empty ({what}, after decompression for gzip): there is no request to audit"
    reasons = ", ".join(f"{reason} {n:,}" for reason, n in skipped.counts.most_common())
    first = skipped.examples[0] if skipped.examples else None
    text = (f"request log {path!r} holds no request the audit reads: {skipped.lines_read:,} lines, all skipped "
            f"({reasons})")
    if first is not None:
        text += f"; line {first['line']}: {first['detail']}"
    advice = [SKIP_ADVICE[r] for r, _ in skipped.counts.most_common() if r in SKIP_ADVICE]
    if advice:
        text += f". {advice[0]}"
    if skipped.stopped_after_line is not None:
        text += f". Reading stopped after line {skipped.stopped_after_line} ({skipped.stop_reason})"
    return text


def peak_rss_mib() -> float:
    """Peak resident memory of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
