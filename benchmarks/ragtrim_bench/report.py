"""Prints QA savings benchmark results as plain-text tables (the only module of the QA benchmark that prints).

Formatting is left to ``ragtrim.bench.table``; this module picks columns and writes to stdout/stderr.
"""

from __future__ import annotations

import math
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


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def qa_markdown(result: Mapping[str, Any], *, families: Sequence[str] | None = None) -> str:
    """Markdown tables for docs/qa-benchmark.md: one per setting (recalls, tokens in cl100k and Gemma 3, ratio,
    warm latency), then the latency table (cold / primed)."""
    rows: Sequence[Mapping[str, Any]] = result.get("rows", [])
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    impossible = any((r.get("n_unanswerable") or 0) > 0 for r in rows)
    head = ["method", "tok before", "tok after", "gemma before", "gemma after", "ratio", "answer rec", "gold rec"]
    if impossible:
        head.append("plausible kept")
    head += ["warm p50 ms"]
    parts: list[str] = []
    for setting in settings:
        sub = [r for r in rows if r["setting"] == setting and (families is None or r.get("family") in families)]
        n = sub[0].get("n_requests", 0) if sub else 0
        parts.append(f"**{setting}** ({n} requests)\n")
        parts.append("| " + " | ".join(head) + " |")
        parts.append("|" + "---|" * len(head))
        for r in sub:
            cells = [f"`{r['method']}`", _fmt(r.get("mean_tokens_before_cl100k"), 0),
                     _fmt(r.get("mean_tokens_after_cl100k"), 0), _fmt(r.get("mean_tokens_before_gemma3"), 0),
                     _fmt(r.get("mean_tokens_after_gemma3"), 0), _fmt(r.get("compression_ratio_cl100k"), 2),
                     _fmt(r.get("answer_recall")), _fmt(r.get("gold_passage_recall"))]
            if impossible:
                cells.append(_fmt(r.get("unanswerable_plausible_kept_rate")))
            cells.append(_fmt(r.get("p50_trim_ms"), 1))
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
    latency = result.get("latency") or []
    if latency:
        parts.append("| method | condition | n | p50 ms | p95 ms | p99 ms | peak Python heap MiB "
                     "| process peak RSS MiB |")
        parts.append("|---|---|---|---|---|---|---|---|")
        for r in latency:
            parts.append(f"| `{r['method']}` | {r['condition']} | {r['n_requests']} | {_fmt(r.get('p50_trim_ms'), 1)} "
                         f"| {_fmt(r.get('p95_trim_ms'), 1)} | {_fmt(r.get('p99_trim_ms'), 1)} "
                         f"| {_fmt(r.get('peak_traced_python_mib'), 2)} | {_fmt(r.get('max_rss_mib'), 0)} |")
        parts.append("")
    return "\n".join(parts)


TARGETS: tuple[tuple[str, float], ...] = (("1/4", 0.98), ("1/8", 0.96), ("1/16", 0.90))
"""Issue 3's answer-recall targets on NQ-20 hard: >= 0.98 at 4x, >= 0.96 at 8x, >= 0.90 at 16x."""


TARGET_FAMILIES = ("ragtrim-default", "ragtrim-bm25", "ragtrim-emb-sent", "bm25-budget")


def targets_markdown(result: Mapping[str, Any], *, families: Sequence[str] = TARGET_FAMILIES) -> str:
    """Answer recall per setting at budgets 1/4, 1/8, 1/16 for ``families``, each marked against the target."""
    rows: Sequence[Mapping[str, Any]] = result.get("rows", [])
    by = {(r["setting"], r.get("family"), r.get("budget_label")): r for r in rows}
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    head = ["setting", "family"] + [f"{b} (target {t:.2f})" for b, t in TARGETS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for setting in settings:
        for fam in families:
            cells = [setting, f"`{fam}`"]
            present = False
            for label, target in TARGETS:
                r = by.get((setting, fam, label))
                if r is None or r.get("answer_recall") is None:
                    cells.append("-")
                    continue
                present = True
                rec = float(r["answer_recall"])
                cells.append(f"{rec:.3f} {'met' if rec >= target else 'MISSED'}")
            if present:
                out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
