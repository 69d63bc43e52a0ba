"""Prints the quality matrix as Markdown tables (the only module of the matrix that prints): recall per split, the
default's paired gaps, then cold cost per row. ``python -m ragtrim_bench.relevance.report JSON [--plot]`` prints
the tables of a written result again (and redraws its plot), without rerunning anything."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrim_bench.relevance.qa_report import print_error

__all__ = ["cost_table", "gap_table", "main", "print_error", "print_report", "recall_table", "report_text"]


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value, spec)


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def recall_table(records: Sequence[Mapping[str, Any]], split: str) -> str:
    """Rows x columns, each cell "recall at 4x / 8x / 16x" (n/a where the row did not run on the column)."""
    sub = [r for r in records if r["split"] == split]
    rows = list(dict.fromkeys(r["row"] for r in sub))
    columns = list(dict.fromkeys(r["column"] for r in sub))
    ratios = sorted({int(r["ratio"]) for r in sub})
    cell = {(r["row"], r["column"], int(r["ratio"])): r["answer_recall"] for r in sub}
    n = {c: max((r["n"] for r in sub if r["column"] == c), default=0) for c in columns}
    header = ["row", *[f"{c} (n={n[c]})" for c in columns]]
    body = [[row, *[" / ".join(_fmt(cell.get((row, c, k)), ".3f") for k in ratios)
                    if any((row, c, k) in cell for k in ratios) else "n/a" for c in columns]] for row in rows]
    return _markdown(header, body)


def gap_table(result: Mapping[str, Any], split: str) -> str:
    """Per column and ratio: the default minus the best named scorer (which one, and the paired McNemar p), and the
    default minus the plain baseline (p); empty when the default did not run."""
    comps = result.get("comparisons", {})
    best = {(c["column"], c["ratio"]): c for c in comps.get("default_vs_best_named_scorer", []) if c["split"] == split}
    plain = {(c["column"], c["ratio"]): c for c in comps.get("default_vs_plain_bm25", []) if c["split"] == split}
    keys = list(dict.fromkeys([*best, *plain]))
    if not keys:
        return ""
    columns = list(dict.fromkeys(c for c, _ in keys))
    ratios = sorted({k for _, k in keys})

    def cell(c: Mapping[str, Any] | None, named: bool) -> str:
        if c is None:
            return "n/a"
        who = f"{c['against']}, " if named else ""
        return f"{c['recall_diff']:+.3f} ({who}p {c['mcnemar_p']:.2f})"

    body = [[column, *[f"{cell(best.get((column, k)), True)}; {cell(plain.get((column, k)), False)}"
                       for k in ratios]] for column in columns]
    return _markdown(["column", *[f"{k}x: vs best named scorer; vs plain-bm25" for k in ratios]], body)


def cost_table(cost: Sequence[Mapping[str, Any]]) -> str:
    """Per row: cold p50 / p99 ms and mean CPU s at 4x over every request, the ratio to the BM25 rows, and the p50
    per column."""
    columns = list(dict.fromkeys(c for r in cost for c in r.get("cold_p50_ms_by_column", {})))
    header = ["row", "cold p50 ms", "cold p99 ms", "CPU s (mean)", "p50 / bm25", "p50 / plain-bm25",
              *[f"p50 {c}" for c in columns]]
    body = [[str(r["row"]), _fmt(r["cold_p50_ms"], ".1f"), _fmt(r["cold_p99_ms"], ".1f"),
             _fmt(r["cold_mean_cpu_s"], ".3f"), _fmt(r.get("cold_p50_vs_bm25"), ".1f"),
             _fmt(r.get("cold_p50_vs_plain_bm25"), ".1f"),
             *[_fmt(r.get("cold_p50_ms_by_column", {}).get(c), ".1f") for c in columns]] for r in cost]
    return _markdown(header, body)


def report_text(result: Mapping[str, Any]) -> str:
    records: Sequence[Mapping[str, Any]] = result.get("records", [])
    parts: list[str] = []
    for split in dict.fromkeys(r["split"] for r in records):
        parts += [f"## answer recall, {split} (4x / 8x / 16x fewer tokens)", "", recall_table(records, split), ""]
        gaps = gap_table(result, split)
        if gaps:
            title = f"## the default minus the best named scorer, and minus plain-bm25, {split} (paired McNemar p)"
            parts += [title, "", gaps, ""]
    parts += ["## cold cost of the trim call at 4x (all columns and splits)", "",
              cost_table(result.get("cost_by_row", [])), ""]
    parts.append(f"budget violations: {result.get('budget_violations_total')}  errors: {result.get('errors_total')}"
                 f"  wall: {_fmt(result.get('wall_s'), '.0f')} s  ({result.get('command')})")
    return "\n".join(parts)


def print_report(result: Mapping[str, Any], *, json_path: Path, png_path: Path | None) -> None:
    print(report_text(result))
    print(f"wrote {json_path}" + (f" and {png_path}" if png_path else " (no plot: matplotlib missing)"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragtrim_bench.relevance.report",
                                     description="print the tables of a quality matrix JSON")
    parser.add_argument("path", type=Path)
    parser.add_argument("--plot", action="store_true", help="redraw the PNG beside the JSON")
    args = parser.parse_args(argv)
    try:
        result = json.loads(args.path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        print_error(f"cannot read {args.path}: {exc}")
        return 1
    print(report_text(result))
    if args.plot:
        from ragtrim_bench.relevance.plot import plot_matrix

        print(f"wrote {plot_matrix(result, args.path.with_suffix('.png'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
