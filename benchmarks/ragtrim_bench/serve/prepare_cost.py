"""What the gateway's preparation of a request costs beside the trim inside it, cold, in one process.

The gateway's preparation (``ragtrim.serve.intake.parse_and_prepare``, which ``ragtrim serve`` runs in a worker
thread for every request) reads the JSON body, takes the passages out of ``<context>``, trims them, puts the prompt
back together and counts it before and after. Here it runs on the completion prompts that ``ragtrim-bench gpu
gateway_e2e`` sends (golden NQ questions, 20 passages each, the gateway's configuration of that harness), and beside
it, on the same passages with the same budget and query, the trim alone (``default_pipeline(...).run``). Cold: before
each of the two, ragtrim's caches and the counter's are cleared. They take turns per request, so load falls on both
alike; models are loaded and warmed first. What the gateway adds is the difference of the two.
Run: ragtrim-bench serve prepare_cost [--scorer balanced] [--budget 0.25] [--requests 40]
     -> benchmarks/results/serve/prepare_cost.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import measure_and_write
from ragtrim_bench.common.stats import summarize_ms

WARM_UP = 4
"""Prompts run before timing (not timed), after the models are warmed."""


@dataclass(frozen=True, slots=True)
class PrepareCostConfig:
    scorer: str = "balanced"
    budget: float = 0.25
    requests: int = 40

    def __post_init__(self) -> None:
        if self.requests < 1 or not 0 < self.budget < 1:
            raise ValueError(f"requests must be >= 1 and budget a share in (0, 1), got {self.requests} and "
                             f"{self.budget}")


def completion_body(prompt: str) -> bytearray:
    """A streamed completion request for ``prompt``, as the harness's client sends it: the body the gateway reads."""
    return bytearray(json.dumps({"model": "m", "prompt": prompt, "max_tokens": 8, "stream": True}).encode())


def measure(config: PrepareCostConfig) -> dict[str, Any]:
    import tomllib

    from ragtrim.api import default_pipeline
    from ragtrim.caches import clear_caches
    from ragtrim.openai_text import context_re, split_chunks
    from ragtrim.serve.config import parse_config
    from ragtrim.serve.intake import parse_and_prepare
    from ragtrim.serve.render import count_text, document_budget, prepare_completion
    from ragtrim.text.tokens import get_counter
    from ragtrim_bench.gpu.gateway_e2e import GATEWAY_TOML, prompts
    from ragtrim_bench.pipeline.stage_cost import drain_background

    gateway = parse_config(tomllib.loads(GATEWAY_TOML.format(vllm_port=1, budget=config.budget,
                                                              scorer=config.scorer, extra="")))
    counter = get_counter(gateway.upstream.tokenizer)
    _, wrapped = prompts(config.requests + WARM_UP, 0)
    tag = gateway.trim.context_tag

    def cold() -> None:
        drain_background()
        clear_caches()
        getattr(counter, "clear_cache", lambda: None)()

    def prepare(prompt: str) -> float:
        body = completion_body(prompt)
        cold()
        started = time.perf_counter()
        parse_and_prepare(body, prepare_completion, gateway, counter)
        return (time.perf_counter() - started) * 1000

    def trim_alone(prompt: str) -> float:
        match = context_re(tag).search(prompt)
        assert match is not None, "every harness prompt holds its passages in <context>"
        docs = split_chunks(match.group(1))
        query = (prompt[: match.start()] + prompt[match.end():]).strip()
        budget = document_budget(sum(count_text(d, counter) for d in docs), config.budget, None)
        cold()
        started = time.perf_counter()
        default_pipeline(budget=budget, tokenizer=counter, scorer=config.scorer).run(docs,  # type: ignore[arg-type]
                                                                                      query=query)
        return (time.perf_counter() - started) * 1000

    default_pipeline(budget=100, tokenizer=counter, scorer=config.scorer).warm_up()  # type: ignore[arg-type]
    for _, prompt in wrapped[:WARM_UP]:
        prepare(prompt)
        trim_alone(prompt)
    gateway_ms: list[float] = []
    trim_ms: list[float] = []
    for _, prompt in wrapped[WARM_UP:]:
        gateway_ms.append(prepare(prompt))
        trim_ms.append(trim_alone(prompt))
    gw, tr = summarize_ms(gateway_ms, "request"), summarize_ms(trim_ms, "request")
    return {"gateway_preparation": gw, "trim_alone": tr,
            "added_mean_ms": gw["mean_request_ms"] - tr["mean_request_ms"],
            "added_p50_ms": gw["p50_request_ms"] - tr["p50_request_ms"]}


def report(result: Mapping[str, Any]) -> str:
    r = result["results"]
    lines = ["| cold, per request | p50 ms | p99 ms | mean ms |", "| --- | --- | --- | --- |"]
    for key in ("gateway_preparation", "trim_alone"):
        s = r[key]
        lines.append(f"| {key} | {s['p50_request_ms']:.2f} | {s['p99_request_ms']:.2f} | {s['mean_request_ms']:.2f} |")
    lines.append(f"the gateway adds {r['added_p50_ms']:.2f} ms at p50, {r['added_mean_ms']:.2f} ms on the mean")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragtrim-bench serve prepare_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--scorer", default="balanced")
    p.add_argument("--budget", type=float, default=0.25, help="the share of the documents' tokens kept")
    p.add_argument("--requests", type=int, default=40)
    p.add_argument("-o", "--output", default=None)
    args = p.parse_args(argv)
    config = PrepareCostConfig(scorer=args.scorer, budget=args.budget, requests=args.requests)
    measure_and_write(__spec__.name, argv, Path(args.output) if args.output else None, {"config": asdict(config)},
                      lambda: measure(config), report, packages=["ragtrim", "tiktoken", "onnxruntime", "torch"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
