"""Paired before/after comparison of two quality-matrix runs (``ragtrim_bench.relevance.matrix`` JSONs) on the same
requests: per row, column, split and ratio, the answers kept before and after, how many requests flipped each way,
and the exact McNemar p-value of the flips.

  ragtrim-bench languages paired BEFORE.json AFTER.json [--output PATH]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim.errors import InputError
from ragtrim_bench.common.results import command_line, result_path, write_result

MODULE = "ragtrim_bench.languages.paired"


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value: the chance of a split at least this uneven among ``gained + lost`` flips,
    each equally likely either way (1.0 when nothing flipped)."""
    n = gained + lost
    if n == 0:
        return 1.0
    k = min(gained, lost)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per (row, column, split, ratio) present in both runs, with equal request counts."""
    def key(r: dict[str, Any]) -> tuple[str, str, str, int]:
        return (r["row"], r["column"], r["split"], int(r["ratio"]))

    old = {key(r): r for r in before["records"]}
    out: list[dict[str, Any]] = []
    for rec in after["records"]:
        prev = old.get(key(rec))
        if prev is None:
            continue
        a, b = prev["kept_bits"], rec["kept_bits"]
        if len(a) != len(b):
            raise InputError(f"{key(rec)}: {len(a)} requests before, {len(b)} after; run both on the same requests")
        gained = sum(1 for x, y in zip(a, b) if x == "0" and y == "1")
        lost = sum(1 for x, y in zip(a, b) if x == "1" and y == "0")
        out.append({"row": rec["row"], "column": rec["column"], "split": rec["split"], "ratio": rec["ratio"],
                    "n": len(b), "recall_before": round(a.count("1") / len(a), 3),
                    "recall_after": round(b.count("1") / len(b), 3), "gained": gained, "lost": lost,
                    "mcnemar_p": round(mcnemar_exact(gained, lost), 4)})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragtrim_bench.languages.paired", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--output", default=None, help="the JSON (default: benchmarks/results/languages/paired.json)")
    args = parser.parse_args(argv)
    lines = compare(json.loads(Path(args.before).read_text()), json.loads(Path(args.after).read_text()))
    for line in lines:
        print(f"{line['row']:>8} {line['column']:>14} {line['split']:>7} {line['ratio']:>2}x  "
              f"{line['recall_before']:.3f} -> {line['recall_after']:.3f}  +{line['gained']} -{line['lost']}  "
              f"p {line['mcnemar_p']:.3f}")
    path = Path(args.output) if args.output else result_path(MODULE)
    print("wrote", write_result(path, {"before": args.before, "after": args.after, "comparisons": lines},
                                command=command_line(MODULE, argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
