"""ragtrim's LangChain compressor vs LangChain's EmbeddingsRedundantFilter + EmbeddingsFilter, same MiniLM, same budgets.

Both sides receive LangChain Documents and the same budget (a fraction of each request's cl100k tokens); the
LangChain pair has no token budget of its own, so ragtrim's TokenBudget (position policy, on the pair's similarity
order) runs after it. Quality pass: NQ 20-document instances with hard BM25 distractors, embeddings cached per text
(deterministic, so identical results). Latency pass: a sample with no embedding cache, so encoding is included.

Usage: ragtrim-bench integrations langchain_peer [--limit 200] [--position middle] [--fractions 1/2,1/4,1/8]
       [--latency-sample 20]
Writes benchmarks/results/integrations/langchain_peer.json. Needs langchain-community and langchain-classic (benchmark only).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragtrim.errors import ConfigError
from ragtrim.models import Chunk
from ragtrim.text.tokens import TiktokenCounter
from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import summarize_ms
from ragtrim_bench.datasets.nq import QAInstance
from ragtrim_bench.relevance.qa import (
    CACHE_DIR,
    Method,
    QABenchConfig,
    QARecord,
    Tools,
    Trim,
    aggregate,
    embedding_scorer,
    fraction_label,
    instance_chunks,
    langchain_trim,
    load_settings,
    measure,
    parse_fraction,
)


@dataclass(frozen=True)
class PeerConfig:
    """Everything the comparison depends on (recorded in the JSON)."""

    limit: int = 200
    """The first ``limit`` NQ-open questions (distractors still come from all 2,124)."""
    position: str = "middle"
    """Where the gold passage sits among the 20."""
    n_docs: int = 20
    fractions: tuple[float, ...] = (1 / 2, 1 / 4, 1 / 8)
    latency_sample: int = 20
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ConfigError(f"limit must be >= 1, got {self.limit}")
        if self.latency_sample < 1:
            raise ConfigError(f"latency_sample must be >= 1, got {self.latency_sample}")
        for f in self.fractions:
            if not 0 < f <= 1:
                raise ConfigError(f"budget fractions must be within (0, 1], got {f}")


def ragtrim_compressor_trim(tools: Tools) -> Trim:
    """ragtrim through its LangChain compressor: duplicates, MiniLM relevance (scores only), budget by score."""
    from langchain_core.documents import Document

    from ragtrim.integrations.langchain import RagtrimCompressor
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.budget import TokenBudget
    from ragtrim.stages.dedup import DuplicateFilter
    from ragtrim.stages.relevance import RelevanceFilter

    def trim(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int) -> tuple[Chunk, ...]:
        pipeline = Pipeline(
            [
                DuplicateFilter(),
                # relative 0.0 keeps every chunk: the filter only scores, the budget decides what fits
                RelevanceFilter(scorer=tools.embedder, mode="relative", relative_threshold=0.0, top_k=None),
                TokenBudget(max_tokens=budget, policy="score"),
            ],
            tokenizer=tools.counter,
        )
        docs = [Document(page_content=c.text, id=c.id) for c in chunks]
        kept = RagtrimCompressor(pipeline=pipeline).compress_documents(docs, inst.question)
        return tuple(Chunk(text=d.page_content, id=str(d.id)) for d in kept)

    return trim


def build_methods(config: PeerConfig, tools: Tools) -> list[Method]:
    peer = langchain_trim(tools)
    if peer is None:
        raise ConfigError("langchain-community and langchain-classic are needed for the peer; "
                          "pip install langchain-community langchain-classic")
    ours = ragtrim_compressor_trim(tools)
    methods = [Method("none", "none", None, lambda inst, chunks, budget: chunks, "no trimming")]
    for f in config.fractions:
        label = fraction_label(f)
        methods.append(Method(f"langchain@{label}", "langchain", f, peer,
                              "EmbeddingsRedundantFilter + EmbeddingsFilter(k=all) (MiniLM), then TokenBudget"))
        methods.append(Method(f"ragtrim@{label}", "ragtrim", f, ours,
                              "RagtrimCompressor: DuplicateFilter + RelevanceFilter(MiniLM) + TokenBudget"))
    return methods


def latency_pass(config: PeerConfig, setting: str, instances: Sequence[QAInstance],
                 counter: TiktokenCounter) -> list[dict[str, Any]]:
    """Per-request latency with no embedding cache (encoding included) at the budget nearest 1/4.

    The methods alternate request by request, so load from other processes hits both alike.
    """
    cold = Tools(counter=counter, embedder=embedding_scorer(cached=False), notes=[])
    target = min(config.fractions, key=lambda f: abs(f - 1 / 4))
    methods = [m for m in build_methods(config, cold) if m.budget_fraction == target]
    sample = list(instances)[: config.latency_sample]
    for m in methods:
        measure("warmup", m, sample[0], instance_chunks(sample[0], counter), counter)
    lat: dict[str, list[float]] = {m.name: [] for m in methods}
    for inst in sample:
        chunks = instance_chunks(inst, counter)
        for m in methods:
            lat[m.name].append(measure(setting, m, inst, chunks, counter).latency_ms)
    return [{"method": m.name, "family": m.family, "budget_fraction": m.budget_fraction, "n_requests": len(sample),
             **summarize_ms(lat[m.name], prefix="trim_cold")} for m in methods]


def run(config: PeerConfig) -> dict[str, Any]:
    started = time.perf_counter()
    settings = load_settings(QABenchConfig(dataset="nq", n_docs=config.n_docs, positions=(config.position,),
                                           limit=config.limit, seed=config.seed, gemma=False))
    setting, instances = next(iter(settings.items()))
    counter = TiktokenCounter()
    tools = Tools(counter=counter, embedder=embedding_scorer(cached=True), notes=[])
    methods = build_methods(config, tools)
    texts = sorted({t for i in instances for t in (i.question, *(p.content for p in i.passages))})
    # Embeddings persist under .cache/ (deterministic: reuse changes no result, it only spares re-encoding).
    tools.embedder.precompute(texts, progress=config.progress, cache_file=CACHE_DIR / "langchain_peer_minilm_nq.npz")
    warm = instance_chunks(instances[0], counter)
    for m in methods:  # imports, model load, tokenizer caches before anything is timed
        measure("warmup", m, instances[0], warm, counter)
    records: list[QARecord] = []
    for n, inst in enumerate(instances):
        chunks = instance_chunks(inst, counter)
        records.extend(measure(setting, m, inst, chunks, counter) for m in methods)
        if config.progress and (n + 1) % 50 == 0:
            print(f"  {n + 1}/{len(instances)} questions", file=sys.stderr)
    rows = aggregate(records, methods)
    latency = latency_pass(config, setting, instances, counter)
    import langchain_classic
    import langchain_community
    import langchain_core

    return {
        "benchmark": "langchain_peer",
        "setting": setting,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "methods": [{"name": m.name, "family": m.family, "budget_fraction": m.budget_fraction,
                     "description": m.description} for m in methods],
        "rows": rows,
        "cold_latency": latency,
        "versions": {"langchain_core": langchain_core.__version__,
                     "langchain_community": getattr(langchain_community, "__version__", None),
                     "langchain_classic": getattr(langchain_classic, "__version__", None)},
        "notes": [
            ("quality rows: embeddings cached per text (same results as uncached); p50/p95_trim_ms there is "
             "trimming work only. cold_latency: no embedding cache, encoding included."),
            "both sides get the same per-request budget floor(tokens_before x fraction) in cl100k tokens",
        ],
        "tokenizer": counter.name,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load_average_at_end": load_average(),
        "wall_s": time.perf_counter() - started,
    }


def report(result: Mapping[str, Any], path: Path) -> None:
    """Print the side-by-side table (the only printing in this script)."""
    from ragtrim._util.table import format_table

    print(f"== {result['setting']}: {result['rows'][0]['n_requests']} questions ==")
    print(format_table(result["rows"], (
        ("method", "method"), ("budget_label", "budget"), ("mean_tokens_after_cl100k", "mean tokens"),
        ("max_budget_overrun_tokens", "overrun"), ("answer_recall", "answer recall"),
        ("gold_passage_recall", "gold recall"), ("p50_trim_ms", "p50 ms (cached emb)"),
        ("p95_trim_ms", "p95 ms (cached emb)"), ("n_errors", "err"),
    )))
    print("\n== latency per query, no embedding cache (methods alternate per request) ==")
    print(format_table(result["cold_latency"], (
        ("method", "method"), ("n_requests", "n"), ("p50_trim_cold_ms", "p50 ms"), ("p95_trim_cold_ms", "p95 ms"),
    )))
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"wall {result['wall_s']:.0f} s, load average {result['load_average_at_end']} at the end; wrote {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--limit", type=int, default=PeerConfig.limit)
    parser.add_argument("--position", default=PeerConfig.position, choices=("first", "middle", "last"))
    parser.add_argument("--fractions", default="1/2,1/4,1/8")
    parser.add_argument("--latency-sample", type=int, default=PeerConfig.latency_sample)
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/integrations/langchain_peer.json")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    config = PeerConfig(limit=args.limit, position=args.position,
                        fractions=tuple(parse_fraction(f.strip()) for f in args.fractions.split(",") if f.strip()),
                        latency_sample=args.latency_sample, progress=not args.no_progress)
    result = run(config)
    path = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                        packages=["langchain-core", "langchain-community", "langchain-classic",
                                  "sentence-transformers"])
    report(result, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
