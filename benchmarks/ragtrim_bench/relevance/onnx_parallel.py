"""How the shipped int8 MiniLM's one-text calls should use the cores: one call at a time with N intra-op threads,
or N calls at once with one thread each.

The requests are golden NQ questions with their 20 passages (21 texts: the question and the passages, one call
each, as ``OnnxEmbeddingScorer`` runs the shipped model); the model pass alone is timed (tokenizing excluded), the
three ways interleaved on every request, at 128 word pieces (the ``balanced`` default) and at 10 (``fast``). Every
way's vectors are checked bitwise against the first's.

Run: ragtrim-bench relevance onnx_parallel [--requests 30] [--threads N]
     -> benchmarks/results/relevance/onnx_parallel.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim_bench.common.results import measure_and_write
from ragtrim_bench.common.stats import percentile

WARMUP = 3


def measure(requests: int, threads: int) -> dict[str, Any]:
    from ragtrim._util.background import run_parallel
    from ragtrim.scoring.onnx_backend import (
        _runtime,
        load_tokenizer,
        onnx_file,
        padded_batches,
        tokenizer_dir,
    )
    from ragtrim_bench.datasets.nq import golden_multidoc

    texts_per_request = [[i.question] + [p.content for p in i.passages]
                         for i in golden_multidoc(requests + WARMUP, offset=200)]
    wide, narrow = _runtime(onnx_file(), threads), _runtime(onnx_file(), 1)

    def call(session: Any) -> Callable[[tuple[Any, np.ndarray, np.ndarray]], np.ndarray]:
        def one(item: tuple[Any, np.ndarray, np.ndarray]) -> np.ndarray:
            _, ids, mask = item
            return np.asarray(session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                 "token_type_ids": np.zeros_like(ids)})[0])
        return one

    ways: dict[str, Callable[[list[Any]], list[np.ndarray]]] = {
        f"one call at a time, {threads} intra-op threads": lambda calls: [call(wide)(c) for c in calls],
        "one call at a time, 1 thread": lambda calls: [call(narrow)(c) for c in calls],
        f"{threads} calls at once, 1 thread each": lambda calls: run_parallel(call(narrow), calls, threads),
    }
    out: dict[str, Any] = {}
    for pieces in (128, 10):
        tokenizer = load_tokenizer(tokenizer_dir(), pieces)
        times: dict[str, list[float]] = {name: [] for name in ways}
        identical = True
        for k, texts in enumerate(texts_per_request):
            calls = list(padded_batches(tokenizer, texts, pieces, 1, "single"))
            order = list(ways) if k % 2 == 0 else list(reversed(ways))
            first: list[np.ndarray] | None = None
            for name in order:
                started = time.perf_counter()
                vectors = ways[name](calls)
                elapsed = (time.perf_counter() - started) * 1000
                if k >= WARMUP:
                    times[name].append(elapsed)
                if first is None:
                    first = vectors
                else:
                    identical &= all(np.array_equal(a, b) for a, b in zip(first, vectors, strict=True))
        out[f"pieces_{pieces}"] = {"identical_vectors": identical, "by_way": {
            name: {"p50_ms": percentile(t, 50), "p99_ms": percentile(t, 99), "n": len(t)} for name, t in times.items()}}
    return out


def report(result: Mapping[str, Any]) -> str:
    lines = ["| word pieces | way | model pass p50 / p99 ms (21 texts) |", "| --- | --- | --- |"]
    for key, block in result["results"].items():
        for name, t in block["by_way"].items():
            lines.append(f"| {key.split('_')[1]} | {name} | {t['p50_ms']:.1f} / {t['p99_ms']:.1f} |")
        lines.append(f"| | identical vectors | {block['identical_vectors']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from ragtrim.scoring.device import onnx_threads

    p = argparse.ArgumentParser(prog="ragtrim-bench relevance onnx_parallel", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=30)
    p.add_argument("--threads", type=int, default=None, help="default: ragtrim.scoring.device.onnx_threads()")
    p.add_argument("-o", "--output", type=Path, default=None)
    args = p.parse_args(argv)
    threads = args.threads or onnx_threads()
    measure_and_write(__spec__.name, argv, args.output, {"threads": threads, "requests": args.requests},
                      lambda: measure(args.requests, threads), report, packages=["onnxruntime", "tokenizers"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
