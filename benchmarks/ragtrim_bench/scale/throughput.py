"""Throughput of ``ragtrim audit`` and ``ragtrim index`` against Ray workers, the local engine beside them, and the
per-worker rates behind docs/scale.md's plan for 100 million requests and passages.

audit: the synthetic log (``audit synth``, written as plain JSONL so that it is cut into ``--shard-mb`` ranges) read
by the local engine and by ``--engine ray`` with each ``--workers`` count; requests per second over the whole job
and in steady state (from the first shard back to the last), this process's merge time, the workers' peak memory,
and whether the report equals the local engine's. index: NQ passages (the NQ-open gold passages, numbered copies
up to ``--passages``) embedded by the ``balanced`` scorer on ONNX Runtime's CPU backend (the recipe CPU trims read)
into a fresh SQLite store, by the local engine and the Ray engine; passages per second and whether the stores hold
the same bytes. ``--gpu``: one actor per GPU embeds the same passages with torch on CUDA (the GPU's ``balanced``
model pass), without a store: no CUDA backend has a store recipe yet, so this arm is the embedding rate only.
``--no-ray``: the local engine's arms alone, and ``--gpu`` as one model pass on ``cuda:0`` in this process, for a host
without the ``ray`` extra; ``--threads 1`` then makes the local index rate a per-core rate.

One Ray instance is started here for the run, with as many CPUs as the largest worker count (and the GPUs it finds).
Before timing, each job runs once on a small input (models exported and loaded, caches warm). Timings on a shared,
loaded machine are provisional: the result records the load average.

Usage: ragtrim-bench scale throughput [--jobs audit,index] [--workers 1,2] [--audit-requests N] [--passages N]
  [--threads N] [--gpu] [--no-ray] [-o PATH]   -> results/scale/throughput.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.procs import descendants, peak_rss_mib
from ragtrim_bench.common.results import command_line, result_path, shown_path, write_result

CACHE = Path(".cache") / "scale"
"""Generated inputs, relative to the working directory (the repository root; git-ignored: they hold the data's text)."""
TARGET = 100_000_000
"""The plan's size: requests for the audit, passages for the index."""


@dataclass(frozen=True, kw_only=True)
class ThroughputConfig:
    jobs: tuple[str, ...] = ("audit", "index")
    workers: tuple[int, ...] = (1, 2)
    audit_requests: int = 20_000
    shard_mb: float = 2.0
    passages: int = 4_000
    batch_size: int = 64
    repeat: int = 1
    gpu: bool = False
    ray: bool = True
    threads: int | None = None
    """ONNX threads of the local index arm and of each Ray index worker (None: one a Ray worker, ONNX's own choice
    locally)."""


# -- pure functions (tests/bench/scale/test_throughput.py) -----------------------------------------------------------
def steady_rate(events: Sequence[tuple[float, int]]) -> float | None:
    """Items per second between the first and the last progress event (``(time, items so far)``): the rate once
    workers are up and the pipeline is full, without start-up and the last straggler's wait."""
    if len(events) < 2 or events[-1][0] <= events[0][0]:
        return None
    return (events[-1][1] - events[0][1]) / (events[-1][0] - events[0][0])


def plan(per_worker_per_s: float, *, items: int = TARGET, workers: Sequence[int] = (16, 64, 256)) -> dict[str, Any]:
    """Hours for ``items`` at a per-worker rate, on a few cluster sizes (perfect scaling: the plan says where it
    stops)."""
    worker_hours = items / per_worker_per_s / 3600
    return {"per_worker_per_s": round(per_worker_per_s, 1), "worker_hours": round(worker_hours, 1),
            "hours_by_workers": {str(w): round(worker_hours / w, 2) for w in workers}}


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# -- measurement ---------------------------------------------------------------------------------------------------
class PeakMemory:
    """The highest peak RSS (VmHWM) of this process's descendants whose command line names ``actor``, sampled every
    half second while the block runs (Ray names an actor's process after its class)."""

    def __init__(self, actor: str) -> None:
        self.actor = actor
        self.peak_mib = 0.0
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            for pid, title in descendants().items():
                if self.actor in title:
                    self.peak_mib = max(self.peak_mib, peak_rss_mib(pid) or 0.0)

    @contextmanager
    def watch(self) -> Iterator[PeakMemory]:
        thread = threading.Thread(target=self._sample, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()


def audit_log(requests: int) -> Path:
    """The synthetic log as plain JSONL (written once into ``CACHE``)."""
    from ragtrim_bench.audit.synth import SynthConfig, write_log

    plain = CACHE / f"synth-{requests}.jsonl"
    if not plain.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        packed = CACHE / f"synth-{requests}.jsonl.gz"
        write_log(SynthConfig(requests=requests, seed=0), packed)
        with gzip.open(packed, "rb") as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        packed.unlink()
    return plain


def corpus(passages: int, files: int = 8) -> list[Path]:
    """NQ-open gold passages (title and text), numbered copies past the unique ones, in ``files`` JSONL files."""
    from ragtrim_bench.datasets.nq import load_nq_open

    folder = CACHE / f"nq-passages-{passages}"
    paths = [folder / f"part{i}.jsonl" for i in range(files)]
    if all(p.exists() for p in paths):
        return paths
    unique = list(dict.fromkeys(f"{q.gold.title}\n{q.gold.text}" for q in load_nq_open()))
    texts = [unique[i % len(unique)] + (f" ({i // len(unique)})" if i >= len(unique) else "") for i in range(passages)]
    folder.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(paths):
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::files]), encoding="utf-8")
    return paths


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs between runs by nature (times, memory, the engine's description)."""
    out: dict[str, Any] = json.loads(json.dumps(report))
    out.pop("run")
    out.get("savings", {}).pop("trim_ms_per_request", None)
    return out


def store_bytes(path: Path) -> dict[bytes, bytes]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM vectors").fetchall())


class Progress:
    """When each item count was reached: ``add(n)`` for increments, ``reach(done)`` for totals."""

    def __init__(self) -> None:
        self.done = 0
        self.events: list[tuple[float, int]] = []

    def reach(self, done: int, *_: Any) -> None:
        self.done = done
        self.events.append((time.perf_counter(), done))

    def add(self, n: int) -> None:
        self.reach(self.done + n)


def timed(run: Callable[[Progress], Any]) -> tuple[Any, float, float | None]:
    """``run(progress)``'s result, its wall seconds, and its steady rate (progress units per second)."""
    progress = Progress()
    t0 = time.perf_counter()
    result = run(progress)
    return result, time.perf_counter() - t0, steady_rate(progress.events)


def audit_arm(cfg: ThroughputConfig) -> dict[str, Any]:
    from ragtrim.audit.config import AuditConfig
    from ragtrim.audit.core import run_audit
    from ragtrim.engines.options import RayOptions
    from ragtrim.engines.ray_audit import run_ray_audit

    log = audit_log(cfg.audit_requests)
    audit_cfg = AuditConfig(savings=None)
    shard_bytes = int(cfg.shard_mb * 2**20)
    if cfg.ray:
        run_ray_audit(audit_log(500), audit_cfg, RayOptions(workers=1), shard_bytes=shard_bytes)  # warm-up
    else:
        run_audit(audit_log(500), audit_cfg)
    walls = []
    for _ in range(cfg.repeat):
        t0 = time.perf_counter()
        local = run_audit(log, audit_cfg)
        walls.append(time.perf_counter() - t0)
    requests = local["breakdown"]["requests"]
    out: dict[str, Any] = {"log": shown_path(log), "log_mib": round(log.stat().st_size / 2**20, 1),
                           "requests": requests, "local": {"wall_s": round(median(walls), 2),
                                                           "requests_per_s": round(requests / median(walls), 1)},
                           "ray": []}
    for n in cfg.workers if cfg.ray else ():
        rows = []
        for _ in range(cfg.repeat):
            def job(progress: Progress, n: int = n) -> dict[str, Any]:
                return run_ray_audit(log, audit_cfg, RayOptions(workers=n), shard_bytes=shard_bytes,
                                     progress=progress.reach)

            memory = PeakMemory("ShardAuditor")
            with memory.watch():
                report, wall, steady = timed(job)
            run = report["run"]
            shard_requests = requests / run["shards"]
            rows.append({"workers": n, "wall_s": round(wall, 2), "requests_per_s": round(requests / wall, 1),
                         "steady_requests_per_s": round(steady * shard_requests, 1) if steady else None,
                         "busy_requests_per_worker_s": round(requests / run["worker_read_seconds"], 1),
                         "shards": run["shards"], "merge_s": run["merge_seconds"], "state_mib": run["state_mib"],
                         "driver_peak_rss_mib": run["peak_rss_mib"], "worker_peak_rss_mib": round(memory.peak_mib, 1),
                         "equal_to_local": comparable(report) == comparable(local)})
        out["ray"].append(min(rows, key=lambda r: r["wall_s"]) | {"runs": len(rows)})
    return out


def index_arm(cfg: ThroughputConfig) -> dict[str, Any]:
    from ragtrim.engines.options import RayOptions
    from ragtrim.engines.ray_index import run_ray_index
    from ragtrim.scoring.auto import balanced_scorer
    from ragtrim.vectors.index import IndexReport, index_passages, read_corpus

    files = corpus(cfg.passages)
    scorer = balanced_scorer(backend="onnxruntime-int8-cpu", threads=cfg.threads)
    work = Path(tempfile.mkdtemp(prefix="rt-scale-"))
    try:
        warm = work / "warm.sqlite3"
        index_passages(read_corpus(files[:1]), scorer=scorer, store=str(warm))  # export and load the model
        if cfg.ray:
            run_ray_index(files[:1], store=str(work / "warm-ray.sqlite3"), scorer=scorer,
                          options=RayOptions(workers=1))
        local_store = work / "local.sqlite3"
        t0 = time.perf_counter()
        local = index_passages(read_corpus(files), scorer=scorer, store=str(local_store), batch_size=cfg.batch_size)
        local_wall = time.perf_counter() - t0
        out: dict[str, Any] = {"passages": local.passages, "scorer": "balanced, onnxruntime-int8-cpu",
                               "local": {"wall_s": round(local_wall, 2), "threads": cfg.threads,
                                         "passages_per_s": round(local.passages / local_wall, 1)}, "ray": []}
        for n in cfg.workers if cfg.ray else ():
            store = work / f"ray-{n}.sqlite3"
            def job(progress: Progress, n: int = n, store: Path = store) -> IndexReport:
                return run_ray_index(files, store=str(store), scorer=scorer, options=RayOptions(workers=n),
                                     batch_size=cfg.batch_size, progress=progress.add)

            memory = PeakMemory("BatchIndexer")
            with memory.watch():
                report, wall, steady = timed(job)
            out["ray"].append({"workers": n, "wall_s": round(wall, 2),
                               "passages_per_s": round(report.passages / wall, 1),
                               "steady_passages_per_s": round(steady, 1) if steady else None,
                               "stored": report.stored, "worker_peak_rss_mib": round(memory.peak_mib, 1),
                               "equal_to_local": store_bytes(store) == store_bytes(local_store)})
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


class GpuEmbedder:
    """A Ray Data actor on one GPU: the ``balanced`` recipe's model pass on CUDA (torch, 128 pieces), no store."""

    def __init__(self) -> None:
        from ragtrim.scoring.auto import BALANCED_PREFIX_TOKENS
        from ragtrim.scoring.torch_backend import TorchEmbeddingScorer

        self.model = TorchEmbeddingScorer(device="cuda", max_seq_length=BALANCED_PREFIX_TOKENS, vector_store=None,
                                          cache_size=0)
        self.model.embed(["warm up"])

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        self.model.embed([str(t) for t in batch["text"]])
        return {"passages": np.array([len(batch["text"])])}


GPU_NOTE = ("embedding only (torch on CUDA, 128 pieces, batches of --batch-size): no store recipe exists for a CUDA "
            "backend yet")


def gpu_local_arm(cfg: ThroughputConfig) -> dict[str, Any]:
    """The GPU arm without Ray: one ``GpuEmbedder`` on ``cuda:0`` in this process."""
    from ragtrim.vectors.index import read_corpus

    texts = list(read_corpus(corpus(cfg.passages)))
    embedder = GpuEmbedder()
    progress = Progress()
    t0 = time.perf_counter()
    for start in range(0, len(texts), cfg.batch_size):
        batch = texts[start:start + cfg.batch_size]
        embedder({"text": batch})
        progress.add(len(batch))
    wall = time.perf_counter() - t0
    steady = steady_rate(progress.events)
    return {"gpus": 1, "engine": "local", "passages": progress.done, "wall_s": round(wall, 2),
            "passages_per_s": round(progress.done / wall, 1),
            "steady_passages_per_s": round(steady, 1) if steady else None, "note": GPU_NOTE}


def gpu_arm(cfg: ThroughputConfig, gpus: int) -> dict[str, Any]:
    import ray

    from ragtrim.vectors.index import read_corpus

    texts = list(read_corpus(corpus(cfg.passages)))
    ds = ray.data.from_items([{"text": t} for t in texts], override_num_blocks=max(1, 4 * gpus))
    progress = Progress()
    t0 = time.perf_counter()
    for row in ds.map_batches(GpuEmbedder, batch_size=cfg.batch_size, num_gpus=1,
                              compute=ray.data.ActorPoolStrategy(size=gpus)).iter_rows():
        progress.add(int(row["passages"]))
    wall = time.perf_counter() - t0
    steady = steady_rate(progress.events)
    return {"gpus": gpus, "engine": "ray", "passages": progress.done, "wall_s": round(wall, 2),
            "passages_per_s": round(progress.done / wall, 1),
            "steady_passages_per_s": round(steady, 1) if steady else None, "note": GPU_NOTE}


def run(cfg: ThroughputConfig) -> dict[str, Any]:
    from ragtrim.engines.options import RayOptions
    from ragtrim.engines.ray_cluster import ray_cluster

    result: dict[str, Any] = {"benchmark": "scale_throughput", "config": asdict(cfg),
                              "load_average_before": load_average()}
    if not cfg.ray:
        if "audit" in cfg.jobs:
            result["audit"] = audit_arm(cfg)
        if "index" in cfg.jobs:
            result["index"] = index_arm(cfg)
        if cfg.gpu:
            result["gpu"] = gpu_local_arm(cfg) if cuda_devices() else {"note": "no CUDA device"}
        result["load_average_after"] = load_average()
        result["plan"] = plans(result)
        return result
    with ray_cluster(RayOptions(workers=max(cfg.workers))) as ray:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if "audit" in cfg.jobs:
            result["audit"] = audit_arm(cfg)
        if "index" in cfg.jobs:
            result["index"] = index_arm(cfg)
        if cfg.gpu:
            result["gpu"] = gpu_arm(cfg, gpus) if gpus else {"note": "no GPU in the Ray instance"}
    result["load_average_after"] = load_average()
    result["plan"] = plans(result)
    return result


def cuda_devices() -> int:
    """CUDA devices torch sees (0 without torch)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count())


def plans(result: dict[str, Any]) -> dict[str, Any]:
    """The 100M plan's inputs: the best per-worker rate measured (steady state, per worker) of each job; without Ray
    rows, the local engine's rate where it is one core's (the audit always, the index with one thread)."""
    out: dict[str, Any] = {}
    for job, key, local_key in (("audit", "steady_requests_per_s", "requests_per_s"),
                                ("index", "steady_passages_per_s", "passages_per_s")):
        measured = result.get(job, {})
        rows = [r for r in measured.get("ray", []) if r.get(key)]
        local = measured.get("local", {})
        if rows:
            best = max(rows, key=lambda r: r[key] / r["workers"])
            out[job] = {"from_workers": best["workers"], **plan(best[key] / best["workers"])}
        elif local.get(local_key) and (job == "audit" or local.get("threads") == 1):
            out[job] = {"from_engine": "local", **plan(local[local_key])}
    gpu = result.get("gpu", {})
    if gpu.get("steady_passages_per_s"):
        out["index_gpu"] = {"from_gpus": gpu["gpus"], **plan(gpu["steady_passages_per_s"] / gpu["gpus"],
                                                             workers=(1, 8, 32))}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="audit,index", help="audit, index or both (default)")
    parser.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2,4,8,16")
    parser.add_argument("--audit-requests", type=int, default=ThroughputConfig.audit_requests)
    parser.add_argument("--shard-mb", type=float, default=ThroughputConfig.shard_mb)
    parser.add_argument("--passages", type=int, default=ThroughputConfig.passages)
    parser.add_argument("--batch-size", type=int, default=ThroughputConfig.batch_size)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None,
                        help="ONNX threads of the local index arm and of each Ray index worker (default: one a Ray "
                             "worker, ONNX's choice locally)")
    parser.add_argument("--gpu", action="store_true", help="add the GPU arm (index): an actor a GPU, or with "
                                                           "--no-ray one GPU in this process")
    parser.add_argument("--no-ray", action="store_true",
                        help="the local engine's arms (and --gpu in this process) alone: no Ray needed")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/scale/throughput.json")
    args = parser.parse_args(argv)
    cfg = ThroughputConfig(jobs=tuple(j for j in args.jobs.split(",") if j),
                           workers=tuple(int(w) for w in args.workers.split(",")),
                           audit_requests=args.audit_requests, shard_mb=args.shard_mb, passages=args.passages,
                           batch_size=args.batch_size, repeat=args.repeat, gpu=args.gpu, ray=not args.no_ray,
                           threads=args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = run(replace(cfg))
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=("ray", "pyarrow", "onnxruntime", "torch"))
    for job in ("audit", "index"):
        if job in result:
            print(job, "local", result[job]["local"])
            for row in result[job]["ray"]:
                print(job, {k: v for k, v in row.items()})
    if "gpu" in result:
        print("gpu", result["gpu"])
    print("plan", json.dumps(result["plan"]))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
