"""Dev-only: does reranking MiniLM's best passages by the reader's query likelihood put the gold passage first more
often? (``ragtrim.rerank``: score = cosine + weight x mean log P(question | passage) under Gemma 3 270M, for the
first stage's top ``k``.)

NQ 20 documents, hard BM25 distractors, gold in the middle; question ranges disjoint from the GPU golden set
(q0-319). The reader is the 270M model dequantized from the GGUF on PyPI (written on first use, ~1 minute).
Prints and writes the top-1 gold rate and top-1 answer rate per weight.

Run: HF_HUB_OFFLINE=1 ragtrim-bench tuning qlm_rerank  -> benchmarks/results/tuning/qlm_rerank.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

import numpy as np
from tqdm import tqdm

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.scoring.rerank import QueryLikelihoodScorer
from ragtrim_bench.common.answers import answer_in_text
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open
from ragtrim_bench.models.gemma import local_reader_dir

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranges", default="400-600,1062-1262", help="question ranges lo-hi (hi exclusive)")
    parser.add_argument("--k", type=int, default=2, help="first-stage passages rescored per question")
    args = parser.parse_args(argv)
    model_dir = local_reader_dir()
    pool = load_nq_open()
    emb, qlm = EmbeddingScorer(), QueryLikelihoodScorer(model_dir)
    results: dict[str, object] = {"k": args.k, "model": str(model_dir.name), "ranges": {}}
    for item in args.ranges.split(","):
        lo, hi = (int(x) for x in item.split("-"))
        instances = build_multidoc(pool[lo:hi], n_docs=20, gold_position="middle", distractors="bm25", pool=pool)
        gold_hits = np.zeros(len(WEIGHTS))
        answer_hits = np.zeros(len(WEIGHTS))
        started = time.perf_counter()
        for inst in tqdm(instances, desc=f"q{lo}-{hi - 1}", file=sys.stderr):
            texts = [p.content for p in inst.passages]
            cos = np.asarray(emb.score(inst.question, texts))
            head = list(np.argsort(-cos, kind="stable")[: args.k])
            ll = np.asarray(qlm.score(inst.question, [texts[i] for i in head]))
            gold = next(i for i, p in enumerate(inst.passages) if p.is_gold)
            for w, weight in enumerate(WEIGHTS):
                top = head[int(np.argmax(cos[head] + weight * ll))]
                gold_hits[w] += top == gold
                answer_hits[w] += answer_in_text(inst.answers, texts[top])
        n = len(instances)
        key = f"q{lo}-{hi - 1}"
        results["ranges"][key] = {  # type: ignore[index]
            "questions": n, "seconds": round(time.perf_counter() - started, 1),
            "top1_gold_rate": {f"{w:g}": gold_hits[i] / n for i, w in enumerate(WEIGHTS)},
            "top1_has_answer_rate": {f"{w:g}": answer_hits[i] / n for i, w in enumerate(WEIGHTS)},
        }
        for i, weight in enumerate(WEIGHTS):
            print(f"{key} weight {weight:<4g} top1 gold {gold_hits[i] / n:.3f}  top1 has answer {answer_hits[i] / n:.3f}",
                  flush=True)
    write_result(result_path(__spec__.name), results, command=command_line(__spec__.name, argv),
                 packages=["transformers", "torch"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
