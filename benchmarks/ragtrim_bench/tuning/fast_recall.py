"""Dev-only: answer recall of relevance candidates on the NQ 20-passage hard-distractor sets of qa_savings (every
question, gold in the middle), at 1/4 and 1/8 of the tokens, with the default pipeline's other stages.

  ragtrim-bench tuning fast_recall --limit 500 --candidates bm25,auto,mix-16-0.4-1,mix-32-0.4-1

Questions 0-1061 are the development half (``--offset 0``); candidates are named as in relevance net_latency.
Unlike net_latency's single-use requests (each passage in one request only, 99-103 requests), this is the
qa_savings setting: every question of the range, its distractors drawn from the whole pool. Writes
benchmarks/results/tuning/fast_recall_q<offset>-<end>.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.relevance.net_latency import candidate_scorer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--candidates", default="bm25,auto,mix-16-0.4-1,mix-32-0.4-1,mix-64-0.4-1")
    args = parser.parse_args(argv)
    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim.text.tokens import get_counter
    from ragtrim_bench.common.answers import answer_in_text
    from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open

    qs = load_nq_open()
    insts = build_multidoc(qs[args.offset:args.offset + args.limit], n_docs=20, gold_position="middle",
                           distractors="bm25", pool=qs)
    counter = get_counter("cl100k_base")
    rows: list[dict[str, Any]] = []
    for name in args.candidates.split(","):
        scorer = candidate_scorer(name) or "auto"
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
    out = write_result(result_path(__spec__.name, f"_q{args.offset}-{end}"),
                       {"benchmark": "fast_recall", "questions": f"{args.offset}-{end}",
                        "setting": "NQ, 20 passages, hard BM25 distractors from the whole pool, gold middle",
                        "rows": rows}, command=command_line(__spec__.name, argv))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
