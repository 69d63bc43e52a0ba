"""Where the shipped int8 MiniLM's model pass goes, operator by operator, with ONNX Runtime's graph optimizations all
on and with the ones ragtrim leaves out (``ragtrim.scoring.onnx_backend.UNFUSED``) left out.

The requests are golden NQ questions with their 20 passages (21 texts, one call each, one thread, as
``OnnxEmbeddingScorer`` runs the shipped model). Per request, the 21 calls are timed in each session, the two
taking turns going first; then each session runs the same texts once more with ONNX Runtime's profiler on, and its
kernel times are summed by operator type. The vectors of the two sessions are compared (largest difference of a
component, smallest cosine).

Run: ragtrim-bench relevance onnx_ops [--requests 30] [--pieces 128]
     -> benchmarks/results/relevance/onnx_ops.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim_bench.common.results import measure_and_write
from ragtrim_bench.common.stats import percentile

WARMUP = 3
TOP_OPERATORS = 12


def _feed(ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def _profile(path: Path, unfused: tuple[str, ...], calls: list[Any], folder: str) -> dict[str, Any]:
    """Kernel time per operator type, in microseconds per text, over ``calls`` run once each in a profiled session."""
    from ragtrim.scoring.onnx_backend import load_session, session_options

    opts = session_options(1)
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path(folder) / ("unfused" if unfused else "fused"))
    session = load_session(path, 1, unfused, opts)
    for _, ids, mask in calls:
        session.run(None, _feed(ids, mask))
    events = json.loads(Path(session.end_profiling()).read_text())
    time_us: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for event in events:
        if event.get("cat") == "Node" and str(event.get("name", "")).endswith("_kernel_time"):
            op = event["args"]["op_name"]
            time_us[op] += event["dur"]
            count[op] += 1
    total = sum(time_us.values())
    return {"kernel_us_per_text": total / len(calls),
            "by_operator": [{"op": op, "us_per_text": t / len(calls), "calls_per_text": count[op] / len(calls),
                             "share": t / total} for op, t in time_us.most_common()]}


def measure(requests: int, pieces: int) -> dict[str, Any]:
    from ragtrim.scoring.onnx_backend import (
        UNFUSED,
        _runtime,
        load_tokenizer,
        onnx_file,
        padded_batches,
        tokenizer_dir,
    )
    from ragtrim_bench.datasets.nq import golden_multidoc

    path = onnx_file()
    sessions = {"all on": _runtime(path, 1, ()), f"{', '.join(UNFUSED)} left out": _runtime(path, 1, UNFUSED)}
    tokenizer = load_tokenizer(tokenizer_dir(), pieces)
    texts_per_request = [[i.question] + [p.content for p in i.passages]
                         for i in golden_multidoc(requests + WARMUP, offset=200)]
    times: dict[str, list[float]] = {name: [] for name in sessions}
    largest_difference, smallest_cosine = 0.0, 1.0
    every_call: list[Any] = []
    for k, texts in enumerate(texts_per_request):
        calls = list(padded_batches(tokenizer, texts, pieces, 1, "single"))
        if k >= WARMUP:
            every_call.extend(calls)
        order = list(sessions) if k % 2 == 0 else list(reversed(sessions))
        vectors: dict[str, list[np.ndarray]] = {}
        for name in order:
            started = time.perf_counter()
            vectors[name] = [np.asarray(sessions[name].run(None, _feed(ids, mask))[0]) for _, ids, mask in calls]
            if k >= WARMUP:
                times[name].append((time.perf_counter() - started) * 1000)
        fused, unfused = (vectors[name] for name in sessions)
        for a, b in zip(fused, unfused, strict=True):
            largest_difference = max(largest_difference, float(np.abs(a - b).max()))
            cosine = float((a * b).sum() / (np.linalg.norm(a) * np.linalg.norm(b)))
            smallest_cosine = min(smallest_cosine, cosine)
    with tempfile.TemporaryDirectory() as folder:
        profiles = {name: _profile(path, unfused, every_call, folder)
                    for name, unfused in zip(sessions, ((), UNFUSED), strict=True)}
    fused_name, unfused_name = sessions
    return {"pieces": pieces, "texts_per_request": len(texts_per_request[0]),
            "model_pass_ms": {name: {"p50": percentile(t, 50), "p99": percentile(t, 99), "n": len(t)}
                              for name, t in times.items()},
            "ratio_p50": percentile(times[unfused_name], 50) / percentile(times[fused_name], 50),
            "largest_component_difference": largest_difference, "smallest_cosine": smallest_cosine,
            "profiles": profiles}


def report(result: Mapping[str, Any]) -> str:
    r = result["results"]
    names = list(r["model_pass_ms"])
    lines = [(f"model pass, {r['texts_per_request']} texts of at most {r['pieces']} pieces, one call at a time, "
              "1 thread (p50 / p99 ms):")]
    lines += [f"  ONNX Runtime's optimizations {name}: {t['p50']:.1f} / {t['p99']:.1f}"
              for name, t in r["model_pass_ms"].items()]
    lines.append(f"  ratio p50 {r['ratio_p50']:.3f}; vectors: largest component difference "
                 f"{r['largest_component_difference']:.4f}, smallest cosine {r['smallest_cosine']:.5f}")
    lines.append("| operator | " + " | ".join(f"{n}: us per text (calls)" for n in names) + " |")
    lines.append("| --- |" + " --- |" * len(names))
    per = {n: {row["op"]: row for row in r["profiles"][n]["by_operator"]} for n in names}
    ops = [row["op"] for row in r["profiles"][names[0]]["by_operator"]]
    ops += [op for op in per[names[1]] if op not in ops]
    for op in ops[:TOP_OPERATORS]:
        cells = [f"{per[n][op]['us_per_text']:.0f} ({per[n][op]['calls_per_text']:.0f})" if op in per[n] else "-"
                 for n in names]
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    lines.append("| all kernels | " + " | ".join(f"{r['profiles'][n]['kernel_us_per_text']:.0f}" for n in names)
                 + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragtrim-bench relevance onnx_ops", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=30)
    p.add_argument("--pieces", type=int, default=128, help="word pieces read per text (128: the balanced default)")
    p.add_argument("-o", "--output", type=Path, default=None)
    args = p.parse_args(argv)
    measure_and_write(__spec__.name, argv, args.output, {"requests": args.requests},
                      lambda: measure(args.requests, args.pieces), report, packages=["onnxruntime", "tokenizers"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
