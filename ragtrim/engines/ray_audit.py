"""``ragtrim audit --engine ray LOGS...``: the audit on a Ray cluster, with the local engine's report.

The input is cut into shards (each log file; plain JSONL files also into byte ranges of ``shard_bytes``), each read
by a worker of a Ray Data actor pool into a mergeable ``AuditState`` (``ragtrim.audit.state``), which comes back to
this process in input order and is absorbed into the state of the whole input. The savings sample is then trimmed
on the workers, and the report is built as the local engine builds it. Every log must be readable at the same path
by this process and by every worker (one machine, or a shared file system).
"""

from __future__ import annotations

import math
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim.audit.config import AuditConfig
from ragtrim.audit.core import build_report, check_not_empty, log_paths, measure_sample
from ragtrim.audit.savings import SampleRecord, measure
from ragtrim.audit.shards import LogShard, plan_shards
from ragtrim.audit.state import AuditState, Workspace, audit_shard, empty_state
from ragtrim.engines.options import RayOptions
from ragtrim.engines.ray_cluster import (
    import_ray,
    pack_error,
    quiet_data_context,
    ragtrim_error,
    ray_cluster,
    runtime_env,
    unpack_error,
    worker_count,
)
from ragtrim.errors import ConfigError, RagtrimError
from ragtrim.text.tokens import get_counter

DEFAULT_SHARD_BYTES = 64 * 2**20
"""Plain logs are read in byte ranges of about this size: a few seconds of work for one worker, a state of a few
MiB to send back."""
LOCAL_TRIM_MAX = 500
"""A savings sample up to this size is trimmed in this process (the default 200 take about a second with BM25,
less than starting the workers' pipelines); a larger one is trimmed on the workers."""


class ShardAuditor:
    """A Ray Data actor: the mergeable state of each shard it is given, its token and document caches kept from one
    shard to the next."""

    def __init__(self, config: bytes) -> None:
        self.config: AuditConfig = pickle.loads(config)
        self.workspace: Workspace | None = None

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        states, errors = [], []
        for raw in batch["shard"]:
            shard: LogShard = pickle.loads(raw)
            if self.workspace is None:
                self.workspace = Workspace(self.config, AuditState(self.config).documents)
            try:  # a log the audit cannot read (not UTF-8, a refused format) fails the job as it fails locally
                states.append(pickle.dumps(audit_shard(shard, self.config, self.workspace), protocol=5))
                errors.append(b"")
            except RagtrimError as exc:
                states.append(b"")
                errors.append(pack_error(exc))
        return {"index": batch["index"], "state": np.array(states, dtype=object),
                "error": np.array(errors, dtype=object)}


class SampleTrimmer:
    """A Ray Data actor: ragtrim's pipeline on sampled requests (the savings run)."""

    def __init__(self, config: bytes) -> None:
        self.config: AuditConfig = pickle.loads(config)
        self.counter = get_counter(self.config.tokenizer)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        savings = self.config.savings
        assert savings is not None  # only a run with savings trims a sample
        records = []
        for raw in batch["item"]:
            req, parts, output = pickle.loads(raw)
            records.append(pickle.dumps(measure(req, parts, output, self.counter, savings), protocol=5))
        return {"index": batch["index"], "record": np.array(records, dtype=object)}


