"""What the persistent passage-vector store buys: trim() latency cold (every passage new, the store empty) beside a
workload where 80% of the passages were seen before (the store filled ahead of time by ``ragtrim index``).

Held-out NQ requests (``golden_multidoc``, questions from 1062: 20 passages, BM25-hard distractors, budget a quarter
of the tokens). Two scorers, each in both settings: the default ``trim()`` pipeline (``auto``) and
``scorer="embedding"`` (full-length MiniLM). Per request, every setting runs in turn (interleaved, so machine noise
falls on all alike), each after ``clear_caches()`` and its scorer's in-memory cache emptied:

- ``cold``: the setting's store is emptied before the request (its writes still happen, on the I/O thread);
- ``seen80``: a store that ``ragtrim index`` filled, before anything is timed, with the passages whose SHA-256
  puts them in the first 80% (so a passage is seen or unseen in every request alike); what a request writes of the
  other 20% is deleted again after it, outside the clock.

Before timing, each setting trims two dev requests (models load). Reports p50/p99 wall ms, p50 CPU ms (all threads of
the process) and the share of passages the store answered.

Usage: ragtrim-bench relevance vector_store [--requests N] [--scorers auto,embedding] [-o PATH]
(or python -m ragtrim_bench.relevance.vector_store); writes ``results/relevance/vector_store.json``
(``ragtrim_bench.common.results``). Timings on a shared machine are provisional.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile

HELDOUT_OFFSET = 1062
SEEN_SHARE = 0.8


@dataclass(frozen=True)
class Config:
    requests: int = 100
    scorers: tuple[str, ...] = ("auto", "embedding")
    seen_share: float = SEEN_SHARE


def is_seen(text: str, share: float = SEEN_SHARE) -> bool:
    """Whether ``text`` belongs to the pre-filled share: the first ``share`` of SHA-256 space."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") < share * 2**64


def summarize(wall_ms: Sequence[float], cpu_ms: Sequence[float], hits: int, looked_up: int) -> dict[str, float]:
    return {"p50_ms": round(percentile(wall_ms, 50), 2), "p99_ms": round(percentile(wall_ms, 99), 2),
            "p50_cpu_ms": round(percentile(cpu_ms, 50), 2),
            "store_hit_share": round(hits / looked_up, 3) if looked_up else 0.0}


