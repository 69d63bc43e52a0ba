"""Dev-only: answer recall of relevance candidates on the NQ 20-passage hard-distractor sets of qa_savings (every
question, gold in the middle), at 1/4 and 1/8 of the tokens, with the default pipeline's other stages.

  python -m benchmarks.dev.fast_recall --limit 500 --candidates bm25,auto,mix-16-0.4-1,mix-32-0.4-1

Questions 0-1061 are the development half (``--offset 0``); candidates are named as in benchmarks/net_latency.py.
Unlike net_latency's single-use requests (each passage in one request only, 99-103 requests), this is the
qa_savings setting: every question of the range, its distractors drawn from the whole pool. Writes
benchmarks/results/dev/fast_recall_q<offset>-<end>.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.net_latency import _scorer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--candidates", default="bm25,auto,mix-16-0.4-1,mix-32-0.4-1,mix-64-0.4-1")
    args = parser.parse_args()
    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim.text.tokens import get_counter
    from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open
    from ragtrim_bench.qa_metrics import answer_in_text

    qs = load_nq_open()
    insts = build_multidoc(qs[args.offset:args.offset + args.limit], n_docs=20, gold_position="middle",
                           distractors="bm25", pool=qs)
    counter = get_counter("cl100k_base")
    rows: list[dict[str, Any]] = []
    for name in args.candidates.split(","):
        scorer = _scorer(name) or "auto"
        kept = {4: 0, 8: 0}
        started = time.perf_counter()
        for inst in insts:
            texts = [p.content for p in inst.passages]
            total = sum(counter.count(t) for t in texts)
            for ratio in kept:
                stages = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                          for s in default_stages(budget=max(1, total // ratio), scorer="bm25")]
                result = Pipeline(stages).run(texts, query=inst.question)
                kept[ratio] += answer_in_text(inst.answers, result.text)
        row = {"candidate": name, "requests": len(insts), "answer_recall_4x": kept[4] / len(insts),
               "answer_recall_8x": kept[8] / len(insts), "wall_s": time.perf_counter() - started}
        rows.append(row)
        print(f"{name:22s} recall 4x {row['answer_recall_4x']:.3f}  8x {row['answer_recall_8x']:.3f}  "
              f"({row['wall_s']:.0f} s)", flush=True)
    end = args.offset + len(insts) - 1
    out = Path("benchmarks/results/dev") / f"fast_recall_q{args.offset}-{end}.json"
    out.write_text(json.dumps({"benchmark": "fast_recall", "questions": f"{args.offset}-{end}",
                               "setting": "NQ, 20 passages, hard BM25 distractors from the whole pool, gold middle",
                               "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
