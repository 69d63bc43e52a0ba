"""``ragtrim plan``: the subcommand's arguments, workloads from them, and the stand-alone entry point."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from typing import get_args

from ragtrim._util.cli_help import epilog
from ragtrim._util.redact import redact
from ragtrim.errors import ConfigError, RagtrimError
from ragtrim.plan.model import KVDtype, ModelSpec, WeightDtype
from ragtrim.plan.planner import PlanRequest, plan
from ragtrim.plan.report import format_plan_table
from ragtrim.plan.workload import Workload


def _positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (``inf`` and ``nan`` parse as floats but plan nothing)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _nonnegative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def add_cli(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``plan`` subcommand."""
    sp = subparsers.add_parser(
        "plan", help="GPU memory, KV cache, max_model_len and concurrency for a workload",
        description="Plan a vLLM server from the model's config.json and a workload (percentiles, a JSONL of "
                    "requests, or a QA benchmark's records): the weights, the KV cache left for requests, how many "
                    "requests of the workload's p95 shape run at once (the number that governs --max-num-seqs), "
                    "what --max-model-len to set and what it guarantees. Untrimmed and trimmed side by side. Pure "
                    "arithmetic, no GPU needed.",
        epilog=epilog([
            "ragtrim plan --config /models/gemma-3-12b-it --gpu-mem-gib 141 --input-p50 2400 --input-p95 3000 \\",
            "    --output-p95 32 --trim-ratio 4",
            "ragtrim plan --config config.json --gpu-mem-gib 80 --kv-dtype fp8 --workload requests.jsonl \\",
            "    --concurrency 64 --json"], topic="plan"))
    sp.add_argument("--config", required=True,
                    help="the model's Hugging Face config.json, or the model directory that holds it")
    sp.add_argument("--gpu-mem-gib", type=_positive_float, required=True, help="GPU memory in GiB (H200: 141)")
    sp.add_argument("--gpu-util", type=_positive_float, default=0.9, help="vLLM --gpu-memory-utilization (default 0.9)")
    sp.add_argument("--weight-dtype", default="bf16", choices=list(get_args(WeightDtype)), help="dtype of the weights")
    sp.add_argument("--weight-group-size", type=int, default=128, help="int4 quantization group size")
    sp.add_argument("--kv-dtype", default="bf16", choices=list(get_args(KVDtype)),
                    help="vLLM --kv-cache-dtype (fp8 halves the KV bytes)")
    sp.add_argument(
        "--non-kv-overhead-gib",
        type=_nonnegative_float,
        default=4.0,
        help="activation peak, CUDA graphs and context that vLLM reserves besides weights (GiB)",
    )
    sp.add_argument("--tensor-parallel-size", type=int, default=1,
                    help="GPUs per replica (vLLM --tensor-parallel-size); memory is per GPU, concurrency per replica")
    sp.add_argument("--max-model-len", type=int, default=None,
                    help="plan at this vLLM --max-model-len instead of the recommended one; the output says what it "
                         "guarantees against the workload's p95")
    sp.add_argument("--block-size", type=int, default=16, help="vLLM --block-size (tokens per KV block)")
    sp.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=8192,
        help="vLLM's value (8192 for the server on an H100/H200, 16384 for the LLM class)",
    )
    sp.add_argument(
        "--no-hybrid-kv-cache",
        action="store_true",
        help="vLLM's --disable-hybrid-kv-cache-manager: sliding layers keep every token",
    )
    src = sp.add_argument_group("workload (give percentiles, --workload or --qa-results)")
    for side in ("input", "output"):
        for pct in (50, 95, 99):
            src.add_argument(f"--{side}-p{pct}", type=int, default=None, help=f"{side} tokens, p{pct}")
    src.add_argument(
        "--trim-ratio",
        type=_positive_float,
        default=None,
        help="add a trimmed column with every input length divided by this ratio",
    )
    src.add_argument("--workload", default=None, help="JSONL of requests with prompt and output token counts")
    src.add_argument("--trimmed-workload", default=None, help="a second JSONL, shown side by side")
    src.add_argument("--input-field", default="prompt_tokens", help="the JSONL key of a request's input tokens")
    src.add_argument("--output-field", default="output_tokens", help="the JSONL key of a request's output tokens")
    src.add_argument("--qa-results", default=None, help="QA savings benchmark JSON with per-request records")
    src.add_argument("--before-field", default="tokens_before", help="--qa-results: untrimmed input tokens")
    src.add_argument("--after-field", default="tokens_after", help="--qa-results: trimmed input tokens")
    src.add_argument("--records-key", default=None,
                     help="--qa-results: the key of the records list (default: the first list holding them)")
    src.add_argument("--qa-output-tokens", type=int, default=32, help="output tokens when records lack them")
    sp.add_argument("--concurrency", type=int, default=None,
                    help="concurrent generating requests to serve; the plan says how many GPUs that takes")
    sp.add_argument("--target-ttft-ms", type=_positive_float, default=None,
                    help="a TTFT target; with --prefill-tokens-per-s the plan says whether the p95 request meets it")
    sp.add_argument("--prefill-tokens-per-s", type=_positive_float, default=None, help="measured prefill throughput")
    sp.add_argument("--decode-ms-per-token", type=_positive_float, default=None, help="measured time per output token")
    sp.add_argument("--users", type=int, default=None, help="users sharing the server, for a per-user rate")
    sp.add_argument("--max-len-percentile", type=int, default=99, choices=[95, 99],
                    help="the percentile of input+output that --max-model-len must hold")
    sp.add_argument("--headroom", type=_positive_float, default=1.1, help="max_model_len headroom factor")
    sp.add_argument("--json", action="store_true", help="print the plan as JSON")
    sp.set_defaults(func=run_cli)


