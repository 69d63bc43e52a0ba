"""Where a cold trim() spends its time: p50 per stage (from the trace) and outside the stages (prefetch, counting).

Usage: ragtrim-bench tuning trim_phases [candidate ...]   (candidates as in relevance net_latency)
Every request is cold (``clear_caches`` before each; passages used once). Prints one line per candidate.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from ragtrim_bench.relevance.net_latency import candidate_scorer, warmup_requests


def main(argv: Sequence[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or ["bm25", "auto"]
    from ragtrim.api import default_stages
    from ragtrim.caches import clear_caches
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim.text.tokens import get_counter
    from ragtrim_bench.datasets.nq import build_single_use, load_nq_open

    qs = load_nq_open()
    reqs = build_single_use(qs[1062:], pool=qs, limit=100)
    counter = get_counter("cl100k_base")
    for name in names:
        scorer = candidate_scorer(name.removesuffix("-nopf")) or "auto"  # "auto": the default, resolved per host

        def pipeline(budget: int, scorer: Any = scorer, name: str = name) -> Pipeline:
            stages = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                      for s in default_stages(budget=budget, scorer="bm25")]
            return Pipeline(stages, prefetch=not name.endswith("-nopf"))

        for q, texts in warmup_requests(3):
            pipeline(100).run(texts, query=q)
        total: list[float] = []
        per: dict[str, list[float]] = {}
        for inst in reqs:
            texts = [p.content for p in inst.passages]
            budget = max(1, sum(counter.count(t) for t in texts) // 4)
            clear_caches()
            t0 = time.perf_counter()
            result = pipeline(budget).run(texts, query=inst.question)
            wall = (time.perf_counter() - t0) * 1000
            total.append(wall)
            staged = sum(s.seconds for s in result.trace) * 1000
            per.setdefault("outside_stages", []).append(wall - staged)
            for s in result.trace:
                per.setdefault(s.stage, []).append(s.seconds * 1000)
        parts = " ".join(f"{k}={statistics.median(v):.2f}" for k, v in per.items())
        print(f"{name:16s} cold p50 {statistics.median(total):.2f} ms | {parts}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
