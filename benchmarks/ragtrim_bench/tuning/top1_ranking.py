"""Dev-only: can a cheap change to passage scoring put the gold passage first more often than MiniLM's cosine?

The 270M reader answers as well from MiniLM's top passage as from the gold passage whenever they coincide
(docs/gpu.md), so top-1 gold rate is the whole accuracy gap. Scores combine MiniLM cosines of the passage, its title,
its body, its best sentence, and normalized BM25. NQ 20 documents, hard distractors, gold in the middle; question
ranges disjoint from the GPU golden set (q0-319). Prints and writes (top-1 gold rate, top-1 answer rate) per variant.

Run: HF_HUB_OFFLINE=1 ragtrim-bench tuning top1_ranking  -> benchmarks/results/tuning/top1_ranking.json
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim_bench.common.answers import answer_in_text
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open

RANGES = ((400, 600), (1062, 1262))


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    pool = load_nq_open()
    emb, bm25 = EmbeddingScorer(), BM25Scorer()
    results: dict[str, dict[str, list[float]]] = {}
    for lo, hi in RANGES:
        res: dict[str, list[float]] = {}
        instances = build_multidoc(pool[lo:hi], n_docs=20, gold_position="middle", distractors="bm25", pool=pool)
        for inst in instances:
            texts = [p.content for p in inst.passages]
            titles = [t.split("\n", 1)[0] for t in texts]
            bodies = [t.split("\n", 1)[1] if "\n" in t else t for t in texts]
            sents = [[s for s in re.split(r"(?<=[.!?])\s+", b) if s.strip()] or [b] for b in bodies]
            p, t, b = (np.array(emb.score(inst.question, x)) for x in (texts, titles, bodies))
            flat = np.array(emb.score(inst.question, [s for ss in sents for s in ss]))
            bounds = np.cumsum([0] + [len(ss) for ss in sents])
            best = np.array([flat[bounds[i]:bounds[i + 1]].max() for i in range(len(sents))])
            bm = np.array(bm25.score(inst.question, texts))
            bm = bm / (bm.max() + 1e-9)
            gold = next(i for i, x in enumerate(inst.passages) if x.is_gold)
            variants = {"passage": p, "body": b, "passage+0.3title": p + 0.3 * t, "passage+0.5title": p + 0.5 * t,
                        "passage+0.3sentence": p + 0.3 * best, "passage+0.5sentence": p + 0.5 * best,
                        "passage+0.3title+0.3sentence": p + 0.3 * t + 0.3 * best, "passage+0.1bm25": p + 0.1 * bm,
                        "passage+0.2sentence+0.1bm25": p + 0.2 * best + 0.1 * bm}
            for name, score in variants.items():
                top = int(np.argmax(score))
                r = res.setdefault(name, [0.0, 0.0])
                r[0] += top == gold
                r[1] += answer_in_text(inst.answers, texts[top])
        key = f"q{lo}-{hi - 1}"
        results[key] = {k: [v[0] / len(instances), v[1] / len(instances)] for k, v in res.items()}
        for name, (g, a) in results[key].items():
            print(f"{key} {name:30s} top1 gold {g:.3f}  top1 has answer {a:.3f}", flush=True)
    write_result(result_path(__spec__.name), results, command=command_line(__spec__.name, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
