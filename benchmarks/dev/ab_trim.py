"""Cold trim() latency of two (or more) source trees side by side: a worker process per tree, requests interleaved.

  git worktree add /tmp/base HEAD~1
  python benchmarks/dev/ab_trim.py --scorer auto /tmp/base .

Each worker imports ``ragtrim`` from its tree (checked), warms up on made-up requests, then trims the held-out NQ
requests (20 passages, hard distractors, every passage used once: cold) at 1/4 of their tokens. Prints p50 per tree,
the median of the paired per-request ratios (last tree / first), whether the trimmed texts were identical, and the
time each tree's ONNX Runtime session spent in ``run`` per request.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def _worker(root: str, scorer: str, conn: Any) -> None:
    sys.path.insert(0, root)
    import ragtrim

    assert Path(ragtrim.__file__).resolve().is_relative_to(Path(root).resolve()), ragtrim.__file__
    runs: list[float] = []
    try:
        import onnxruntime

        original = onnxruntime.InferenceSession.run

        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            out = original(self, *args, **kwargs)
            runs.append((time.perf_counter() - t) * 1000)
            return out

        onnxruntime.InferenceSession.run = timed  # type: ignore[method-assign]
    except ImportError:
        pass
    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.tokens import get_counter

    counter = get_counter("cl100k_base")
    for k in range(3):
        Pipeline(default_stages(budget=100, scorer=scorer)).run(
            [f"Warm-up passage {k}.{j} about topic {j}. It has two sentences." for j in range(20)], query="warm up?")
    while (msg := conn.recv()) is not None:
        question, texts = msg
        budget = max(1, sum(counter.count(t) for t in texts) // 4)
        runs.clear()
        t0 = time.perf_counter()
        result = Pipeline(default_stages(budget=budget, scorer=scorer)).run(texts, query=question)
        conn.send(((time.perf_counter() - t0) * 1000, result.text, sum(runs)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="source trees, each holding a ragtrim/ package")
    parser.add_argument("--scorer", default="auto")
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    from ragtrim_bench.datasets.nq import build_single_use, load_nq_open

    qs = load_nq_open()
    requests = build_single_use(qs[1062:], pool=qs, limit=args.requests)
    ctx = mp.get_context("spawn")
    conns = []
    for root in args.roots:
        parent, child = ctx.Pipe()
        ctx.Process(target=_worker, args=(root, args.scorer, child), daemon=True).start()
        conns.append(parent)
    times: list[list[float]] = [[] for _ in args.roots]
    model_ms: list[list[float]] = [[] for _ in args.roots]
    same = 0
    for k, inst in enumerate(requests):
        texts = [p.content for p in inst.passages]
        outputs = {}
        for i in (range(len(conns)) if k % 2 == 0 else reversed(range(len(conns)))):  # alternate who goes first
            conns[i].send((inst.question, texts))
            outputs[i] = conns[i].recv()
        for i, (ms, _, onnx_ms) in outputs.items():
            times[i].append(ms)
            model_ms[i].append(onnx_ms)
        same += len({out[1] for out in outputs.values()}) == 1
    for conn in conns:
        conn.send(None)
    for root, t, m in zip(args.roots, times, model_ms, strict=True):
        print(f"{root}: {args.scorer} cold p50 {statistics.median(t):.2f} ms, mean {statistics.mean(t):.2f} ms, "
              f"ONNX run p50 {statistics.median(m):.2f} ms")
    ratios = [b / a for a, b in zip(times[0], times[-1], strict=True)]
    print(f"paired ratio (last / first) p50 {statistics.median(ratios):.3f}; identical texts {same}/{len(requests)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
