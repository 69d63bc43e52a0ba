"""``ragtrim serve`` in front of vLLM on the GPU host, against vLLM directly with untrimmed prompts.

Run on the GPU machine (vLLM importable, ``gpu suites --prepare-only`` done):

  RAGTRIM_DATA=.gpu/data python -m ragtrim_bench.gpu.gateway_e2e --out $OUT [--arms gpu-4x,gpu-8x,cpu-4x,...]
  (run_e2e.sh runs it: ``gateway`` with the BM25 arm, ``latency`` with the others)

``vllm serve`` (the Gemma-3-12B shape, dummy weights, CUDA graphs up to 1,024 tokens) listens on one port and one
``ragtrim serve`` per gateway arm (open mode, memory state, no vector store, limits far above the offered load) on
its own port; the gateways start while vLLM does. Arms (``ARMS``): ``gpu-4x`` / ``gpu-8x``: the default recipe
(``balanced``: MiniLM on the GPU) at a quarter and an eighth of the document tokens; ``cpu-4x`` / ``cpu-8x``: the
same with the gateway's process denied the GPU (``CUDA_VISIBLE_DEVICES=""``: int8 MiniLM on the host's CPU);
``cpu-auto-4x``: ``trim.scorer = "auto"`` on the CPU, which trims only as far as it pays, starting from
``trim.prefill_ms_per_token`` = ``--prefill-ms-per-token`` and learning the rest; ``bm25-4x``: BM25 with the GPU visible;
``gpu-4x-nofreeze`` / ``cpu-4x-nofreeze`` / ``cpu-auto-4x-nofreeze``: those arms with ``[serve] freeze_gc = false``.
The harness's OpenAI-compatible streaming client sends the same golden questions to each:
  direct    vLLM, the untrimmed prompt
  <arm>     that gateway, the prompt with the passages inside ``<context>...</context>``; the gateway trims them in
            flight and forwards the trimmed prompt to vLLM
TTFT is measured by the client from send to the first streamed token, so a gateway arm's TTFT includes the
gateway's own time and the trim. Single requests (one at a time; each one's TTFT is kept, in the order sent, under
``single.<arm>.ttft_ms_in_order``), then a Poisson ladder per arm with the throughput within a 500 ms p95 TTFT SLO
(an ``auto`` arm's step also holds its choices so far and its learned prefill cost, ``steps[k].auto``, from its
``/metrics``). Each gateway's own split of its single requests (mean preparation, the trim included; the trim's
mean and its stages'; the upstream's mean time to first event; from its ``/metrics``) is under
``single.<arm>.gateway`` (an ``auto`` arm's choices over them and its learned prefill cost under
``single.<arm>.auto``), and over the whole run
under ``gateways_whole_run``. A gateway arm's choice for each single request (its ``x-ragtrim-recipe`` header) is
under ``single.<arm>.recipes_in_order``, beside its TTFT. Writes ``$OUT/gpu_gateway.json``; every gateway logs to
``$OUT/gateways.log``.

vLLM takes minutes to start on a fresh machine. ``--start-vllm PORT_FILE`` starts it alone, in a process session of
its own, waits until it answers and leaves it running; a later command then measures against it with
``--vllm-port`` (``run_e2e.sh vllm``, then ``run_e2e.sh latency``), so the start and the measurement each get a
command's whole time limit. ``--fake-upstream-ms-per-1k`` puts ragtrim's fake upstream (a prefill time that grows
with the prompt) in vLLM's place: the gateways' own time per request, on any host, with no model.
``--warm-up-requests 0`` makes each gateway's first request a timed one, so its first-use costs show.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, write_result
from ragtrim_bench.gpu.backends import OpenAICompletionsBackend, engine_cli_args, start_vllm_server
from ragtrim_bench.gpu.load import LoadSpec, run_load
from ragtrim_bench.gpu.metrics import summarize_records, throughput_at_slo
from ragtrim_bench.gpu.prompts import INSTRUCTION, context_block, format_prompt
from ragtrim_bench.serve.auto_e2e import auto_metrics, gateway_stats, metrics_text
from ragtrim_bench.serve.load import free_port, launch, stop_process

GATEWAY_TOML = """
[upstream]
url = "http://127.0.0.1:{vllm_port}/v1"
tokenizer = "cl100k_base"

