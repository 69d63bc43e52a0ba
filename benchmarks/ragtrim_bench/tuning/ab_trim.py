"""Cold trim() latency of two (or more) source trees side by side: a worker process per tree, requests interleaved.

  git worktree add /tmp/base HEAD~1
  ragtrim-bench tuning ab_trim --scorer auto /tmp/base .

Each worker imports ``ragtrim`` from its tree (checked), warms up on made-up requests, then trims the held-out NQ
requests (20 passages, hard distractors, every passage used once: cold) at 1/4 of their tokens. Prints p50 per tree,
the median of the paired per-request ratios (last tree / first), whether the trimmed texts were identical, and the
time each tree's ONNX Runtime session spent in ``run`` per request.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

# Run in a fresh interpreter with PYTHONPATH set to the tree: one JSON request per stdin line, one JSON reply per
# stdout line (a subprocess, not multiprocessing: its child would inherit this process's sys.path).
_WORKER = r"""
import json, sys, time
from pathlib import Path
import ragtrim
root = Path(sys.argv[1]).resolve()
assert Path(ragtrim.__file__).resolve().is_relative_to(root), ragtrim.__file__
runs = []
try:
    import onnxruntime
    original = onnxruntime.InferenceSession.run
    def timed(self, *args, **kwargs):
        t = time.perf_counter()
        out = original(self, *args, **kwargs)
        runs.append((time.perf_counter() - t) * 1000)
        return out
    onnxruntime.InferenceSession.run = timed
except ImportError:
    pass
from ragtrim.api import default_stages
from ragtrim.pipeline import Pipeline
try:
    from ragtrim.text.tokens import get_counter
except ImportError:  # a tree from before the layout by concept (flat modules)
    from ragtrim.tokens import get_counter
scorer = sys.argv[2]
counter = get_counter("cl100k_base")
for k in range(3):
    Pipeline(default_stages(budget=100, scorer=scorer)).run(
        [f"Warm-up passage {k}.{j} about topic {j}. It has two sentences." for j in range(20)], query="warm up?")
print(json.dumps("ready"), flush=True)
for line in sys.stdin:
    question, texts = json.loads(line)
    budget = max(1, sum(counter.count(t) for t in texts) // 4)
    runs.clear()
    t0 = time.perf_counter()
    result = Pipeline(default_stages(budget=budget, scorer=scorer)).run(texts, query=question)
    print(json.dumps([(time.perf_counter() - t0) * 1000, result.text, sum(runs)]), flush=True)
"""


def _start(root: str, scorer: str) -> Any:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, root, scorer], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd=os.path.abspath(root))
    assert proc.stdout is not None and json.loads(proc.stdout.readline()) == "ready"
    return proc


def _ask(proc: Any, question: str, texts: list[str]) -> tuple[float, str, float]:
    proc.stdin.write(json.dumps([question, texts]) + "\n")
    proc.stdin.flush()
    ms, text, onnx_ms = json.loads(proc.stdout.readline())
    return float(ms), str(text), float(onnx_ms)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="source trees, each holding a ragtrim/ package")
    parser.add_argument("--scorer", default="auto")
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args(argv)
    from ragtrim_bench.datasets.nq import build_single_use, load_nq_open

    qs = load_nq_open()
    requests = build_single_use(qs[1062:], pool=qs, limit=args.requests)
    procs = [_start(root, args.scorer) for root in args.roots]
    times: list[list[float]] = [[] for _ in args.roots]
    model_ms: list[list[float]] = [[] for _ in args.roots]
    same = 0
    for k, inst in enumerate(requests):
        texts = [p.content for p in inst.passages]
        outputs = {}
        for i in (range(len(procs)) if k % 2 == 0 else reversed(range(len(procs)))):  # alternate who goes first
            outputs[i] = _ask(procs[i], inst.question, texts)
        for i, (ms, _, onnx_ms) in outputs.items():
            times[i].append(ms)
            model_ms[i].append(onnx_ms)
        same += len({out[1] for out in outputs.values()}) == 1
    for proc in procs:
        proc.stdin.close()
        proc.wait(timeout=30)
    for root, t, m in zip(args.roots, times, model_ms, strict=True):
        print(f"{root}: {args.scorer} cold p50 {statistics.median(t):.2f} ms, mean {statistics.mean(t):.2f} ms, "
              f"ONNX run p50 {statistics.median(m):.2f} ms")
    ratios = [b / a for a, b in zip(times[0], times[-1], strict=True)]
    print(f"paired ratio (last / first) p50 {statistics.median(ratios):.3f}; identical texts {same}/{len(requests)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