class Setting:
    """One scorer with one store: the pipeline trim() builds, with the scorer object pointed at ``store_path``."""

    def __init__(self, scorer_name: str, store_path: Path) -> None:
        from ragtrim.scoring.auto import Backend, balanced_scorer, choose, fast_scorer
        from ragtrim.scoring.base import Scorer
        from ragtrim.scoring.embedding import EmbeddingScorer
        from ragtrim.vectors.index import embedders_of

        self.store_path = store_path
        builders: dict[str, Callable[[Backend], Scorer]] = {"balanced": balanced_scorer, "fast": fast_scorer}
        if scorer_name in ("auto", "balanced", "fast"):
            chosen = choose()
            # what get_scorer(name) builds, as an object of its own; bm25 (no model) has no vectors to store
            name = chosen.scorer if scorer_name == "auto" else scorer_name
            self.scorer: Any = builders[name](chosen.backend) if name in builders and chosen.backend != "bm25" else None
        else:
            self.scorer = EmbeddingScorer(device="auto")
        if self.scorer is None:
            raise SystemExit("the auto scorer is bm25 here: there is no model and nothing to store")
        self.embedders = embedders_of(self.scorer)
        for e in self.embedders:
            e.vector_store = str(store_path)  # before first use: nothing is resolved yet

    def run(self, question: str, texts: list[str], budget: int) -> tuple[Any, float, float]:
        from ragtrim.api import default_stages
        from ragtrim.caches import clear_caches
        from ragtrim.pipeline import Pipeline
        from ragtrim.stages.relevance import RelevanceFilter

        clear_caches()
        for e in self.embedders:
            e.clear_cache()
        stages = [RelevanceFilter(scorer=self.scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                  for s in default_stages(budget=budget)]
        pipeline = Pipeline(stages)
        w0, c0 = time.perf_counter(), time.process_time()
        result = pipeline.run(texts, query=question)
        return result, (time.perf_counter() - w0) * 1000, (time.process_time() - c0) * 1000

    def stats(self) -> tuple[int, int]:
        from ragtrim.vectors.store import open_store

        shared = open_store(str(self.store_path))
        return (shared.stats.hits, shared.stats.hits + shared.stats.misses) if shared is not None else (0, 0)


def _keep_only(path: Path, keys: set[bytes]) -> None:
    """Delete every vector of the store file at ``path`` whose key is not in ``keys``."""
    from ragtrim.vectors.store import flush_stores

    flush_stores(60)
    extra = [(k,) for k in _keys(path) if k not in keys]
    if extra:
        with sqlite3.connect(path, timeout=30) as conn:
            conn.executemany("DELETE FROM vectors WHERE key = ?", extra)


def _keys(path: Path) -> set[bytes]:
    if not path.exists():
        return set()
    with sqlite3.connect(path, timeout=30) as conn:
        try:
            return {bytes(k) for (k,) in conn.execute("SELECT key FROM vectors")}
        except sqlite3.OperationalError:  # no table yet
            return set()


def _index(scorer: str, corpus: Path, store: Path) -> dict[str, Any]:
    """Fill ``store`` with ``ragtrim index`` (a process of its own, as an operator runs it)."""
    done = subprocess.run([sys.executable, "-m", "ragtrim", "index", str(corpus), "--scorer", scorer,
                           "--store", str(store), "--quiet"], check=True, capture_output=True, text=True)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def run(config: Config, workdir: Path) -> dict[str, Any]:
    from ragtrim.text.tokens import get_counter
    from ragtrim_bench.datasets.nq import golden_multidoc

    requests = golden_multidoc(config.requests, offset=HELDOUT_OFFSET)
    warmups = golden_multidoc(2, offset=0)
    passages = sorted({p.content for r in requests for p in r.passages})
    seen = [p for p in passages if is_seen(p, config.seen_share)]
    corpus = workdir / "seen.jsonl"
    corpus.write_text("".join(json.dumps({"text": p}) + "\n" for p in seen))
    counter = get_counter("cl100k_base")
    settings: dict[str, Setting] = {}
    indexed: dict[str, Any] = {}
    for name in config.scorers:
        warm_path = workdir / f"{name}-seen80.sqlite3"
        indexed[name] = _index(name, corpus, warm_path)
        settings[f"{name}/cold"] = Setting(name, workdir / f"{name}-cold.sqlite3")
        settings[f"{name}/seen80"] = Setting(name, warm_path)
    prefilled = {key: _keys(s.store_path) for key, s in settings.items() if key.endswith("seen80")}
    for inst in warmups:  # model loads and first-call allocations, on dev questions
        texts = [p.content for p in inst.passages]
        for key, s in settings.items():
            s.run(inst.question, texts, max(1, sum(counter.count(t) for t in texts) // 4))
            _keep_only(s.store_path, prefilled.get(key, set()))
    base = {key: s.stats() for key, s in settings.items()}
    wall: dict[str, list[float]] = {k: [] for k in settings}
    cpu: dict[str, list[float]] = {k: [] for k in settings}
    texts_out: dict[str, list[str]] = {k: [] for k in settings}
    seen_per_request: list[float] = []
    order = list(settings)
    for n, inst in enumerate(requests):
        texts = [p.content for p in inst.passages]
        seen_per_request.append(sum(is_seen(t, config.seen_share) for t in texts) / len(texts))
        budget = max(1, sum(counter.count(t) for t in texts) // 4)
        for key in order[n % len(order):] + order[: n % len(order)]:  # rotate which setting goes first
            result, wall_ms, cpu_ms = settings[key].run(inst.question, texts, budget)
            wall[key].append(wall_ms)
            cpu[key].append(cpu_ms)
            texts_out[key].append(result.text)
            _keep_only(settings[key].store_path, prefilled.get(key, set()))  # cold: empty; seen80: the 80% again
    rows: dict[str, Any] = {}
    for key, s in settings.items():
        hits, looked = s.stats()
        rows[key] = summarize(wall[key], cpu[key], hits - base[key][0], looked - base[key][1])
    for name in config.scorers:
        rows[f"{name}/seen80"]["same_text_as_cold"] = texts_out[f"{name}/cold"] == texts_out[f"{name}/seen80"]
    return {"rows": rows, "indexed": indexed,
            "mean_seen_share_per_request": round(sum(seen_per_request) / len(seen_per_request), 3),
            "passages": len(passages), "passages_indexed": len(seen)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=Config.requests)
    parser.add_argument("--scorers", default=",".join(Config.scorers))
    parser.add_argument("-o", "--output", "--out", type=Path, default=None,
                        help="default: results/relevance/vector_store.json")
    args = parser.parse_args(argv)
    config = Config(requests=args.requests, scorers=tuple(args.scorers.split(",")))
    with tempfile.TemporaryDirectory(prefix="ragtrim-vector-store-") as tmp:
        measured = run(config, Path(tmp))
    from ragtrim.scoring.auto import choose

    result = {
        "benchmark": "vector_store",
        "config": asdict(config),
        "questions": f"NQ golden_multidoc {HELDOUT_OFFSET}-{HELDOUT_OFFSET + config.requests - 1} (held-out)",
        "auto": choose().to_dict(),
        "note": ("shared 2-core machine under load from other work: timings are provisional; compare settings "
                 "within this run only"),
        **measured,
    }
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=["onnxruntime", "redis"])
    for key, row in measured["rows"].items():
        print(f"{key:22s} p50 {row['p50_ms']:8.1f} ms  p99 {row['p99_ms']:8.1f} ms  cpu p50 {row['p50_cpu_ms']:8.1f} ms"
              f"  store hits {row['store_hit_share']:.2f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
