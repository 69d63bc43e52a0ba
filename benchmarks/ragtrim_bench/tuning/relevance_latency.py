"""Dev-only trim latency of the relevance recipes on NQ 20-passage requests (cold and warm embedding cache).

cold: every text is new to the scorer (passages, sentences, query all embedded in one encode call).
warm: passage and sentence embeddings are cached (seen in an earlier request); only the query is new.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragtrim.models import Chunk
from ragtrim.pipeline import Pipeline
from ragtrim.scoring.base import Scorer
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.stages.base import Stage
from ragtrim.stages.budget import TokenBudget
from ragtrim.stages.compress import SentenceCompressor
from ragtrim.stages.relevance import RelevanceFilter
from ragtrim.text.tokens import get_counter
from ragtrim_bench.common.stats import percentile
from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open


def stages(chunk_scorer: Scorer, sentence_scorer: Scorer, budget: int) -> list[Stage]:
    return [RelevanceFilter(scorer=chunk_scorer, top_k=20),
            SentenceCompressor(scorer=sentence_scorer, max_tokens=budget), TokenBudget(max_tokens=budget)]


def timed(requests: list[tuple[str, tuple[Chunk, ...]]], make: Callable[[int], list[Stage]],
          before_each: Callable[[], None] = lambda: None) -> list[float]:
    counter = get_counter("cl100k_base")
    out: list[float] = []
    for query, chunks in requests:
        budget = sum(counter.count(c.text) for c in chunks) // 16
        pipe = Pipeline(make(budget), tokenizer=counter)
        before_each()
        t0 = time.perf_counter()
        pipe.run(chunks, query=query)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=10, help="requests timed")
    parser.add_argument("--bm25-only", action="store_true")
    args = parser.parse_args(argv)
    n, bm25_only = args.n, args.bm25_only
    questions = load_nq_open()
    chosen = questions[len(questions) // 2:][:n + 1]
    inst = build_multidoc(chosen, n_docs=20, gold_position="middle", distractors="bm25", pool=questions)
    reqs = [(i.question, tuple(Chunk(text=p.content, id=p.id) for p in i.passages)) for i in inst]
    bm25 = BM25Scorer()
    emb = EmbeddingScorer()
    if not bm25_only:
        emb.warm_up()
    timed(reqs[:1], lambda b: stages(bm25, bm25, b))  # warm-up: imports, tiktoken
    report("bm25 chunks+sentences, first sight", timed(reqs[1:], lambda b: stages(bm25, bm25, b)))
    report("bm25 chunks+sentences, repeat", timed(reqs[1:], lambda b: stages(bm25, bm25, b)))
    if bm25_only:
        return 0
    timed(reqs[:1], lambda b: stages(emb, emb, b))
    report("minilm chunks+sentences, cold cache",
           timed(reqs[1:], lambda b: stages(emb, emb, b), before_each=emb.clear_cache))
    report("minilm chunks, bm25 sentences, cold cache",
           timed(reqs[1:], lambda b: stages(emb, bm25, b), before_each=emb.clear_cache))
    timed(reqs[1:], lambda b: stages(emb, emb, b))  # fill the cache with passages and sentences
    warm = [(q + " ?", chunks) for q, chunks in reqs[1:]]  # a new query over passages seen before
    report("minilm chunks+sentences, warm cache (new query)", timed(warm, lambda b: stages(emb, emb, b)))
    return 0


def report(name: str, values: list[float]) -> None:
    print(f"{name:50s} p50={percentile(values, 50):8.1f} ms  p95={percentile(values, 95):8.1f} ms  n={len(values)}",
          flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
