"""Dev-only tuning of the relevance stages on NQ 20-document sets with hard BM25 distractors (not a benchmark).

Tune on the first half of the questions (``--split tune``), check on the second half (``--split check``). Prints
answer recall at 4x/8x/16x per recipe and the per-request trim latency.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragtrim.models import Chunk
from ragtrim.pipeline import Pipeline
from ragtrim.scoring.base import Scorer
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.stages.base import Stage
from ragtrim.stages.budget import TokenBudget
from ragtrim.stages.compress import SentenceCompressor
from ragtrim.stages.relevance import RelevanceFilter
from ragtrim.text.tokens import get_counter
from ragtrim_bench.common.answers import answer_in_text
from ragtrim_bench.common.results import command_line, write_result
from ragtrim_bench.common.stats import percentile
from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open


@dataclass(frozen=True)
class TuneConfig:
    split: str = "tune"
    limit: int = 200
    positions: tuple[str, ...] = ("first", "middle", "last")
    ratios: tuple[int, ...] = (4, 8, 16)
    recipes: tuple[str, ...] = ("bm25-topk", "bm25-compress")
    out: str = ""
    emb_cache: str = ""
    emb_vectors: str = ""


def recipes(bm25: Scorer, emb: Scorer | None) -> dict[str, Callable[[int], list[Stage]]]:
    hyb = HybridScorer(scorers=(bm25, emb), method="mix", weights=(0.3, 0.7)) if emb else None
    hyb5 = HybridScorer(scorers=(bm25, emb), method="mix", weights=(0.5, 0.5)) if emb else None
    rrf = HybridScorer(scorers=(bm25, emb), method="rrf") if emb else None
    r: dict[str, Callable[[int], list[Stage]]] = {
        "bm25-topk": lambda b: [RelevanceFilter(scorer=bm25, top_k=20), TokenBudget(max_tokens=b)],
        "bm25-compress": lambda b: [RelevanceFilter(scorer=bm25, top_k=20),
                                    SentenceCompressor(scorer=bm25, max_tokens=b), TokenBudget(max_tokens=b)],
        "bm25-compress-hint": lambda b: [RelevanceFilter(scorer=bm25, top_k=20),
                                         SentenceCompressor(scorer=bm25, max_tokens=b, answer_hint_weight=0.3),
                                         TokenBudget(max_tokens=b)],
        "bm25-compress-noctx": lambda b: [RelevanceFilter(scorer=bm25, top_k=20),
                                          SentenceCompressor(scorer=bm25, max_tokens=b, context_weight=0.0),
                                          TokenBudget(max_tokens=b)],
        "bm25-compress-cw0": lambda b: [RelevanceFilter(scorer=bm25, top_k=20),
                                        SentenceCompressor(scorer=bm25, max_tokens=b, chunk_weight=0.0),
                                        TokenBudget(max_tokens=b)],
        "bm25-compress-cw5": lambda b: [RelevanceFilter(scorer=bm25, top_k=20),
                                        SentenceCompressor(scorer=bm25, max_tokens=b, chunk_weight=0.5),
                                        TokenBudget(max_tokens=b)],
    }
    if emb is not None and hyb is not None and hyb5 is not None and rrf is not None:
        r.update({
            "emb-topk": lambda b: [RelevanceFilter(scorer=emb, top_k=20), TokenBudget(max_tokens=b)],
            "hybrid-topk": lambda b: [RelevanceFilter(scorer=hyb, top_k=20), TokenBudget(max_tokens=b)],
            "hybrid-compress": lambda b: [RelevanceFilter(scorer=hyb, top_k=20),
                                          SentenceCompressor(scorer=hyb, max_tokens=b), TokenBudget(max_tokens=b)],
            "hybrid-compress-hint": lambda b: [RelevanceFilter(scorer=hyb, top_k=20),
                                               SentenceCompressor(scorer=hyb, max_tokens=b, answer_hint_weight=0.3),
                                               TokenBudget(max_tokens=b)],
            "hybrid5-compress-hint": lambda b: [RelevanceFilter(scorer=hyb5, top_k=20),
                                                SentenceCompressor(scorer=hyb5, max_tokens=b, answer_hint_weight=0.3),
                                                TokenBudget(max_tokens=b)],
            "rrf-compress-hint": lambda b: [RelevanceFilter(scorer=rrf, top_k=20),
                                            SentenceCompressor(scorer=hyb, max_tokens=b, answer_hint_weight=0.3),
                                            TokenBudget(max_tokens=b)],
            "emb-compress-hint": lambda b: [RelevanceFilter(scorer=emb, top_k=20),
                                            SentenceCompressor(scorer=emb, max_tokens=b, answer_hint_weight=0.3),
                                            TokenBudget(max_tokens=b)],
        })
    return r


def spec_recipe(spec: str, bm25: Scorer, emb: Scorer | None) -> Callable[[int], list[Stage]]:
    """A recipe from ``key=value`` pairs joined by ``;``: rel (chunk scorer), sent (sentence scorer, or ``none``
    for whole passages), w (BM25 weight in mix), cw, hint, ctx, ctxn (SentenceCompressor parameters)."""
    kv = dict(part.split("=") for part in spec.split(";"))

    def scorer(name: str) -> Scorer:
        if name == "bm25":
            return bm25
        if emb is None:
            raise SystemExit("embedding recipes need the embedding scorer")
        if name == "emb":
            return emb
        w = float(kv.get("w", "0.3"))
        return HybridScorer(scorers=(bm25, emb), method="rrf" if name == "rrf" else "mix", weights=(w, 1 - w))

    rel = scorer(kv.get("rel", "emb"))
    sent_name = kv.get("sent", "emb")

    def make(budget: int) -> list[Stage]:
        stages: list[Stage] = [RelevanceFilter(scorer=rel, top_k=20)]
        if sent_name != "none":
            stages.append(SentenceCompressor(
                scorer=scorer(sent_name), max_tokens=budget, chunk_weight=float(kv.get("cw", "0.3")),
                answer_hint_weight=float(kv.get("hint", "0.0")), context_weight=float(kv.get("ctx", "0.5")),
                context_sentences=int(kv.get("ctxn", "1"))))
        stages.append(TokenBudget(max_tokens=budget))
        return stages

    return make


def run(config: TuneConfig) -> dict[str, dict[str, float]]:
    questions = load_nq_open()
    half = len(questions) // 2
    chosen = questions[:half] if config.split == "tune" else questions[half:]
    chosen = chosen[: config.limit]
    counter = get_counter("cl100k_base")
    bm25 = BM25Scorer()
    needs_emb = any(not r.startswith("bm25") and "emb" in r or "hybrid" in r or "rrf" in r or "mix" in r
                    for r in config.recipes)
    emb = EmbeddingScorer() if needs_emb else None
    if emb is not None and config.emb_cache:
        # Embeddings precomputed elsewhere (GPU) for the same texts: seed the per-text cache.
        import numpy as np

        texts = json.loads(Path(config.emb_cache, "texts.json").read_text())
        matrix = np.load(config.emb_vectors).astype(np.float32)
        emb.cache_size = max(emb.cache_size, len(texts) + 1024)
        emb.prime(texts, matrix)  # normalizes like the encoder does
    table = recipes(bm25, emb)
    sets = {pos: build_multidoc(chosen, n_docs=20, gold_position=pos,  # type: ignore[arg-type]
                                distractors="bm25", pool=questions)
            for pos in config.positions}
    results: dict[str, dict[str, float]] = {}
    for name in config.recipes:
        make = table[name] if name in table else spec_recipe(name, bm25, emb)
        row: dict[str, float] = {}
        for ratio in config.ratios:
            hits: list[bool] = []
            lat: list[float] = []
            after: list[int] = []
            before: list[int] = []
            for instances in sets.values():
                for inst in instances:
                    chunks = tuple(Chunk(text=p.content, id=p.id) for p in inst.passages)
                    total = sum(counter.count(c.text) for c in chunks)
                    budget = total // ratio
                    pipe = Pipeline(make(budget), tokenizer=counter)
                    t0 = time.perf_counter()
                    res = pipe.run(chunks, query=inst.question)
                    lat.append((time.perf_counter() - t0) * 1000)
                    hits.append(answer_in_text(inst.answers, res.text))
                    after.append(res.tokens_after)
                    before.append(res.tokens_before)
            row[f"recall_{ratio}x"] = sum(hits) / len(hits)
            row[f"ratio_{ratio}x"] = sum(before) / max(1, sum(after))
            row[f"p50_latency_ms_{ratio}x"] = percentile(lat, 50)
        results[name] = row
        report(name, row)
    return results


def report(name: str, row: dict[str, float]) -> None:
    cells = "  ".join(f"{k}={v:.3f}" for k, v in row.items())
    print(f"{name:24s} {cells}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--split", choices=("tune", "check"), default="tune")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--recipes", default="bm25-topk,bm25-compress",
                    help="comma-separated recipe names, or spec strings such as rel=emb;sent=emb;cw=0.5")
    ap.add_argument("--positions", default="first,middle,last")
    ap.add_argument("--out", default="")
    ap.add_argument("--emb-cache", default="", help="folder with texts.json whose embeddings are --emb-vectors")
    ap.add_argument("--emb-vectors", default="")
    a = ap.parse_args(argv)
    cfg = TuneConfig(split=a.split, limit=a.limit, recipes=tuple(a.recipes.split(",")),
                     positions=tuple(a.positions.split(",")), out=a.out,
                     emb_cache=a.emb_cache, emb_vectors=a.emb_vectors)
    results = run(cfg)
    if cfg.out:
        write_result(Path(cfg.out), {"config": cfg.__dict__ | {"positions": list(cfg.positions)},
                                     "results": results}, command=command_line(__spec__.name, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
