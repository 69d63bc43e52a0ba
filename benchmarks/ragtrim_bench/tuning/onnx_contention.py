"""Does Python work in the caller's thread slow an ONNX Runtime pass on another thread? (It does where the two
threads share a physical core, as this project's 2-vCPU machine's do.)

  ragtrim-bench tuning onnx_contention

Times the fast path's model pass (int8 MiniLM, 21 texts x 10 pieces, one intra-op thread) 40 times alone and 40
times on a second thread while the main thread computes, and prints both medians.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Sequence

import numpy as np


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    scorer = OnnxEmbeddingScorer(max_seq_length=10, threads=1)
    session, _ = scorer._parts()
    ids = np.random.default_rng(0).integers(1000, 20000, size=(21, 10)).astype(np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    for _ in range(5):
        session.run(None, feed)

    def one() -> float:
        t = time.perf_counter()
        session.run(None, feed)
        return (time.perf_counter() - t) * 1000

    alone = [one() for _ in range(40)]
    busy: list[float] = []
    for _ in range(40):
        thread = threading.Thread(target=lambda: busy.append(one()))
        thread.start()
        x = 0
        while thread.is_alive():
            x += sum(i * i for i in range(200))
        thread.join()
    print(f"model pass p50: alone {statistics.median(alone):.2f} ms, beside a busy caller thread "
          f"{statistics.median(busy):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
