"""Digests of what ``trim()`` returns on the quality matrix's requests, to show that a speed change changed no output.

  ragtrim-bench pipeline output_digest [--scorers auto,bm25] [--columns ...] [--split both] [--limit N]
                                       [--count-threads N] [--against OLD.json] [-o PATH]

Per request, scorer and ratio (4x, 8x, 16x fewer tokens, the matrix's budgets): a digest of the output text, the
token counts, and a digest of the trace's removal records (stage, chunk, action, reason, tokens, detail). With
``--against`` the run is compared with an earlier one (another checkout's, or before a change) and every request
whose text or trace differs is listed; the exit status is 1 when any differs (requests that only one run holds are
listed apart: a run with another ``--limit`` draws other requests). ``--count-threads`` counts the input on that
many threads whatever this host's cores (``pipeline stage_cost``'s option), so that a host of two cores runs the path
a larger one takes. Nothing is timed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.pipeline.stage_cost import add_count_threads_argument, apply_count_threads
from ragtrim_bench.relevance.columns import COLUMNS, SPLITS, build_column

RATIOS = (4, 8, 16)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def trace_text(result: Any) -> str:
    """The removal records of a trim, one line each, in trace order."""
    return "\n".join(f"{r.stage}|{r.chunk_id}|{r.action}|{r.reason}|{r.tokens_removed}|{r.detail}"
                     for report in result.trace for r in report.removals)


def run(scorers: Sequence[str], columns: Sequence[str], splits: Sequence[str], limit: int,
        ratios: Sequence[int] = RATIOS) -> dict[str, Any]:
    from ragtrim import get_counter, trim
    from ragtrim_bench.relevance.matrix import budget_for, context_tokens

    counter = get_counter(None)
    records: dict[str, dict[str, Any]] = {}
    for column in columns:
        for split in splits:
            for request in build_column(column, split, limit=limit, seed=0):  # type: ignore[arg-type]
                chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate(request.passages)]
                tokens = context_tokens(request, counter)
                for scorer in scorers:
                    for ratio in ratios:
                        result = trim(chunks, query=request.question, budget=budget_for(tokens, ratio),
                                      scorer=scorer)  # type: ignore[arg-type]
                        records[f"{scorer}/{column}/{split}/{request.id}/{ratio}"] = {
                            "text": digest(result.text), "tokens_before": result.tokens_before,
                            "tokens_after": result.tokens_after, "trace": digest(trace_text(result))}
    combined = digest(json.dumps(records, sort_keys=True))
    return {"benchmark": "output_digest", "scorers": list(scorers), "columns": list(columns),
            "splits": list(splits), "limit": limit, "ratios": list(ratios), "n": len(records),
            "combined_digest": combined, "records": records}


def differences(new: dict[str, Any], old: dict[str, Any]) -> dict[str, list[str]]:
    """Keys whose text differs, whose trace (only) differs, and those present in one run only."""
    a, b = new["records"], old["records"]
    text = [k for k in a if k in b and (a[k]["text"], a[k]["tokens_after"]) != (b[k]["text"], b[k]["tokens_after"])]
    trace = [k for k in a if k in b and k not in text and a[k] != b[k]]
    missing = sorted(set(a) ^ set(b))
    return {"text": text, "trace_only": trace, "in_one_run_only": missing}


def _names(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scorers", default="auto,bm25,fast")
    parser.add_argument("--columns", default=",".join(COLUMNS))
    parser.add_argument("--split", default="both", choices=("dev", "heldout", "both"))
    parser.add_argument("--limit", type=int, default=100)
    add_count_threads_argument(parser)
    parser.add_argument("--against", type=Path, default=None, help="an earlier run's JSON to compare with")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/pipeline/output_digest.json")
    args = parser.parse_args(argv)
    apply_count_threads(parser, args.count_threads)
    splits = SPLITS if args.split == "both" else (args.split,)
    result = run(_names(args.scorers), _names(args.columns), splits, args.limit)
    status = 0
    if args.against is not None:
        diff = differences(result, json.loads(args.against.read_text(encoding="utf-8")))
        result["against"] = {"path": str(args.against), **{k: v for k, v in diff.items()}}
        for kind, keys in diff.items():
            print(f"{kind}: {len(keys)} of {result['n']}" + (f" (first: {', '.join(keys[:5])})" if keys else ""))
        status = 1 if diff["text"] or diff["trace_only"] else 0
    print(f"{result['n']} outputs, combined digest {result['combined_digest']}")
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    print(f"wrote {out}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
