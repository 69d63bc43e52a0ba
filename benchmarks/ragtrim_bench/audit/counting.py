"""Does the audit's documents table count what ragtrim's stages remove? The synthetic log (``audit synth``) audited
with every request trimmed: HTML boilerplate in the table vs the HTML stage's tokens saved, duplicates in the table
vs the dedup stage's.

Run: ragtrim-bench audit counting [--requests 2000]  -> benchmarks/results/audit/counting.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from ragtrim.audit import AuditConfig, SavingsConfig, run_audit
from ragtrim_bench.audit.synth import DEFAULT_OUT, SynthConfig, write_log
from ragtrim_bench.common.results import command_line, result_path, write_result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/audit/counting.json")
    args = parser.parse_args(argv)
    log = DEFAULT_OUT / f"synth-{args.requests // 1000}k-seed{args.seed}.jsonl.gz"
    if not log.exists():
        write_log(SynthConfig(requests=args.requests, seed=args.seed), log)
    t0 = time.perf_counter()
    r = run_audit(log, AuditConfig(savings=SavingsConfig(sample=0)))
    docs, stages = r["documents"], r["savings"]["by_stage"]
    w = docs["within_request"]
    duplicates = w["exact_duplicate_tokens"] + w["near_duplicate_tokens"]
    result = {
        "benchmark": "audit_counting",
        "log": {"synth_requests": args.requests, "seed": args.seed, "requests": r["breakdown"]["requests"],
                "prompt_tokens": r["breakdown"]["prompt_tokens"], "tokenizer": r["tokenizer"]},
        "html": {"documents_table_boilerplate_tokens": docs["html"]["boilerplate_tokens"],
                 "html_stage_tokens_saved": stages["html"]["sample_tokens_saved"],
                 "equal": docs["html"]["boilerplate_tokens"] == stages["html"]["sample_tokens_saved"]},
        "duplicates": {"documents_table_exact_tokens": w["exact_duplicate_tokens"],
                       "documents_table_near_tokens": w["near_duplicate_tokens"],
                       "documents_table_tokens": duplicates,
                       "dedup_stage_tokens_saved": stages["dedup"]["sample_tokens_saved"],
                       "relative_difference": round(duplicates / stages["dedup"]["sample_tokens_saved"] - 1, 4)
                       if stages["dedup"]["sample_tokens_saved"] else None},
        "every_request_trimmed": r["savings"]["exact"],
        "seconds": round(time.perf_counter() - t0, 1),
    }
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    print(f"HTML boilerplate: table {result['html']['documents_table_boilerplate_tokens']:,}, HTML stage "
          f"{result['html']['html_stage_tokens_saved']:,} (equal: {result['html']['equal']}); duplicates: table "
          f"{duplicates:,} (exact {w['exact_duplicate_tokens']:,}, near {w['near_duplicate_tokens']:,}), dedup stage "
          f"{stages['dedup']['sample_tokens_saved']:,}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