def _workloads_from_args(args: argparse.Namespace) -> list[Workload]:
    if args.qa_results:
        before, after = Workload.from_qa_results(
            args.qa_results,
            before_field=args.before_field,
            after_field=args.after_field,
            output_field=args.output_field,
            default_output_tokens=args.qa_output_tokens,
            records_key=args.records_key,
        )
        return [before, after]
    if args.workload:
        items = [
            Workload.from_jsonl(args.workload, input_field=args.input_field, output_field=args.output_field)
        ]
        if args.trimmed_workload:
            items.append(
                Workload.from_jsonl(
                    args.trimmed_workload, input_field=args.input_field, output_field=args.output_field
                )
            )
    else:
        if args.input_p95 is None or args.output_p95 is None:
            raise ConfigError(
                "give a workload: --input-p95 and --output-p95 (with --input-p50), or --workload, or --qa-results"
            )
        items = [
            Workload.from_percentiles(
                name="untrimmed" if args.trim_ratio is not None else "workload",
                input_p50_tokens=args.input_p50 if args.input_p50 is not None else args.input_p95,
                input_p95_tokens=args.input_p95,
                input_p99_tokens=args.input_p99,
                output_p50_tokens=args.output_p50,
                output_p95_tokens=args.output_p95,
                output_p99_tokens=args.output_p99,
            )
        ]
    if args.trim_ratio is not None:
        items.append(items[0].scaled_input(args.trim_ratio, name=f"trimmed {args.trim_ratio:g}x"))
    return items


def run_cli(args: argparse.Namespace) -> int:
    """Run ``ragtrim plan``; prints the table (or JSON) and returns the exit code."""
    import sys

    try:
        model = ModelSpec.from_config_file(args.config)
        request = PlanRequest(
            gpu_mem_gib=args.gpu_mem_gib,
            gpu_memory_utilization=args.gpu_util,
            weight_dtype=args.weight_dtype,
            weight_group_size=args.weight_group_size,
            kv_dtype=args.kv_dtype,
            non_kv_overhead_gib=args.non_kv_overhead_gib,
            concurrency=args.concurrency,
            target_ttft_ms=args.target_ttft_ms,
            prefill_tokens_per_s=args.prefill_tokens_per_s,
            decode_ms_per_token=args.decode_ms_per_token,
            users=args.users,
            block_size=args.block_size,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_len_percentile=args.max_len_percentile,
            max_len_headroom=args.headroom,
            hybrid_kv_cache=not args.no_hybrid_kv_cache,
            max_model_len=args.max_model_len,
            tensor_parallel_size=args.tensor_parallel_size,
        )
        result = plan(model, request, _workloads_from_args(args))
    except RagtrimError as exc:
        print(f"ragtrim: error: {' '.join(redact(exc).split())}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_plan_table(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m ragtrim.plan --config ...``."""
    parser = argparse.ArgumentParser(prog="ragtrim")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["plan", *(argv if argv is not None else __import__("sys").argv[1:])])
    return int(args.func(args))
