"""Prints QA savings benchmark results as plain-text tables (the only module of the QA benchmark that prints).

Formatting is left to ``ragtrim._table``; this module picks columns and writes to stdout/stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ragtrim._util.table import format_table

QA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("method", "method"),
    ("mean_tokens_before_cl100k", "tok before"),
    ("mean_tokens_after_cl100k", "tok after"),
    ("mean_tokens_after_gemma3", "gemma after"),
    ("compression_ratio_cl100k", "ratio"),
    ("answer_recall", "answer rec"),
    ("gold_passage_recall", "gold rec"),
    ("p50_trim_ms", "warm p50 ms"),
    ("p99_trim_ms", "warm p99 ms"),
    ("n_errors", "err"),
)

LATENCY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("method", "method"),
    ("condition", "condition"),
    ("n_requests", "n"),
    ("mean_chunks_before", "passages"),
    ("p50_trim_ms", "p50 ms"),
    ("p95_trim_ms", "p95 ms"),
    ("p99_trim_ms", "p99 ms"),
    ("peak_traced_python_mib", "py heap MiB"),
    ("max_rss_mib", "RSS MiB"),
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
    latency = result.get("latency") or []
    if latency:
        parts.append("== trim latency per request at the budget nearest 1/4 (cold: nothing cached; primed: passage "
                     "embeddings cached, query + sentences new) ==")
        parts.append(format_table(latency, LATENCY_COLUMNS))
        parts.append("")
    if result.get("default_pipeline"):
        names = [s.get("type", "?") for s in result["default_pipeline"].get("stages", [])]
        parts.append(f"ragtrim-default = default_stages(budget=b) = {' -> '.join(map(str, names))} "
                     f"(scorer auto -> {result.get('default_scorer_resolved')})")
    for note in result.get("notes", []):
        parts.append(f"note: {note}")
    parts.append(f"wall {result.get('wall_s', 0):.0f} s, max RSS {result.get('max_rss_mib', 0):.0f} MiB, "
                 f"{(result.get('host') or {}).get('cpu_count', os.cpu_count())} CPUs; tokens counted with "
                 f"{result.get('tokenizers', {})}")
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

