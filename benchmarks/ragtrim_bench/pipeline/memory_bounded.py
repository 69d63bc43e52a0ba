"""Memory stays bounded: RSS before and after twelve distinct 5 MB requests through ``trim(..., scorer="bm25")``.

Caches capped by entries only let twelve such requests take a process from 14 MB to 780 MB (``--unbounded``
shows it). The token-count, sentence and BM25 caches are bounded in bytes (ragtrim._util.lru, 32 MiB each by default,
nothing above 1 MiB per entry); the target is RSS growth under 200 MB. ``--unbounded`` lifts the byte limits, to show
what the same run costs without them.
Run: ragtrim-bench pipeline memory_bounded [--unbounded]  -> benchmarks/results/pipeline/memory_bounded.json
(memory_unbounded.json with --unbounded)
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, result_path, write_result

_WORD_TEXT = (
    "tower iron lattice paris built metres tall engineer gustave company fair visitors height structure river "
    "city museum century design steel bridge station painted antenna broadcast record opened public crowd "
    "summit platform elevator stairs restaurant view night lights sparkle maintenance paint tons rivets"
)
_WORDS = _WORD_TEXT.split()


@dataclass(frozen=True)
class MemoryConfig:
    requests: int = 12
    request_mb: float = 5.0
    chunks_per_request: int = 20
    budget: int = 1000
    seed: int = 14
    unbounded: bool = False


def rss_mb() -> float:
    """Resident set size of this process in MB (from /proc, so no dependency)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def make_request(rng: random.Random, cfg: MemoryConfig, n: int) -> tuple[list[str], str]:
    """``cfg.chunks_per_request`` distinct chunks of prose-like sentences, ``cfg.request_mb`` MB in all."""
    per_chunk = int(cfg.request_mb * 1e6 / cfg.chunks_per_request)
    chunks = []
    for c in range(cfg.chunks_per_request):
        parts: list[str] = []
        size = 0
        while size < per_chunk:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
            sentence = f"{words[0].capitalize()} {' '.join(words[1:])} {rng.randint(0, 10**6)} r{n}c{c}. "
            parts.append(sentence)
            size += len(sentence)
        chunks.append("".join(parts))
    return chunks, f"how tall is the {rng.choice(_WORDS)} {rng.choice(_WORDS)}"


def lift_byte_limits() -> None:
    """Emulate the old entry-only caps: no byte bound, no per-entry bound."""
    from ragtrim.scoring import bm25
    from ragtrim.text import sentences, tokens

    huge = 1 << 62
    for cache in (bm25._tokens.cache, sentences._sentence_spans.cache):
        cache.max_bytes = cache.max_entry_bytes = huge
    counter = tokens.get_counter()
    counter._cache.max_bytes = counter._cache.max_entry_bytes = huge  # type: ignore[attr-defined]


def cache_sizes_mb() -> dict[str, float]:
    """What each per-text cache holds now, by its own estimate (``SizedLRU.nbytes``), in MB."""
    from ragtrim.dedup import engine
    from ragtrim.scoring import bm25
    from ragtrim.stages import compress
    from ragtrim.text import sentences, tokens

    caches = {"sentence spans": sentences._sentence_spans.cache, "BM25 tokens": bm25._tokens.cache,
              "stemmed BM25 tokens": bm25._stemmed.cache, "compression sentences": compress._cached_parts.cache,
              "compression dependencies": compress._cached_dependencies.cache,
              "dedup folded texts": engine.folded_and_key.cache, "dedup lines": engine._analysed_lines.cache,
              "token counts": tokens.get_counter()._cache}  # type: ignore[attr-defined]
    return {name: round(cache.nbytes / 1e6, 1) for name, cache in caches.items()}


def measure(cfg: MemoryConfig) -> dict[str, Any]:
    from ragtrim import trim

    if cfg.unbounded:
        lift_byte_limits()
    trim(["warm up the tokenizer and the pipeline."], query="warm", budget=10, scorer="bm25")
    gc.collect()
    rng = random.Random(cfg.seed)
    requests = [make_request(rng, cfg, n) for n in range(cfg.requests)]
    gc.collect()
    before = rss_mb()
    per_request = []
    for chunks, query in requests:
        started = time.perf_counter()
        result = trim(chunks, query=query, budget=cfg.budget, scorer="bm25")
        seconds = time.perf_counter() - started
        gc.collect()
        per_request.append({"seconds": round(seconds, 3), "rss_mb": round(rss_mb(), 1),
                            "tokens_before": result.tokens_before, "tokens_after": result.tokens_after})
    after = rss_mb()
    return {
        "config": asdict(cfg),
        "input_mb_per_request": round(sum(len(c.encode()) for c in requests[0][0]) / 1e6, 2),
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "rss_growth_mb": round(after - before, 1),
        "peak_rss_during_mb": max(r["rss_mb"] for r in per_request),
        "cache_mb_after": cache_sizes_mb(),
        "target_growth_mb": 200,
        "within_target": after - before < 200,
        "requests": per_request,
        "note": "RSS includes the 60 MB of generated request text, held for the whole run (measured before the "
                "first request, so it is not part of the growth).",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=MemoryConfig.requests)
    parser.add_argument("--unbounded", action="store_true", help="lift the byte limits (the old behaviour)")
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args(argv)
    cfg = MemoryConfig(requests=args.requests, unbounded=args.unbounded)
    report = measure(cfg)
    default = result_path(__spec__.name).with_name("memory_unbounded.json") if cfg.unbounded else result_path(
        __spec__.name)
    out = write_result(args.output or default, report, command=command_line(__spec__.name, argv))
    print(f"RSS before {report['rss_before_mb']} MB, after {report['rss_after_mb']} MB, growth "
          f"{report['rss_growth_mb']} MB over {cfg.requests} requests of {report['input_mb_per_request']} MB "
          f"(target < 200 MB: {'met' if report['within_target'] else 'MISSED'}); wrote {out}")
    print("caches after, MB: " + ", ".join(f"{k} {v}" for k, v in report["cache_mb_after"].items()))
    return 0 if report["within_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
