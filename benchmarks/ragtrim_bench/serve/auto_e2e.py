"""Does ``trim.scorer = "auto"`` ever make a request slower than not trimming? ``ragtrim serve`` in front of a fake
upstream whose prefill time grows with the prompt, at several prefill speeds, on this host's CPU.

For each upstream speed (``--per-1k-ms``: the fake's prefill milliseconds per 1,000 prompt tokens, on top of
``--base-ms``; a 12B model on an H200 is about 37, a small model on a fast GPU a few, a large one on a busy GPU a
hundred and more), one fake upstream (``ragtrim serve-fake-upstream``) and four arms, all sent the same NQ questions
with 20 passages each (``--rows``: ``single-use``, the default, takes held-out questions whose passages appear in one
request only, so every trim is cold in a warm process; ``golden`` takes the golden requests of the GPU benchmarks,
which share a third to a half of their passages with earlier ones, so a gateway that trimmed those earlier requests
finds their token counts, sentences and vectors cached, and one that only cleaned them does not):
  direct    the fake upstream itself, the untrimmed prompt
  notrim    a gateway that renders the documents and trims nothing (``[trim]`` without a budget)
  auto      a gateway with ``scorer = "auto"`` at a quarter of the documents' tokens, no ``prefill_ms_per_token``:
            it learns the upstream's cost from the streamed requests of its learning phase (``--learn`` requests,
            reported apart), then picks per request the recipe that pays, down to cleaning only
  default   a gateway with the ``balanced`` default at the same budget, whatever it costs
  auto-prior  (only when named in ``--arms``) ``auto`` with ``prefill_ms_per_token = 0.037`` to start from: it trims
            from the first request and still has to learn the upstream's own cost (``auto_prior`` in the result)
Then ``--requests`` single requests (one at a time) go to the arms in turn, the order rotated each request, so the
arms share the host's noise. TTFT runs from send to the first streamed token at the client, so a gateway arm's TTFT
includes the gateway's own time and the trim. The auto arm's choices are read from its ``/metrics``
(``ragtrim_serve_auto_recipe_total``) and its learned prefill cost (``ragtrim_serve_prefill_ms_per_token``); each
gateway's own split of the timed requests (``gateways``: its preparation with the trim, the upstream's time to first
event, and what is left of the client's mean TTFT) from its ``/metrics`` before and after them. Per request, each
gateway arm's TTFT minus ``direct``'s on the same request, by the recipe the gateway chose for it (its
``x-ragtrim-recipe`` header; ``against_direct_by_recipe``): which choices, if any, made a request slower.
The claim under test: auto's TTFT is never above direct's (p50 and p99 gain >= 1), nor above notrim's by more than
its own cost of deciding.

Run: ragtrim-bench serve auto_e2e [--per-1k-ms 4,37,150] [--requests 60] [--learn 40] [--rows single-use]
     -> benchmarks/results/serve/auto_e2e.json
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile

GATEWAY_TOML = """
[upstream]
url = "http://127.0.0.1:{port}/v1"
tokenizer = "cl100k_base"

[trim]
{trim}vector_store = "off"

[limits]
max_input_tokens = 16384
max_output_tokens = 64
long_request_tokens = 1000000
default_org_concurrency = 4096
"""
TRIMS = {
    "notrim": "",
    "auto": 'budget = 0.25\nscorer = "auto"\n',
    "default": 'budget = 0.25\nscorer = "balanced"\n',
}
PRIOR_TRIMS = {"auto-prior": 'budget = 0.25\nscorer = "auto"\nprefill_ms_per_token = 0.037\n'}
"""Arms run only when named (``--arms``): ``auto-prior`` is ``auto`` told a 12B-on-H200 prefill cost to start from,
which it trims by at once and must still learn the upstream's own cost from."""
ALL_TRIMS = TRIMS | PRIOR_TRIMS
ARMS = ("direct", *ALL_TRIMS)
DEFAULT_ARMS = ("direct", *TRIMS)
ROWS = ("single-use", "golden")
HELD_OUT = 1062
"""NQ-open questions from here on are held out from tuning (as in ``ragtrim-bench relevance net_latency``)."""


