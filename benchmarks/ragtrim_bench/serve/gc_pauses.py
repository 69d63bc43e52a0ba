"""The garbage collector's full collections inside the gateway's requests, with ``[serve] freeze_gc`` on and off.

Each arm is a fresh process that starts the gateway as ``ragtrim serve`` does (its lifespan: the warm-up, then the
freeze when ``freeze_gc`` is on) and prepares ``--requests`` completion requests in a row through the gateway's own
preparation (``ragtrim.serve.intake.parse_and_prepare``: read, trim, render, count), on the golden NQ questions of
``ragtrim-bench gpu gateway_e2e`` with 20 passages each, every passage new (``ragtrim_bench.gpu.prompts.
cold_prompts``). Caches are kept between requests, as in a server, so its per-text caches fill as they do in
service. Every full (generation 2) collection is recorded with its length and the request it fell in
(``gc.callbacks``), beside each request's time, and one more full collection is forced at the end and timed: what
each one costs in that process. ``--torch`` imports torch and transformers before the start, as ragtrim's CUDA check
does on any host with an NVIDIA driver (the GPU hidden or not): they add most of the long-lived objects a full collection
walks (``objects_tracked_after_start`` in the result). Arms alternate, in a new process each round.
Run: ragtrim-bench serve gc_pauses [--torch] [--scorer balanced] [--requests 2000] [--rounds 2]
     -> benchmarks/results/serve/gc_pauses.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import measure_and_write
from ragtrim_bench.common.stats import summarize_ms

WARM_UP = 4
"""Requests prepared after the start and before the timed ones (not timed)."""

ARMS = {"freeze_gc off": False, "freeze_gc on": True}


@dataclass(frozen=True, slots=True)
class GcPausesConfig:
    scorer: str = "balanced"
    budget: float = 0.25
    requests: int = 2000
    rounds: int = 2
    torch: bool = False

    def __post_init__(self) -> None:
        if self.requests < 1 or self.rounds < 1 or not 0 < self.budget < 1:
            raise ValueError(f"requests and rounds must be >= 1 and budget a share in (0, 1), got {self.requests}, "
                             f"{self.rounds} and {self.budget}")


def child(config: GcPausesConfig, freeze: bool) -> dict[str, Any]:
    """One arm in this process: the gateway's start, then the requests; what each cost and every full collection."""
    if config.torch:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    import tomllib

    from ragtrim.serve.app import Gateway
    from ragtrim.serve.config import parse_config
    from ragtrim.serve.intake import parse_and_prepare
    from ragtrim.serve.render import prepare_completion
    from ragtrim_bench.gpu.gateway_e2e import GATEWAY_TOML
    from ragtrim_bench.gpu.prompts import cold_prompts
    from ragtrim_bench.serve.prepare_cost import completion_body

    extra = "" if freeze else "[serve]\nfreeze_gc = false\n"
    toml = GATEWAY_TOML.format(vllm_port=1, budget=config.budget, scorer=config.scorer, extra="") + extra
    gateway = Gateway(parse_config(tomllib.loads(toml)))
    app = gateway.app()
    _, wrapped = cold_prompts(config.requests + WARM_UP)
    pauses: list[tuple[int, float]] = []
    current = [-1]
    started = [0.0]

    def on_gc(phase: str, info: Mapping[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append((current[0], (time.perf_counter() - started[0]) * 1000))

    async def serve() -> tuple[list[float], int, int, float]:
        async with app.router.lifespan_context(app):  # the warm-up and, with freeze_gc, the freeze
            tracked, frozen = len(gc.get_objects()), gc.get_freeze_count()
            gc.callbacks.append(on_gc)
            times = []
            for k, (_, prompt) in enumerate(wrapped):
                current[0] = k - WARM_UP
                body = completion_body(prompt)
                t = time.perf_counter()
                parse_and_prepare(body, prepare_completion, gateway.config, gateway.counter)
                if k >= WARM_UP:
                    times.append((time.perf_counter() - t) * 1000)
            gc.callbacks.remove(on_gc)
            t = time.perf_counter()
            gc.collect()  # one full collection more, forced: what each one costs in this process now
            return times, tracked, frozen, (time.perf_counter() - t) * 1000

    times, tracked, frozen, forced_ms = asyncio.run(serve())
    timed = [(k, ms) for k, ms in pauses if k >= 0]
    return {"freeze_gc": freeze, "request_ms": times, "full_collections": [{"request": k, "ms": ms} for k, ms in timed],
            "forced_full_collection_ms": forced_ms, "objects_tracked_after_start": tracked, "objects_frozen": frozen,
            "torch_loaded": "torch" in sys.modules}


def measure(config: GcPausesConfig) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for r in range(config.rounds):
        order = list(ARMS.items()) if r % 2 == 0 else list(reversed(ARMS.items()))
        for name, freeze in order:
            cmd = [sys.executable, "-m", __spec__.name, "--child", "on" if freeze else "off", "--scorer", config.scorer,
                   "--budget", str(config.budget), "--requests", str(config.requests)] + (["--torch"] if config.torch
                                                                                        else [])
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"the {name} arm failed:\n{done.stderr[-2000:]}")
            runs.append({"arm": name, "round": r, **json.loads(done.stdout.strip().splitlines()[-1])})
    out: dict[str, Any] = {}
    for name in ARMS:
        mine = [x for x in runs if x["arm"] == name]
        times = [ms for x in mine for ms in x["request_ms"]]
        full = [c["ms"] for x in mine for c in x["full_collections"]]
        out[name] = {"n": len(times), **summarize_ms(times, "request"),
                     "full_collections": len(full), "full_collection_max_ms": max(full, default=0.0),
                     "full_collection_total_ms": sum(full),
                     "forced_full_collection_ms": [x["forced_full_collection_ms"] for x in mine],
                     "objects_tracked_after_start": [x["objects_tracked_after_start"] for x in mine],
                     "objects_frozen": [x["objects_frozen"] for x in mine],
                     "torch_loaded": all(x["torch_loaded"] for x in mine)}
    return {"arms": out, "runs": runs}


def report(result: Mapping[str, Any]) -> str:
    head = "| arm | requests | p50 ms | p99 ms | max ms | full collections | longest ms | forced one, ms | objects at start |"
    lines = [head, "| --- " * 9 + "|"]
    for name, a in result["results"]["arms"].items():
        lines.append(f"| {name} | {a['n']} | {a['p50_request_ms']:.2f} | {a['p99_request_ms']:.2f} | "
                     f"{a['max_request_ms']:.2f} | {a['full_collections']} | {a['full_collection_max_ms']:.1f} | "
                     f"{max(a['forced_full_collection_ms']):.1f} | {max(a['objects_tracked_after_start']):,} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragtrim-bench serve gc_pauses", description=__doc__.split("\n\n")[0])
    p.add_argument("--scorer", default="balanced")
    p.add_argument("--budget", type=float, default=0.25, help="the share of the documents' tokens kept")
    p.add_argument("--requests", type=int, default=2000, help="timed requests per arm and round")
    p.add_argument("--rounds", type=int, default=2, help="processes per arm (the arms alternate)")
    p.add_argument("--torch", action="store_true", help="import torch and transformers first, as on a GPU host")
    p.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    p.add_argument("-o", "--output", default=None)
    args = p.parse_args(argv)
    config = GcPausesConfig(scorer=args.scorer, budget=args.budget, requests=args.requests, rounds=args.rounds,
                            torch=args.torch)
    if args.child:
        print(json.dumps(child(config, args.child == "on")))
        return 0
    measure_and_write(__spec__.name, argv, Path(args.output) if args.output else None, {"config": asdict(config)},
                      lambda: measure(config), report, packages=["ragtrim", "tiktoken", "onnxruntime", "torch"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
