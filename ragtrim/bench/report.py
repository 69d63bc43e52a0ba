"""Prints QA savings benchmark results as plain-text tables (the only module of the QA benchmark that prints).

Formatting is left to ``ragtrim.bench.table``; this module picks columns and writes to stdout/stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ragtrim.bench.table import format_table

QA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("method", "method"),
    ("mean_tokens_before_cl100k", "tok before"),
    ("mean_tokens_after_cl100k", "tok after"),
    ("mean_tokens_after_gemma3", "gemma after"),
    ("compression_ratio_cl100k", "ratio"),
    ("answer_recall", "answer rec"),
    ("gold_passage_recall", "gold rec"),
    ("p50_trim_ms", "p50 ms"),
    ("p95_trim_ms", "p95 ms"),
    ("p99_trim_ms", "p99 ms"),
    ("n_errors", "err"),
)

COLD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("method", "method"),
    ("n_requests", "n"),
    ("mean_chunks_before", "passages"),
    ("p50_trim_cold_ms", "p50 ms"),
    ("p95_trim_cold_ms", "p95 ms"),
    ("p99_trim_cold_ms", "p99 ms"),
    ("peak_traced_python_mib", "peak MiB"),
)


def qa_report_text(result: Mapping[str, Any]) -> str:
    """The whole report as one string: a table per setting, the cold latency table, and notes."""
    rows: Sequence[Mapping[str, Any]] = result.get("rows", [])
    parts: list[str] = []
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    has_impossible = any((r.get("n_unanswerable") or 0) > 0 for r in rows)
    columns = list(QA_COLUMNS)
    if has_impossible:
        columns.insert(7, ("unanswerable_plausible_kept_rate", "plausible kept"))
    for setting in settings:
        sub = [r for r in rows if r["setting"] == setting]
        n = sub[0].get("n_requests", 0) if sub else 0
        parts.append(f"== {setting} ({n} requests) ==")
        parts.append(format_table(sub, columns))
        parts.append("")
    cold = result.get("cold_latency") or []
    if cold:
        parts.append("== trim latency per request, no embedding cache (budget nearest 1/4) ==")
        parts.append(format_table(cold, COLD_COLUMNS))
        parts.append("")
    for note in result.get("notes", []):
        parts.append(f"note: {note}")
    parts.append(f"wall {result.get('wall_s', 0):.0f} s, max RSS {result.get('max_rss_mib', 0):.0f} MiB, "
                 f"{result.get('cpu_count')} CPUs; tokens counted with {result.get('tokenizers', {})}")
    return "\n".join(parts)


def print_qa_report(result: Mapping[str, Any], *, json_path: Path | None = None, png_path: Path | None = None,
                    stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    print(qa_report_text(result), file=out)
    if json_path is not None:
        print(f"wrote {json_path}", file=out)
    if png_path is not None:
        print(f"wrote {png_path}", file=out)


def print_error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