@dataclass(frozen=True, slots=True)
class AutoE2EConfig:
    per_1k_ms: tuple[float, ...] = (4.0, 37.0, 150.0)
    base_ms: float = 5.0
    requests: int = 60
    learn: int = 40
    max_tokens: int = 4
    arms: tuple[str, ...] = DEFAULT_ARMS
    rows: str = "single-use"

    def __post_init__(self) -> None:
        if self.rows not in ROWS:
            raise ValueError(f"rows must be one of {ROWS}, got {self.rows!r}")
        if "direct" not in self.arms or any(a not in ARMS for a in self.arms):
            raise ValueError(f"arms must include 'direct' and be among {ARMS}, got {self.arms}")
        if not self.per_1k_ms or any(x < 0 for x in self.per_1k_ms):
            raise ValueError(f"per_1k_ms must be non-negative speeds, got {self.per_1k_ms}")
        if self.requests < 2 or self.learn < 0:
            raise ValueError(f"requests must be >= 2 and learn >= 0, got {self.requests} and {self.learn}")


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def auto_metrics(text: str) -> dict[str, Any]:
    """The auto arm's choices (recipe and why -> count), learned prefill cost and each recipe's cost per input token
    as it stands, from its /metrics ``text``."""
    choices: dict[str, int] = {}
    for m in re.finditer(r'^ragtrim_serve_auto_recipe_total\{([^}]*)\} ([0-9.e+]+)$', text, re.MULTILINE):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        choices[f"{labels.get('recipe')}:{labels.get('why')}"] = int(float(m.group(2)))
    learned = re.search(r"^ragtrim_serve_prefill_ms_per_token ([0-9.e+-]+)$", text, re.MULTILINE)
    costs = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^ragtrim_serve_recipe_cost_ms_per_token\{recipe="(\w+)"\} ([0-9.e+-]+)$', text, re.MULTILINE)}
    return {"choices": choices, "learned_prefill_ms_per_token": float(learned.group(1)) if learned else None,
            "recipe_cost_ms_per_token": costs}


def gateway_stats(text: str, before: str = "") -> dict[str, Any]:
    """What a gateway says of itself in its /metrics ``text``, less what it said in ``before`` (empty: since it
    started): its mean time to prepare a request (the trim included), the upstream's mean time to first event, the
    prompt tokens in and out, and the mean time of the documents' trim and of each of its stages
    (``ragtrim_serve_trim_stage_seconds``)."""

    def value(pattern: str, source: str) -> float | None:
        m = re.search(pattern, source, re.MULTILINE)
        return float(m.group(1)) if m else None

    def delta(pattern: str) -> float | None:
        now = value(pattern, text)
        return None if now is None else now - (value(pattern, before) or 0.0)

    def mean_ms(name: str, labels: str = "") -> float | None:
        labels = re.escape(labels)
        total, n = delta(rf"^{name}_sum{labels} ([0-9.e+-]+)$"), delta(rf"^{name}_count{labels} ([0-9.e+-]+)$")
        return total / n * 1000 if total is not None and n else None

    stages = dict.fromkeys(re.findall(r'^ragtrim_serve_trim_stage_seconds_count\{stage="(\w+)"\}', text, re.MULTILINE))
    return {"mean_prepare_ms": mean_ms("ragtrim_serve_trim_seconds"),
            "mean_upstream_ttft_ms": mean_ms("ragtrim_serve_upstream_ttft_seconds"),
            "prompt_tokens_in": delta(r'^ragtrim_serve_tokens_total\{kind="prompt_in"\} ([0-9.e+-]+)$'),
            "prompt_tokens_out": delta(r'^ragtrim_serve_tokens_total\{kind="prompt_out"\} ([0-9.e+-]+)$'),
            "mean_trim_stage_ms": {s: mean_ms("ragtrim_serve_trim_stage_seconds", f'{{stage="{s}"}}') for s in stages}}