[trim]
budget = {budget}
scorer = "{scorer}"
vector_store = "off"
{extra}
[limits]
max_input_tokens = 8192
max_output_tokens = 512
long_request_tokens = 1000000
default_org_concurrency = 4096
max_queued = 100000
queue_timeout_s = 60
"""


@dataclass(frozen=True)
class Arm:
    """One gateway: its document budget (share of the documents' tokens), scorer, whether its process may use the
    GPU, the request rates of its ladder, and ``[serve] freeze_gc``."""

    budget: float
    scorer: str
    gpu: bool
    rates: tuple[float, ...]
    freeze_gc: bool = True


ARMS: dict[str, Arm] = {
    "gpu-4x": Arm(0.25, "balanced", True, (8, 16, 32, 48, 64)),
    "gpu-8x": Arm(0.125, "balanced", True, (8, 16, 32, 48, 64, 96)),
    "cpu-4x": Arm(0.25, "balanced", False, (4, 8, 16, 32, 48)),
    "cpu-8x": Arm(0.125, "balanced", False, (4, 8, 16, 32, 48)),
    "cpu-auto-4x": Arm(0.25, "auto", False, (8, 16, 32, 48)),
    "bm25-4x": Arm(0.25, "bm25", True, (8, 16, 32, 48, 64)),
}
ARMS |= {f"{name}-nofreeze": replace(ARMS[name], freeze_gc=False) for name in ("gpu-4x", "cpu-4x", "cpu-auto-4x")}
DIRECT_RATES = (4, 8, 12, 16)


def parse_rates(spec: str) -> dict[str, tuple[float, ...]]:
    """``--rates``: ``arm=r1/r2/...`` pairs, comma-separated (``direct`` is vLLM alone), replacing those arms'
    ladders; ValueError naming the pair that does not parse."""
    out: dict[str, tuple[float, ...]] = {}
    for pair in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, values = pair.partition("=")
        try:
            rates = tuple(float(v) for v in values.split("/") if v.strip())
        except ValueError:
            rates = ()
        if not name or not rates or any(r <= 0 for r in rates):
            raise ValueError(f"--rates: {pair!r} is not arm=rate/rate/... with rates above 0")
        out[name.strip()] = rates
    return out


def gateway_config(arm: Arm, vllm_port: int, prefill_ms_per_token: float, log_path: Path | None = None) -> str:
    """``log_path``: the gateway's request log (``[log] path``: each request's trim, its stages and ``auto``'s
    choice)."""
    extra = f"prefill_ms_per_token = {prefill_ms_per_token}\n" if arm.scorer == "auto" else ""
    serve = "" if arm.freeze_gc else "\n[serve]\nfreeze_gc = false\n"
    log = f"\n[log]\npath = {json.dumps(str(log_path))}\n" if log_path is not None else ""
    return GATEWAY_TOML.format(vllm_port=vllm_port, budget=arm.budget, scorer=arm.scorer, extra=extra) + serve + log


def logged_requests(path: Path, n: int, *, skip: int = 0, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Completion requests ``skip`` to ``skip + n`` of a gateway's request log (its readiness probes left out), each
    cut to what the benchmark reads: the preparation (trim included), the upstream's time to first event, the garbage
    collector's stops while it was in flight, the trim's stages and ``auto``'s choice. A line is written a moment after
    its answer, so this waits for them up to ``timeout_s``, then returns what there is."""
    deadline = time.monotonic() + timeout_s
    entries: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        entries = [e for e in map(json.loads, lines) if e.get("endpoint") == "completions"]
        if len(entries) >= skip + n:
            break
        time.sleep(0.05)
    out = []
    for entry in entries[skip:skip + n]:
        t = entry.get("timings_ms", {})
        out.append({"trim_ms": t.get("trim"), "upstream_ttft_ms": t.get("upstream_ttft"), "gc_ms": t.get("gc"),
                    "trim_stages_ms": t.get("trim_stages"), "recipe": (entry.get("recipe") or {}).get("name")})
    return out


EMPTY = "no tokens streamed"
"""A reply that streamed no token at all: it has no first token to time, so it is counted apart (``empty_outputs``)
instead of as a failure. A reply whose first token decodes to no text (end-of-sequence, a special token; dummy weights
give such tokens now and then) is timed at that token, as vLLM's own benchmark times it."""


