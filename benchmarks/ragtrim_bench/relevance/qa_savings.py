"""QA savings benchmark: how much of the prompt each trimming method removes and whether the answer survives.

Usage: ragtrim-bench relevance qa_savings --dataset nq|nq-random|squad [--n-docs 20|30] [--offset N]
       [--positions first,middle,last] [--limit 500] [--methods none,bm25-budget,...] [--fractions 1/2,1/4,1/8,1/16]
Writes benchmarks/results/relevance/qa_savings_<label>.json and qa_recall_vs_ratio_<label>.png. See
docs/qa-benchmark.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ragtrim_bench.common.results import command_line
from ragtrim_bench.relevance.qa import add_bench_args, run_bench


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bench_args(parser)
    return run_bench(parser.parse_args(argv), command=command_line(__spec__.name, argv))


if __name__ == "__main__":
    raise SystemExit(main())