def run_ray_audit(path: str | Path | Sequence[str | Path], config: AuditConfig | None = None,
                  options: RayOptions | None = None, *, shard_bytes: int | None = DEFAULT_SHARD_BYTES,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """``run_audit``'s report for the same logs, computed on Ray (see the module docstring). ``progress(done,
    total)`` is called as shards come back. A ``--sample`` of 0 (trim every request) would bring every request to
    this process, so it is refused: give a sample size."""
    import_ray()  # a missing extra first: nothing below can run without it
    cfg = config or AuditConfig()
    opts = options or RayOptions()
    started = time.perf_counter()
    paths = log_paths(path)
    if "-" in paths:
        raise ConfigError("--engine ray reads files that every worker opens; stdin ('-') is for --engine local")
    if cfg.savings is not None and cfg.savings.sample == 0:
        raise ConfigError("--sample 0 trims every request in this process; with --engine ray give a sample size "
                          "(e.g. --sample 10000), or use --engine local")
    shards = plan_shards(paths, shard_bytes=shard_bytes)
    tokenizer = get_counter(cfg.tokenizer).name
    worker_cfg = pickle.dumps(replace(cfg, num_threads=1))
    try:
        with ray_cluster(opts) as ray:
            quiet_data_context(ray)
            workers = min(worker_count(ray, opts), len(shards))
            total, merging = _read(ray, shards, worker_cfg, workers, opts, cfg, progress)
            check_not_empty(total)
            breakdown_seconds = time.perf_counter() - started
            savings_started = time.perf_counter()
            if len(total.sample.items) <= LOCAL_TRIM_MAX:
                records = measure_sample(total, get_counter(cfg.tokenizer), cfg)
            else:
                records = _trim_sample(ray, total, worker_cfg, worker_count(ray, opts), opts)
            savings_seconds = time.perf_counter() - savings_started
    except Exception as exc:  # a worker's InputError (not UTF-8, a refused format) is raised as itself
        found = ragtrim_error(exc)
        if found is exc:
            raise
        raise found from None
    return build_report(total, cfg, records, tokenizer=tokenizer, started=started,
                        breakdown_seconds=breakdown_seconds, savings_seconds=savings_seconds,
                        engine={"engine": "ray", "workers": workers, "shards": len(shards),
                                "worker_read_seconds": round(total.read_seconds, 3), **merging})


def _read(ray: Any, shards: list[LogShard], worker_cfg: bytes, workers: int, opts: RayOptions, cfg: AuditConfig,
          progress: Callable[[int, int], None] | None) -> tuple[AuditState, dict[str, float]]:
    """The whole input's state, and what merging it cost this process (seconds in ``absorb``, MiB of states)."""
    items = [{"index": i, "shard": pickle.dumps(s, protocol=5)} for i, s in enumerate(shards)]
    ds = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        ShardAuditor, fn_constructor_kwargs={"config": worker_cfg}, batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=opts.cpus_per_worker, runtime_env=runtime_env())
    total = empty_state(cfg)
    merge_seconds, state_bytes = 0.0, 0
    for expected, row in enumerate(ds.iter_rows()):
        if int(row["index"]) != expected:  # absorbing is exact only in input order
            raise RuntimeError(f"shard {row['index']} came back before shard {expected}")
        if row["error"]:
            raise unpack_error(row["error"])
        started = time.perf_counter()
        total.absorb(pickle.loads(row["state"]))
        merge_seconds += time.perf_counter() - started
        state_bytes += len(row["state"])
        if progress is not None:
            progress(expected + 1, len(shards))
    return total, {"merge_seconds": round(merge_seconds, 3), "state_mib": round(state_bytes / 2**20, 2)}


def _trim_sample(ray: Any, total: AuditState, worker_cfg: bytes, workers: int, opts: RayOptions) -> list[SampleRecord]:
    items = total.sample.items
    if not items:
        return []
    rows = [{"index": i, "item": pickle.dumps(item, protocol=5)} for i, item in enumerate(items)]
    per_call = max(1, math.ceil(len(rows) / (2 * workers)))
    ds = ray.data.from_items(rows, override_num_blocks=math.ceil(len(rows) / per_call)).map_batches(
        SampleTrimmer, fn_constructor_kwargs={"config": worker_cfg}, batch_size=per_call,
        compute=ray.data.ActorPoolStrategy(size=min(workers, math.ceil(len(rows) / per_call))),
        num_cpus=opts.cpus_per_worker, runtime_env=runtime_env())
    return [pickle.loads(row["record"]) for row in ds.iter_rows()]