def rest_ms(client_mean_ttft_ms: float | None, gateway: dict[str, Any]) -> float | None:
    """The client's mean TTFT less the gateway's mean preparation and the upstream's mean time to first event: the
    gateway's own time outside the trim (reading, admission, relaying) and the client's."""
    prepare, upstream = gateway.get("mean_prepare_ms"), gateway.get("mean_upstream_ttft_ms")
    if client_mean_ttft_ms is None or prepare is None or upstream is None:
        return None
    return float(client_mean_ttft_ms - prepare - upstream)


def _summary(ttfts: Sequence[float], failed: int) -> dict[str, Any]:
    return {"n": len(ttfts), "failed": failed, "mean_ttft_ms": sum(ttfts) / len(ttfts) if ttfts else None,
            "p50_ttft_ms": percentile(ttfts, 50) if ttfts else None,
            "p95_ttft_ms": percentile(ttfts, 95) if ttfts else None,
            "p99_ttft_ms": percentile(ttfts, 99) if ttfts else None, "max_ttft_ms": max(ttfts, default=None)}


def start_servers(procs: list[Any], fake_args: Sequence[str], arms: Sequence[str]) -> tuple[dict[str, int],
                                                                                              dict[str, Any]]:
    """Start the fake upstream (``ragtrim serve-fake-upstream`` with ``fake_args``) and one gateway for each arm of
    ``TRIMS`` in ``arms``, each process appended to ``procs`` as it starts (the caller stops them). Returns the
    gateways' ports and a streaming client per arm, ``direct`` (the fake itself) included."""
    from ragtrim_bench.gpu.backends import OpenAICompletionsBackend
    from ragtrim_bench.serve.load import free_port, launch, wait_ready

    up_port = free_port()
    starting = [(["serve-fake-upstream", "--port", str(up_port), *fake_args], f"http://127.0.0.1:{up_port}/v1/models")]
    ports: dict[str, int] = {}
    folder = Path(tempfile.mkdtemp(prefix="ragtrim-auto-"))
    for name, trim in ALL_TRIMS.items():
        if name not in arms:
            continue
        ports[name] = free_port()
        toml = folder / f"{name}.toml"
        toml.write_text(GATEWAY_TOML.format(port=up_port, trim=trim), encoding="utf-8")
        starting.append((["serve", "--config", str(toml), "--port", str(ports[name])],
                         f"http://127.0.0.1:{ports[name]}/healthz"))
    for args, _ in starting:  # side by side: each gateway's warm-up takes seconds
        procs.append(launch(args))
    for proc, (args, url) in zip(procs[-len(starting):], starting, strict=True):
        wait_ready(proc, args, url, timeout_s=120)
    backends = {"direct": OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{up_port}", model="fake")}
    backends |= {n: OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{p}", model="fake") for n, p in ports.items()}
    return ports, backends


async def _speed(per_1k: float, config: AutoE2EConfig, direct_rows: Sequence[tuple[str, str]],
                 wrapped_rows: Sequence[tuple[str, str]]) -> dict[str, Any]:
    from ragtrim_bench.serve.load import stop_process

    procs: list[Any] = []
    try:
        ports, backends = start_servers(procs, ["--base-ms", str(config.base_ms), "--per-1k-ms", str(per_1k),
                                                "--output-tokens", str(config.max_tokens)], config.arms)
        arms_run = config.arms
        learning: dict[str, list[float]] = {name: [] for name in arms_run}
        timed: dict[str, list[float]] = {name: [] for name in arms_run}
        failed = {name: 0 for name in arms_run}
        errors: list[str] = []
        before: dict[str, str] = {}
        seen: dict[tuple[str, int], dict[str, tuple[float, str]]] = {}  # (phase, k) -> arm -> (TTFT, recipe)
        for phase, count, offset in (("learn", config.learn, 0), ("timed", config.requests, config.learn)):
            if phase == "timed":
                before = {name: metrics_text(port) for name, port in ports.items()}
            for i in range(count):
                k = offset + i
                order = list(arms_run[k % len(arms_run):] + arms_run[:k % len(arms_run)])
                for name in order:
                    rid, text = (direct_rows if name == "direct" else wrapped_rows)[k]
                    record = await backends[name].complete(f"{phase}-{name}-{rid}", text, max_tokens=config.max_tokens,
                                                           arm=name)
                    if record.success:
                        (learning if phase == "learn" else timed)[name].append(record.ttft_ms)
                        seen.setdefault((phase, k), {})[name] = (record.ttft_ms, record.recipe)
                    elif phase == "timed":
                        failed[name] += 1
                        errors.append(f"{name}: {record.error[:200]}")
        texts = {name: metrics_text(port) for name, port in ports.items()}
        auto_seen = auto_metrics(texts["auto"]) if "auto" in texts else None
        prior_seen = auto_metrics(texts["auto-prior"]) if "auto-prior" in texts else None
        gateways = {name: gateway_stats(text, before.get(name, "")) for name, text in texts.items()}
    finally:
        for proc in procs:
            stop_process(proc)
    arms = {name: _summary(timed[name], failed[name]) for name in arms_run}
    for name, split in gateways.items():
        split["rest_ms"] = rest_ms(arms[name]["mean_ttft_ms"], split)
    for name in ALL_TRIMS:
        for ref in ("direct", "notrim"):
            if name == ref or name not in arms or ref not in arms:
                continue
            for q in ("p50", "p99"):
                mine, theirs = arms[name][f"{q}_ttft_ms"], arms[ref][f"{q}_ttft_ms"]
                arms[name][f"{q}_gain_vs_{ref}"] = theirs / mine if mine and theirs else None
    return {"per_1k_ms": per_1k, "base_ms": config.base_ms, "arms": arms,
            "learning_phase": {name: _summary(learning[name], 0) for name in arms_run},
            "auto": auto_seen, "auto_prior": prior_seen, "gateways": gateways,
            "against_direct_by_recipe": against_direct(seen), "errors": errors[:20]}


def against_direct(seen: dict[tuple[str, int], dict[str, tuple[float, str]]]) -> dict[str, Any]:
    """Each gateway arm's TTFT minus ``direct``'s on the same request, grouped by the recipe the gateway chose for it
    (its ``x-ragtrim-recipe`` header), per phase: how many, how many were slower than sending the request straight
    to the upstream, and the median and largest difference in ms."""
    diffs: dict[str, dict[str, dict[str, list[float]]]] = {}
    for (phase, _), arms in seen.items():
        if "direct" not in arms:
            continue
        base = arms["direct"][0]
        for name, (ttft, recipe) in arms.items():
            if name != "direct":
                diffs.setdefault(name, {}).setdefault(phase, {}).setdefault(recipe or "?", []).append(ttft - base)
    return {name: {phase: {recipe: {"n": len(d), "slower": sum(x > 0 for x in d),
                                    "median_ms": percentile(d, 50), "max_ms": max(d)}
                           for recipe, d in sorted(by.items())} for phase, by in phases.items()}
            for name, phases in diffs.items()}


def rows(config: AutoE2EConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(id, prompt) pairs for the direct arm and, with the passages in <context>, for the gateways."""
    n = config.learn + config.requests
    if config.rows == "golden":
        from ragtrim_bench.gpu.gateway_e2e import prompts

        return prompts(n, 0)
    from ragtrim_bench.datasets.nq import build_single_use, load_nq_open
    from ragtrim_bench.gpu.prompts import INSTRUCTION, context_block, format_prompt

    questions = load_nq_open()
    instances = build_single_use(questions[HELD_OUT:], pool=questions, limit=n)
    if len(instances) < n:
        raise ValueError(f"only {len(instances)} single-use requests can be built, {n} asked; lower --requests or "
                         "--learn")
    direct = [(i.id, format_prompt(i.question, [p.content for p in i.passages])) for i in instances]
    blocks = [context_block(p.content for p in i.passages) for i in instances]
    wrapped = [(i.id, f"{INSTRUCTION}\n\n{block}\n\nQuestion: {i.question}\nAnswer:")
               for i, block in zip(instances, blocks, strict=True)]
    return direct, wrapped


def measure(config: AutoE2EConfig) -> dict[str, Any]:
    direct_rows, wrapped_rows = rows(config)
    speeds = []
    for per_1k in config.per_1k_ms:
        print(f"[auto_e2e] upstream at {per_1k:g} ms per 1k prompt tokens ...", file=sys.stderr, flush=True)
        speeds.append(asyncio.run(_speed(per_1k, config, direct_rows, wrapped_rows)))
    return {"config": asdict(config), "speeds": speeds}


def report(result: dict[str, Any]) -> str:
    header = ("| upstream ms per 1k tokens | arm | TTFT p50 / p99 ms | gain over direct p50 / p99 | gain over notrim "
              "p50 / p99 |")
    lines = [header, "| --- | --- | --- | --- | --- |"]

    def f(x: float | None, spec: str = ".1f") -> str:
        return "n/a" if x is None else format(x, spec)

    for s in result["speeds"]:
        for name, a in s["arms"].items():
            lines.append(f"| {s['per_1k_ms']:g} | {name} | {f(a['p50_ttft_ms'])} / {f(a['p99_ttft_ms'])} | "
                         f"{f(a.get('p50_gain_vs_direct'), '.2f')} / {f(a.get('p99_gain_vs_direct'), '.2f')} | "
                         f"{f(a.get('p50_gain_vs_notrim'), '.2f')} / {f(a.get('p99_gain_vs_notrim'), '.2f')} |")
        for name, g in s["gateways"].items():
            lines.append(f"|  | {name}: mean prepare / upstream / rest ms | {f(g['mean_prepare_ms'])} / "
                         f"{f(g['mean_upstream_ttft_ms'])} / {f(g.get('rest_ms'))} | | |")
        for key, arm in (("auto", "auto"), ("auto_prior", "auto-prior")):
            if s.get(key) is not None:
                learned = s[key]["learned_prefill_ms_per_token"]
                lines.append(f"|  | {arm} chose | {s[key]['choices']}; learned {f(learned, '.4f')} ms per token | | |")
        for name, phases in s.get("against_direct_by_recipe", {}).items():
            for phase, by in phases.items():
                cells = "; ".join(f"{r}: {d['slower']} of {d['n']} slower, median {d['median_ms']:+.1f}, max "
                                  f"{d['max_ms']:+.1f} ms" for r, d in by.items())
                lines.append(f"|  | {name} - direct, same request ({phase}) | {cells} | | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragtrim-bench serve auto_e2e", description=__doc__.split("\n\n")[0])
    p.add_argument("--per-1k-ms", default="4,37,150", help="the fake upstream's prefill speeds, comma-separated")
    p.add_argument("--base-ms", type=float, default=5.0)
    p.add_argument("--requests", type=int, default=60, help="timed single requests per speed and arm")
    p.add_argument("--learn", type=int, default=40, help="requests per arm before the timed ones (auto learns)")
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                   help=f"comma-separated, of {', '.join(ARMS)} (direct always; default {', '.join(DEFAULT_ARMS)})")
    p.add_argument("--rows", default="single-use", choices=ROWS,
                   help="single-use: no passage reaches a gateway twice (cold trims); golden: the GPU benchmarks' "
                        "requests, which repeat passages")
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)
    config = AutoE2EConfig(per_1k_ms=tuple(float(x) for x in args.per_1k_ms.split(",") if x),
                           base_ms=args.base_ms, requests=args.requests, learn=args.learn, rows=args.rows,
                           arms=tuple(a for a in ARMS if a in {"direct", *args.arms.split(",")}))
    result = measure(config) | {"load_average_end": load_average()}
    out = Path(args.output) if args.output else result_path(__spec__.name)
    write_result(out, result, command=command_line(__spec__.name, argv),
                 packages=["starlette", "uvicorn", "onnxruntime"])
    print(report(result))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
