"""Prints the peer comparison as Markdown tables (the only module of ``peers`` that prints): recall per split, the
default's paired gaps to each peer, tokens sent and overshoot, cold cost. ``python -m ragtrim_bench.peers.report
JSON [--plot]`` prints a written result again (and redraws its plot) without rerunning anything."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["cost_table", "gap_table", "main", "print_error", "print_report", "recall_table", "report_text",
           "token_table"]


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value, spec)


def _number(value: Any) -> float:
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def _axes(records: Sequence[Mapping[str, Any]], split: str) -> tuple[list[Mapping[str, Any]], list[str], list[str],
                                                                        list[int]]:
    sub = [r for r in records if r["split"] == split]
    return (sub, list(dict.fromkeys(r["row"] for r in sub)), list(dict.fromkeys(r["column"] for r in sub)),
            sorted({int(r["ratio"]) for r in sub}))


def recall_table(result: Mapping[str, Any], split: str) -> str:
    """Rows x columns, each cell "recall at 4x / 8x / 16x" (n/a where the row did not run); a row that ran on fewer
    requests says how many; the peers that cannot run here close the table."""
    sub, rows, columns, ratios = _axes(result.get("records", []), split)
    cell = {(r["row"], r["column"], int(r["ratio"])): r for r in sub}
    n = {c: max((r["n"] for r in sub if r["column"] == c), default=0) for c in columns}
    body = []
    for row in rows:
        cells = []
        for c in columns:
            got = [cell.get((row, c, k)) for k in ratios]
            text = " / ".join(_fmt(g["answer_recall"], ".3f") if g else "n/a" for g in got)
            short = next((g["n"] for g in got if g and g["n"] < n[c]), None)
            cells.append(text + (f" (n={short})" if short else ""))
        body.append([row, *cells])
    body += [[u["name"], *["cannot run offline" for _ in columns]] for u in result.get("unavailable", [])]
    return _markdown(["row", *[f"{c} (n={n[c]})" for c in columns]], body)


def gap_table(result: Mapping[str, Any], split: str) -> str:
    """Per peer and column: the default's recall minus the peer's at each ratio on the same requests, ``*`` where
    the exact McNemar p < 0.05 (a negative starred cell is a cell the peer wins)."""
    comps = [c for c in result.get("comparisons", []) if c["split"] == split]
    if not comps:
        return ""
    rows = list(dict.fromkeys(c["row"] for c in comps))
    columns = list(dict.fromkeys(c["column"] for c in comps))
    ratios = sorted({int(c["ratio"]) for c in comps})
    by = {(c["row"], c["column"], int(c["ratio"])): c for c in comps}

    def one(c: Mapping[str, Any] | None) -> str:
        if c is None:
            return "n/a"
        star = "*" if c["mcnemar_p"] < 0.05 else ""
        return f"{c['recall_diff']:+.2f}{star}"

    body = [[row, *[" / ".join(one(by.get((row, col, k))) for k in ratios) for col in columns]] for row in rows]
    return _markdown(["default minus", *columns], body)


def token_table(result: Mapping[str, Any]) -> str:
    """Per row and ratio over every column and split: mean tokens sent over the mean budget, and how often (and by
    how much on average) the row's own output was over the budget before the cut."""
    records: Sequence[Mapping[str, Any]] = result.get("records", [])
    rows = list(dict.fromkeys(r["row"] for r in records))
    ratios = sorted({int(r["ratio"]) for r in records})
    body = []
    for row in rows:
        cells = []
        for k in ratios:
            sub = [r for r in records if r["row"] == row and int(r["ratio"]) == k]
            n = sum(r["n"] for r in sub)
            sent = sum(_number(r["mean_output_tokens"]) * r["n"] for r in sub) / n if n else math.nan
            budget = sum(_number(r["mean_budget_tokens"]) * r["n"] for r in sub) / n if n else math.nan
            over = sum(r["n_overshoot"] for r in sub)
            extra = [r["mean_overshoot_tokens"] * r["n_overshoot"] for r in sub if r["n_overshoot"]]
            cells.append(f"{_fmt(sent, '.0f')} / {_fmt(budget, '.0f')}; over {over}/{n}"
                         + (f" (+{sum(extra) / over:.0f})" if over else ""))
        body.append([row, *cells])
    return _markdown(["row", *[f"{k}x: sent / budget (mean); own output over budget (mean excess)" for k in ratios]],
                     body)


def cost_table(cost: Sequence[Mapping[str, Any]]) -> str:
    header = ["row", "n timed", "cold p50 ms", "cold p99 ms", "CPU s (mean)", "p50 / default"]
    body = [[str(r["row"]), str(r["n"]), _fmt(r["cold_p50_ms"], ".1f"), _fmt(r["cold_p99_ms"], ".1f"),
             _fmt(r["cold_mean_cpu_s"], ".3f"), _fmt(r.get("cold_p50_vs_default"), ".1f")] for r in cost]
    return _markdown(header, body)


def peer_wins(result: Mapping[str, Any]) -> list[str]:
    """One line per (peer, column, split, ratio) a peer wins with p < 0.05."""
    return [f"{c['row']} beats the default on {c['column']} {c['split']} {c['ratio']}x: {c['peer_recall']:.3f} vs "
            f"{c['reference_recall']:.3f} (only peer {c['n_only_peer']}, only default {c['n_only_reference']}, "
            f"p {c['mcnemar_p']:.3f})" for c in result.get("comparisons", []) if c["peer_wins_significantly"]]


def report_text(result: Mapping[str, Any]) -> str:
    records: Sequence[Mapping[str, Any]] = result.get("records", [])
    parts: list[str] = []
    for split in dict.fromkeys(r["split"] for r in records):
        parts += [f"## answer recall, {split} (4x / 8x / 16x fewer tokens)", "", recall_table(result, split), ""]
        gaps = gap_table(result, split)
        if gaps:
            parts += [f"## the default minus each peer, {split}, same requests (* exact McNemar p < 0.05)", "",
                      gaps, ""]
    parts += ["## tokens sent, and the peers' own overshoot before the budget cut", "", token_table(result), ""]
    parts += ["## cold cost of the 4x call (all columns and splits)", "", cost_table(result.get("cost_by_row", [])),
              ""]
    for failed in result.get("failed_rows", []):
        parts += [f"row {failed['row']} did not run: {failed['error']}", ""]
    wins = peer_wins(result)
    parts += ["## cells a peer wins (p < 0.05)", "", *(wins or ["none"]), ""]
    violations = sum(t["budget_violations"] for t in result.get("totals", {}).values())
    errors = sum(t["errors"] for t in result.get("totals", {}).values())
    parts.append(f"budget violations: {violations}  errors: {errors}  wall: {_fmt(result.get('wall_s'), '.0f')} s  "
                 f"({result.get('command')})")
    return "\n".join(parts)


def print_error(message: str) -> None:
    print(f"ragtrim-bench peers: error: {message}", file=sys.stderr)


def print_report(result: Mapping[str, Any], *, json_path: Path, png_path: Path | None) -> None:
    print(report_text(result))
    print(f"wrote {json_path}" + (f" and {png_path}" if png_path else " (no plot: matplotlib missing)"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragtrim_bench.peers.report",
                                     description="print the tables of a peers JSON")
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
        from ragtrim_bench.peers.plot import plot_peers

        print(f"wrote {plot_peers(result, args.path.with_suffix('.png'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
