"""How long each quality-matrix column's questions are, as the default's query adapter counts them
(``ragtrim.text.scripts.query_length``), and how many it maps (longer than ``LONG_QUERY_WORDS``).

Run: ragtrim-bench relevance query_lengths [--limit 400] [--columns ...]
     -> benchmarks/results/relevance/query_lengths.json
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile
from ragtrim_bench.relevance.columns import COLUMNS, build_column


def lengths(columns: Sequence[str], limit: int) -> dict[str, Any]:
    """Per column and split: how many questions, the length's min / p50 / p90 / max, and the share the default's
    adapter maps."""
    from ragtrim.scoring.adapter import LONG_QUERY_WORDS, adapts
    from ragtrim.text.scripts import query_length

    out: dict[str, Any] = {}
    for column in columns:
        for split in ("dev", "heldout"):
            questions = [r.question for r in build_column(column, split, limit=limit)]
            values = [query_length(q) for q in questions]
            out[f"{column}/{split}"] = {
                "n": len(values), "min": min(values), "p50": percentile(values, 50), "p90": percentile(values, 90),
                "max": max(values), "mapped_share": sum(adapts(q, LONG_QUERY_WORDS) for q in questions) / len(values)}
    return out


def report(result: dict[str, Any]) -> str:
    lines = ["| column / split | n | min | p50 | p90 | max | mapped by the default's adapter |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, v in result["columns"].items():
        lines.append(f"| {name} | {v['n']} | {v['min']:g} | {v['p50']:g} | {v['p90']:g} | {v['max']:g} | "
                     f"{v['mapped_share']:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from ragtrim.scoring.adapter import LONG_QUERY_WORDS

    p = argparse.ArgumentParser(prog="ragtrim-bench relevance query_lengths", description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, default=400, help="requests per column and split")
    p.add_argument("--columns", default=",".join(COLUMNS))
    p.add_argument("-o", "--output", type=Path, default=None)
    args = p.parse_args(argv)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    result = {"limit": args.limit, "long_query_words": LONG_QUERY_WORDS, "columns": lengths(columns, args.limit)}
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    print(report(result))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
