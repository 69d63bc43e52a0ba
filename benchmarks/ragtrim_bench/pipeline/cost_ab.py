"""A cold trim's cost with this checkout's ragtrim against a git revision's, side by side in one run.

  ragtrim-bench pipeline cost_ab --ref REV [--ref-root DIR] [--scorers bm25,auto] [--columns nq-title,...]
                                 [--limit 30] [--rounds 4]

The revision's ``ragtrim`` package is exported (``git archive``) into a temporary folder; the harness (this package)
is the same for both sides, so only the library differs. Each round starts one worker process per side, in turns
(``A B``, then ``B A``), and each worker loads and warms its models, then times every request cold for every scorer
exactly as ``ragtrim-bench pipeline stage_cost`` does (caches cleared before each request, the vector store off). A request's figure is
its fastest round: on a shared machine a round can only be slowed by the other processes, never sped up, so the
minimum over rounds is the most repeatable estimate of what the code costs. Reported per scorer and side: p50 and
mean over requests of those minima (wall and CPU), every round's own p50, and the ratio of this checkout to the
revision. The revision must have ``ragtrim.api.default_pipeline`` and ``ragtrim.caches.clear_caches``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim_bench.common.results import write_and_report
from ragtrim_bench.common.stats import mean, percentile
from ragtrim_bench.relevance.columns import COLUMNS, Split

SIDES = ("checkout", "ref")
WORKER_TIMEOUT_S = 1800


@dataclass(frozen=True)
class CostAbConfig:
    ref: str
    scorers: tuple[str, ...] = ("bm25", "auto")
    columns: tuple[str, ...] = ("nq-title", "nq-notitle")
    split: Split = "heldout"
    limit: int = 30
    ratio: int = 4
    rounds: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.ref.strip():
            raise ConfigError("ref must name a git revision (a commit, branch or tag)")
        if self.limit < 1 or self.rounds < 1:
            raise ConfigError(f"limit and rounds must be >= 1, got {self.limit} and {self.rounds}")
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown or not self.columns:
            raise ConfigError(f"unknown columns {unknown}; choose from {', '.join(COLUMNS)}")
        if not self.scorers:
            raise ConfigError("name at least one scorer")


# -- the worker: one process, one library ----------------------------------------------------------------------------
def measure_all(config: CostAbConfig) -> dict[str, Any]:
    """Every request cold for every scorer (turns alternating per request), after one warm-up per scorer and column:
    ``{"ragtrim": its file, "requests": [ids], "wall_ms"/"cpu_ms": {scorer: [per request]}}``."""
    import ragtrim
    from ragtrim_bench.pipeline.stage_cost import budgeted_requests, measure_one, warm_up

    requests = budgeted_requests(config.columns, config.split, config.limit, config.seed, config.ratio)
    warm_up(config.scorers, requests)
    wall: dict[str, list[float]] = {s: [] for s in config.scorers}
    cpu: dict[str, list[float]] = {s: [] for s in config.scorers}
    for k, (request, budget) in enumerate(requests):
        for scorer in config.scorers if k % 2 == 0 else tuple(reversed(config.scorers)):
            m = measure_one(scorer, request, budget)
            wall[scorer].append(m.wall_ms)
            cpu[scorer].append(m.cpu_ms)
    return {"ragtrim": ragtrim.__file__, "requests": [r.id for r, _ in requests], "wall_ms": wall, "cpu_ms": cpu}


def _worker_args(config: CostAbConfig) -> list[str]:
    return ["--ref", config.ref, "--scorers", ",".join(config.scorers), "--columns", ",".join(config.columns),
            "--split", config.split, "--limit", str(config.limit), "--ratio", str(config.ratio)]


def run_worker(root: Path, config: CostAbConfig) -> dict[str, Any]:
    """One worker process whose ``ragtrim`` is the package under ``root``; its measurements."""
    bench_root = _package_root("ragtrim_bench")
    # The caller's path stays (where dependencies may lie) except folders holding another ragtrim; the vector store
    # is off: a stored vector would make a "cold" trim warm.
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and not (Path(p) / "ragtrim" / "__init__.py").is_file()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(bench_root), *kept]),
               RAGTRIM_VECTOR_STORE="off")
    # -P: no current folder on the path, so that the checkout it runs from cannot shadow ``root``
    done = subprocess.run([sys.executable, "-P", "-m", __spec__.name, "--worker", *_worker_args(config)],
                          env=env, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the worker for {root} failed ({done.returncode}): {done.stderr[-2000:]}")
    body: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(body["ragtrim"]).resolve().is_relative_to(root.resolve()):
        raise RuntimeError(f"the worker for {root} imported ragtrim from {body['ragtrim']}")
    return body


def _package_root(package: str) -> Path:
    """The folder that holds ``package`` as this process imports it."""
    return Path(str(resources.files(package))).resolve().parent


# -- the run: rounds of both sides -------------------------------------------------------------------------------------
def export_ref(ref: str, repo: Path, into: Path) -> str:
    """``git archive`` of the revision's ``ragtrim`` folder under ``into``; the full commit id."""
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                         capture_output=True, text=True, check=False)
    if sha.returncode != 0:
        raise ConfigError(f"{ref!r} is not a revision of {repo}: {sha.stderr.strip()}")
    commit = sha.stdout.strip()
    archive = into / "ref.tar"
    subprocess.run(["git", "-C", str(repo), "archive", "-o", str(archive), commit, "ragtrim"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return commit


def side_summary(rounds: Sequence[Mapping[str, Any]], scorer: str) -> dict[str, Any]:
    """Per request the fastest round (wall and CPU), then p50 and mean over requests; each round's own p50."""
    walls = [r["wall_ms"][scorer] for r in rounds]
    cpus = [r["cpu_ms"][scorer] for r in rounds]
    best_wall = [min(per) for per in zip(*walls, strict=True)]
    best_cpu = [min(per) for per in zip(*cpus, strict=True)]
    return {"n": len(best_wall), "p50_of_best_ms": percentile(best_wall, 50), "mean_of_best_ms": mean(best_wall),
            "p99_of_best_ms": percentile(best_wall, 99), "p50_of_best_cpu_ms": percentile(best_cpu, 50),
            "mean_of_best_cpu_ms": mean(best_cpu), "round_p50_ms": [percentile(w, 50) for w in walls]}


def compare(by_side: Mapping[str, Sequence[Mapping[str, Any]]], scorers: Sequence[str]) -> dict[str, Any]:
    """Each scorer's summary per side and the checkout / ref ratios (below 1: the checkout is cheaper)."""
    ids = {side: [tuple(r["requests"]) for r in rounds] for side, rounds in by_side.items()}
    if len({x for v in ids.values() for x in v}) != 1:
        raise RuntimeError("the sides measured different requests")
    out: dict[str, Any] = {}
    for scorer in scorers:
        sides = {side: side_summary(rounds, scorer) for side, rounds in by_side.items()}
        a, b = sides["checkout"], sides["ref"]
        out[scorer] = {**sides, "ratio_p50": a["p50_of_best_ms"] / b["p50_of_best_ms"],
                       "ratio_mean": a["mean_of_best_ms"] / b["mean_of_best_ms"],
                       "ratio_cpu_p50": a["p50_of_best_cpu_ms"] / b["p50_of_best_cpu_ms"]}
    return out


def run(config: CostAbConfig, progress: bool = True, ref_root: Path | None = None) -> dict[str, Any]:
    """``ref_root``: a folder that holds the revision's ``ragtrim`` package already (on a machine without the git
    history); ``config.ref`` then only names it."""
    checkout = _package_root("ragtrim")
    by_side: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragtrim-cost-ab-") as tmp:
        if ref_root is None:
            commit = export_ref(config.ref, checkout, Path(tmp))
        elif (ref_root / "ragtrim" / "__init__.py").is_file():
            commit = config.ref
        else:
            raise ConfigError(f"--ref-root {ref_root} holds no ragtrim package")
        roots = {"checkout": checkout, "ref": ref_root or Path(tmp)}
        for k in range(config.rounds):
            for side in SIDES if k % 2 == 0 else tuple(reversed(SIDES)):
                by_side[side].append(run_worker(roots[side], config))
            if progress:
                print(f"  round {k + 1}/{config.rounds}, {time.perf_counter() - started:.0f} s", flush=True)
    return {"benchmark": "cost_ab", "config": {**config.__dict__, "ref_commit": commit},
            "state": "cold: in-process caches cleared before each request, vector store off (models loaded and "
                     "warmed)",
            "estimate": "per request the fastest of the rounds; p50 and mean over requests",
            "load_average_at_end": list(os.getloadavg()), "by_scorer": compare(by_side, config.scorers),
            "measure_wall_s": time.perf_counter() - started}


def report(result: Mapping[str, Any]) -> str:
    head = (f"checkout against {result['config']['ref']} ({result['config']['ref_commit'][:12]}), cold, "
            f"{result['config']['rounds']} rounds, per request the fastest round:")
    lines = [head]
    for scorer, body in result["by_scorer"].items():
        a, b = body["checkout"], body["ref"]
        lines.append(f"  {scorer}: p50 {a['p50_of_best_ms']:.2f} ms vs {b['p50_of_best_ms']:.2f} ms "
                     f"(x{body['ratio_p50']:.3f}); mean {a['mean_of_best_ms']:.2f} vs {b['mean_of_best_ms']:.2f} "
                     f"(x{body['ratio_mean']:.3f}); CPU p50 {a['p50_of_best_cpu_ms']:.2f} vs "
                     f"{b['p50_of_best_cpu_ms']:.2f} (x{body['ratio_cpu_p50']:.3f}); n={a['n']}")
    return "\n".join(lines)


def _names(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help="the git revision to compare with (a commit, branch or tag)")
    parser.add_argument("--scorers", default="bm25,auto")
    parser.add_argument("--columns", default="nq-title,nq-notitle")
    parser.add_argument("--split", default="heldout", choices=("dev", "heldout"))
    parser.add_argument("--limit", type=int, default=30, help="requests per column")
    parser.add_argument("--ratio", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4, help="worker processes per side")
    parser.add_argument("--ref-root", type=Path, default=None,
                        help="a folder holding the revision's ragtrim package (git archive REV ragtrim), for a "
                             "machine without the repository's history; --ref then only names it")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/pipeline/cost_ab.json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    split: Split = "dev" if args.split == "dev" else "heldout"
    config = CostAbConfig(ref=args.ref, scorers=_names(args.scorers), columns=_names(args.columns), split=split,
                          limit=args.limit, ratio=args.ratio, rounds=args.rounds)
    if args.worker:
        print(json.dumps(measure_all(config)))
        return 0
    result = run(config, progress=not args.no_progress, ref_root=args.ref_root)
    write_and_report(__spec__.name, argv, args.output, result, report=report(result), packages=("ragtrim", "numpy", "tiktoken", "onnxruntime"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