def timed(records: list[Any], duration: float, slo_ms: float | None = None) -> dict[str, Any]:
    kept = [r for r in records if r.error != EMPTY]
    return summarize_records(kept, duration_s=duration, ttft_slo_ms=slo_ms) | {
        "empty_outputs": len(records) - len(kept), "errors_seen": sorted({r.error for r in kept if r.error})}


def prompts(n: int, offset: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(id, prompt) pairs: the untrimmed prompt for vLLM directly, and the same with the passages in <context>."""
    from ragtrim_bench.datasets.nq import golden_multidoc

    inst = golden_multidoc(n, offset=offset)
    direct = [(i.id, format_prompt(i.question, [p.content for p in i.passages])) for i in inst]
    wrapped = []
    for i in inst:
        block = context_block(p.content for p in i.passages)
        wrapped.append((i.id, f"{INSTRUCTION}\n\n{block}\n\nQuestion: {i.question}\nAnswer:"))
    return direct, wrapped


async def measure(args: argparse.Namespace, direct: Any, gateways: dict[str, Any], ports: dict[str, int],
                  result: dict[str, Any], deadline: float, logs: Path | None = None) -> None:
    """Single requests, then the ladder (unless ``args.ladder`` is off), on every arm; ``ports``: each gateway's, for
    its /metrics; ``logs``: the folder of their request logs (``<arm>.jsonl``)."""
    golden_direct, golden_wrapped = prompts(args.single + 8, 0)
    pool_direct, pool_wrapped = prompts(args.ladder_questions, 400)
    override = parse_rates(args.rates)
    arms: dict[str, tuple[Any, list[tuple[str, str]], list[tuple[str, str]], tuple[float, ...]]] = {
        "direct": (direct, golden_direct, pool_direct, override.get("direct", DIRECT_RATES))}
    arms |= {name: (backend, golden_wrapped, pool_wrapped, override.get(name, ARMS[name].rates))
             for name, backend in gateways.items()}
    single: dict[str, Any] = {}
    for name, (backend, rows, _, _) in arms.items():
        records, duration = await run_load(backend, rows, LoadSpec(num_requests=args.single, concurrency=1,
                                                                   max_tokens=args.max_tokens, prompt_offset=8,
                                                                   warmup_requests=args.warm_up_requests),
                                           arm=name)
        single[name] = timed(records, duration) | {"ttft_ms_in_order": [round(r.ttft_ms, 2) for r in records]}
        if any(r.recipe for r in records):  # what the gateway chose for each (``x-ragtrim-recipe``), in order
            single[name]["recipes_in_order"] = [r.recipe for r in records]
        if name != "direct" and single[name].get("p50_ttft_ms"):
            single[name]["p50_ttft_gain"] = single["direct"]["p50_ttft_ms"] / single[name]["p50_ttft_ms"]
            single[name]["p99_ttft_gain"] = single["direct"]["p99_ttft_ms"] / single[name]["p99_ttft_ms"]
        if name in ports:  # the gateway's own split of those requests: its preparation (the trim) and the upstream
            text = metrics_text(ports[name])
            single[name]["gateway"] = gateway_stats(text)
            if ARMS[name].scorer == "auto":  # its choices (a learning request among them) and learned cost
                single[name]["auto"] = auto_metrics(text)
            if logs is not None:  # each request's own split, from the gateway's request log, in the order sent
                single[name]["requests"] = logged_requests(logs / f"{name}.jsonl", len(records),
                                                           skip=args.warm_up_requests)
    result["single"] = single
    if not args.ladder:
        return
    ladder: dict[str, Any] = {}
    for name, (backend, _, rows, rates) in arms.items():
        steps: list[dict[str, Any]] = []
        offset = 0
        for rate in rates:
            if time.time() > deadline:
                steps.append({"request_rate": rate, "skipped": "deadline"})
                break
            n = min(len(rows) - 2, max(24, int(rate * args.step_s)))
            await direct.reset_prefix_cache()
            records, duration = await run_load(backend, rows, LoadSpec(num_requests=n, request_rate=rate,
                                                                       max_tokens=args.max_tokens,
                                                                       seed=int(rate * 1000), warmup_requests=2,
                                                                       prompt_offset=offset + 2), arm=name)
            offset = (offset + n + 2) % len(rows)
            s = timed(records, duration, args.slo_ms) | {"request_rate": rate}
            if name in ports and ARMS[name].scorer == "auto":  # its choices and learned cost so far (cumulative)
                s["auto"] = auto_metrics(metrics_text(ports[name]))
            steps.append(s)
            if s["p95_ttft_ms"] > 4 * args.slo_ms or s["failed"]:
                break
        ladder[name] = {"steps": steps, "at_slo": throughput_at_slo([x for x in steps if "completed" in x],
                                                                    slo_ms=args.slo_ms)}
    base = ladder["direct"]["at_slo"]["request_throughput"]
    for name in gateways:
        got = ladder[name]["at_slo"]["request_throughput"]
        ladder[name]["throughput_gain_at_slo"] = got / base if base else None
    result["ladder"] = ladder
    result["gateways_whole_run"] = {name: gateway_stats(metrics_text(port)) for name, port in ports.items()}


def start_gateway(name: str, arm: Arm, vllm_port: int, args: argparse.Namespace, log: Any,
                  folder: Path) -> tuple[Any, int]:
    """``folder``: where its config and its request log (``<name>.jsonl``) go."""
    port = free_port()
    config = folder / f"{name}.toml"
    config.write_text(gateway_config(arm, vllm_port, args.prefill_ms_per_token, folder / f"{name}.jsonl"))
    env = dict(os.environ)
    if not arm.gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    log.write(f"--- gateway {name}: {arm}\n".encode())
    log.flush()
    proc = subprocess.Popen([sys.executable, "-m", "ragtrim", "serve", "--config", str(config), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, port


ENGINE: dict[str, Any] = {"dtype": "bfloat16", "max_model_len": 4096, "gpu_memory_utilization": 0.85, "seed": 0,
                          "max_num_batched_tokens": 8192, "load_format": "dummy",
                          "compilation_config": {"max_cudagraph_capture_size": 1024}}
"""The engine every arm is measured against: the 12B shape, dummy weights, CUDA graphs up to 1,024 tokens."""


def start_vllm_detached(args: argparse.Namespace) -> int:
    """``vllm serve`` with ``ENGINE`` in a process session of its own, so that it outlives this command (vLLM takes
    minutes to start; a later command measures against it with ``--vllm-port``). Waits until it answers, then writes
    its port to ``args.start_vllm``; exits 1, the server stopped, when it does not answer within the budget."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"
    server = start_vllm_server(model=args.model, port=port, extra_args=engine_cli_args(ENGINE),
                               log_path=str(out / "vllm_server.log"), detached=True)
    started = time.perf_counter()
    try:
        asyncio.run(OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{port}", model=args.model)
                    .ready(args.budget_s))
    except TimeoutError as exc:
        stop_process(server, timeout_s=30)
        print(f"vllm serve did not answer: {exc}", file=sys.stderr)
        return 1
    Path(args.start_vllm).write_text(str(port), encoding="utf-8")
    print(json.dumps({"vllm_port": port, "pid": server.pid, "ready_s": round(time.perf_counter() - started, 1)}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/ragtrim-gpu-out"))
    parser.add_argument("--model", default="/tmp/gemma-dummy/12b")
    parser.add_argument("--arms", default="bm25-4x", help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--single", type=int, default=60)
    parser.add_argument("--ladder-questions", type=int, default=600)
    parser.add_argument("--step-s", type=float, default=6.0)
    parser.add_argument("--slo-ms", type=float, default=500.0)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--prefill-ms-per-token", type=float, default=0.037,
                        help="trim.prefill_ms_per_token of the auto arm until it learns its own")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--rates", default="", help="arm=r1/r2/... pairs, comma-separated, replacing those arms' "
                        "ladder rates (requests per second; 'direct' is vLLM alone)")
    parser.add_argument("--warm-up-requests", type=int, choices=range(9), default=4, metavar="0..8",
                        help="untimed requests to each arm before its single requests (0: the first timed request is "
                        "the gateway's first, so its first-use costs show)")
    parser.add_argument("--ladder", action=argparse.BooleanOptionalAction, default=True,
                        help="the Poisson ladder after the single requests (--no-ladder: single requests only)")
    parser.add_argument("--start-vllm", metavar="PORT_FILE", default=None,
                        help="only start vllm serve in its own process session, wait until it answers, write its "
                        "port to PORT_FILE and leave it running (for a later run with --vllm-port)")
    parser.add_argument("--fake-upstream-ms-per-1k", type=float, default=None,
                        help="measure against ragtrim's fake upstream (its prefill this many ms per 1,000 prompt "
                        "tokens, plus 5) instead of vllm serve: the gateways' own time on any host, without vLLM's minutes of start")
    parser.add_argument("--vllm-port", type=int, default=None,
                        help="measure against the vllm serve already listening on this port (started with "
                        "--start-vllm) instead of starting one; it is left running")
    args = parser.parse_args(argv)
    if args.start_vllm:
        return start_vllm_detached(args)
    try:
        override = parse_rates(args.rates)
    except ValueError as exc:
        parser.error(str(exc))
    names = [a for a in args.arms.split(",") if a]
    unknown = [a for a in names if a not in ARMS]
    if unknown or not names:
        parser.error(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
    deadline = time.time() + args.budget_s - 40
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    engine = ENGINE
    arms: dict[str, Any] = {n: vars(ARMS[n]) | ({"rates": list(override[n])} if n in override else {}) for n in names}
    if "direct" in override:
        arms["direct"] = {"rates": list(override["direct"])}
    result: dict[str, Any] = {"benchmark": "gpu_gateway", "engine": engine, "arms": arms, "errors": []}
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # POST /reset_prefix_cache between ladder steps
    if args.fake_upstream_ms_per_1k is not None:  # the gateways' own cost, without vLLM's minutes of start
        vllm_port = free_port()
        server = launch(["serve-fake-upstream", "--port", str(vllm_port), "--base-ms", "5", "--per-1k-ms",
                         str(args.fake_upstream_ms_per_1k), "--output-tokens", str(args.max_tokens)])
        result["vllm"] = (f"none: ragtrim serve-fake-upstream, 5 ms plus {args.fake_upstream_ms_per_1k:g} ms per "
                          "1,000 prompt tokens to the first token")
    elif args.vllm_port is None:
        vllm_port = free_port()
        server = start_vllm_server(model=args.model, port=vllm_port, extra_args=engine_cli_args(engine),
                                   log_path=str(out / "vllm_server.log"))
    else:
        vllm_port, server = args.vllm_port, None
        result["vllm"] = f"already serving on port {vllm_port} (started with --start-vllm)"
    log = open(out / "gateways.log", "ab")  # noqa: SIM115 - kept open for the children's lifetime
    folder = Path(tempfile.mkdtemp(prefix="ragtrim-gateways-"))
    procs = {name: start_gateway(name, ARMS[name], vllm_port, args, log, folder) for name in names}
    direct_backend = OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{vllm_port}", model=args.model)
    backends = {name: OpenAICompletionsBackend(base_url=f"http://127.0.0.1:{port}", model=args.model)
                for name, (_, port) in procs.items()}
    started = time.perf_counter()
    try:
        asyncio.run(direct_backend.ready(400))
        for backend in backends.values():
            asyncio.run(backend.ready(120))
        result["servers_ready_s"] = time.perf_counter() - started
        asyncio.run(measure(args, direct_backend, backends, {n: port for n, (_, port) in procs.items()}, result,
                            deadline, folder))
    except Exception as exc:  # noqa: BLE001 - recorded: the file must still hold what finished
        result["errors"].append(f"{type(exc).__name__}: {exc}")
    finally:
        for proc, _ in procs.values():
            stop_process(proc, timeout_s=30)
        if server is not None:
            stop_process(server, timeout_s=30)
        log.close()
    write_result(out / "gpu_gateway.json", result, command=command_line(__spec__.name, argv),
                 packages=["vllm", "starlette", "uvicorn", "aiohttp", "onnxruntime", "torch"])
    single = result.get("single", {})
    print(json.dumps({"errors": result["errors"], "single": {k: {m: v.get(m) for m in (
        "p50_ttft_ms", "p99_ttft_ms", "p50_ttft_gain", "p99_ttft_gain", "mean_prompt_tokens")} for k, v in single.items()},
                      "at_slo": {k: (v.get("at_slo"), v.get("throughput_gain_at_slo"))
                                 for k, v in result.get("ladder", {}).items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
