"""``ragtrim audit LOG [--out DIR]``: arguments and the run (registered by ragtrim/cli.py; light to import)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from ragtrim._util.cli_help import epilog
from ragtrim.errors import ConfigError, OutputError


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"budget must be a share (0.25) or a token count (1500), got {text!r}") from None
    return value


def add_cli(subparsers: Any) -> None:
    """Register the ``audit`` subcommand."""
    a = subparsers.add_parser(
        "audit", help="where a service's prompt tokens go, what a prefix cache could serve and what ragtrim would "
                      "save, from JSONL logs of OpenAI requests",
        description="Audit request logs (several are read as one, in the order given): JSONL (plain or gzip) of "
                    "OpenAI chat or completions bodies, Anthropic "
                    "Messages bodies, OpenAI/vLLM or Anthropic batch lines, the gateway's request log (log_request = "
                    "true), ragtrim requests, or a vLLM server log with --enable-log-requests. The format is told "
                    "from the first lines. Writes audit.json (every number) and audit.html (a static page with "
                    "plots) into --out.",
        epilog=epilog(AUDIT_EXAMPLES, topic="audit", extra=AUDIT_EXIT_CODES),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("logs", nargs="+", metavar="LOG",
                   help="request logs (JSONL or JSONL.gz; - for stdin), read as one log in the order given")
    a.add_argument("--out", default="audit-report", help="output folder (default: audit-report)")
    a.add_argument("--tokenizer", default=None, help="cl100k_base (default), hf:<tokenizer.json>, approx, ...")
    a.add_argument("--no-text", action="store_true", help="keep request text (prompt and document previews) out "
                                                           "of the report")
    a.add_argument("--context-tag", default="context", help="tag of retrieved context in messages (default: context)")
    a.add_argument("--image-tokens", type=int, default=None,
                   help="tokens one image costs the model (default: the --model-config's mm_tokens_per_image, else "
                        "0: images are counted and reported, not as tokens)")
    s = a.add_argument_group("what ragtrim would save")
    s.add_argument("--sample", type=int, default=200, help="requests to trim, uniformly sampled (0: every request; "
                                                           "default 200)")
    s.add_argument("--no-savings", action="store_true", help="skip the pipeline run")
    s.add_argument("--budget", type=_budget, default=None,
                   help="document budget: a share of each request's context tokens (0.25) or tokens (1500); "
                        "default: lossless stages only (HTML cleanup, duplicates)")
    s.add_argument("--scorer", default="bm25", choices=["auto", "bm25", "embedding", "hybrid", "balanced", "fast"],
                   help="chunk ranking of the savings run (bm25: no model, the audit stays fast)")
    s.add_argument("--history-turns", type=int, default=4, help="turns the history stage keeps verbatim")
    s.add_argument("--seed", type=int, default=0, help="seed of the sample")
    g = a.add_argument_group("GPU (via ragtrim plan)")
    g.add_argument("--model-config", default=None, help="the model's Hugging Face config.json")
    g.add_argument("--gpu-mem-gib", type=float, default=None, help="GPU memory in GiB (H200: 141)")
    g.add_argument("--gpu-util", type=float, default=0.9, help="vLLM --gpu-memory-utilization")
    g.add_argument("--kv-dtype", default="bf16", choices=["bf16", "fp16", "fp32", "fp8"], help="vLLM --kv-cache-dtype")
    g.add_argument("--weight-dtype", default="bf16", choices=["bf16", "fp16", "fp32", "fp8", "int8", "int4"],
                   help="dtype of the weights")
    g.add_argument("--ttft-curve", default=None, help="measured TTFT vs prompt tokens: JSON points or the GPU "
                                                      "harness's summary.json")
    g.add_argument("--ttft-config", default=None, help="which config of a summary.json (default: the first)")
    g.add_argument("--prefix-cache-tokens", type=int, default=None,
                   help="prefix cache size in tokens (default: the planned GPU's KV cache, else 1,000,000)")
    g.add_argument("--block-size", type=int, default=16, help="vLLM --block-size (the prefix cache's unit)")
    a.add_argument("--output-tokens", type=int, default=256,
                   help="output tokens per request when the log has neither usage nor max_tokens")
    from ragtrim.engines.options import add_engine_args

    engine = add_engine_args(a, "shards of the logs (each file; plain files also in --shard-mb byte ranges)")
    engine.add_argument("--shard-mb", type=float, default=64, help="--engine ray: plain logs are read in byte ranges of "
                                                              "about this size (default 64); gzip files whole")
    a.set_defaults(func=run_cli)


AUDIT_EXAMPLES = [
    "ragtrim audit requests.jsonl.gz                        # writes audit-report/audit.html and audit.json",
    "ragtrim audit requests.jsonl.gz --budget 0.25 --model-config /models/gemma-3-12b-it --gpu-mem-gib 141",
    "ragtrim audit gateway-requests.jsonl --no-text --out /tmp/audit   # keep prompt text out of the report",
    "ragtrim audit logs/2026-11-*.jsonl.gz --engine ray --ray-address ray://head:10001   # shards on a Ray cluster",
]
AUDIT_EXIT_CODES = """exit codes:
  0  the report is written and covers the whole log
  1  the report is written, but the log ends early (a truncated gzip file): it covers the lines read, and
     stderr says after which line reading stopped
  2  bad arguments, or no report: the log is missing, empty, holds no request the audit reads, is not UTF-8, or is
     in a format the audit does not read (the error names it)
  3  --out cannot be written (checked before the audit runs)
  4  internal error in ragtrim (please report it)"""


class OutputNotWritable(OutputError):
    """``--out`` cannot hold the report (exit 3)."""


def check_out_dir(out: str | Path) -> Path:
    """Make sure ``out`` is, or can become, a writable folder before any work is done."""
    import tempfile

    p = Path(out)
    if p.exists() and not p.is_dir():
        raise OutputNotWritable(f"cannot write the report to {str(p)!r}: it is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".ragtrim-audit-", suffix=".probe"):
            pass
    except OSError as exc:
        raise OutputNotWritable(f"cannot write the report to {str(p)!r}: {exc.strerror or exc}") from None
    return p


def _image_tokens(args: argparse.Namespace) -> int:
    if args.image_tokens is not None:
        if args.image_tokens < 0:
            raise ConfigError(f"--image-tokens must be >= 0, got {args.image_tokens}")
        return int(args.image_tokens)
    if args.model_config is None:
        return 0
    import json

    config = Path(args.model_config)
    config = config / "config.json" if config.is_dir() else config
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0  # the planner reports the bad config with its own message
    value = raw.get("mm_tokens_per_image") if isinstance(raw, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def config_from_args(args: argparse.Namespace) -> Any:
    from ragtrim.audit.capacity import PlannerConfig
    from ragtrim.audit.config import AuditConfig
    from ragtrim.audit.savings import SavingsConfig, TTFTCurve

    if (args.model_config is None) != (args.gpu_mem_gib is None):
        raise ConfigError("give --model-config and --gpu-mem-gib together (the planner needs both)")
    planner = None
    if args.model_config is not None:
        planner = PlannerConfig(model_config=Path(args.model_config), gpu_mem_gib=args.gpu_mem_gib,
                                gpu_memory_utilization=args.gpu_util, kv_dtype=args.kv_dtype,
                                weight_dtype=args.weight_dtype)
    savings = None if args.no_savings else SavingsConfig(
        sample=args.sample, seed=args.seed, budget=args.budget, scorer=args.scorer, history_turns=args.history_turns)
    curve = TTFTCurve.load(args.ttft_curve, config=args.ttft_config) if args.ttft_curve else None
    return AuditConfig(tokenizer=args.tokenizer, context_tag=args.context_tag, keep_text=not args.no_text,
                       savings=savings, planner=planner, ttft_curve=curve, block_size=args.block_size,
                       prefix_cache_tokens=args.prefix_cache_tokens, default_output_tokens=args.output_tokens,
                       image_tokens=_image_tokens(args))


def run_cli(args: argparse.Namespace) -> int:
    """Run the audit, write the report, print where it is and the headline numbers (exit codes: AUDIT_EXIT_CODES)."""
    import sys

    from ragtrim.audit.core import run_audit, write_report

    config = config_from_args(args)  # bad arguments first (exit 2), then the output folder (exit 3)
    if args.engine == "ray" and not args.shard_mb > 0:
        raise ConfigError(f"--shard-mb must be > 0, got {args.shard_mb}")
    created = not Path(args.out).exists()
    try:
        check_out_dir(args.out)
    except OutputNotWritable as exc:
        print(f"ragtrim: error: {exc}", file=sys.stderr)
        return 3
    try:
        if args.engine == "ray":
            from ragtrim.engines.options import RayOptions
            from ragtrim.engines.ray_audit import run_ray_audit

            report = run_ray_audit(args.logs, config, RayOptions(address=args.ray_address, workers=args.workers),
                                   shard_bytes=int(args.shard_mb * 2**20), progress=_shard_progress)
        else:
            report = run_audit(args.logs, config)
    except BaseException:
        if created:  # leave no empty folder behind a failed audit
            with contextlib.suppress(OSError):
                Path(args.out).rmdir()
        raise
    try:
        json_path, html_path = write_report(report, args.out)
    except OSError as exc:
        print(f"ragtrim: error: cannot write the report to {args.out!r}: {exc.strerror or exc}", file=sys.stderr)
        return 3
    for line in summary_lines(report):
        print(line)
    print(f"report: {html_path}  numbers: {json_path}")
    inp = report["input"]
    if not inp["complete"]:
        print(f"ragtrim: warning: the log ends early: reading stopped after line {inp['stopped_after_line']:,} of "
              f"{inp.get('stopped_in', args.logs[0])} ({inp['stop_reason']}); the report covers the "
              f"{inp['requests']:,} requests read", file=sys.stderr)
        return 1
    return 0


def _shard_progress(done: int, total: int) -> None:
    import sys

    print(f"\rragtrim audit: {done:,} of {total:,} shards", end="\n" if done == total else "", file=sys.stderr,
          flush=True)


def summary_lines(r: dict[str, Any]) -> list[str]:
    b = r["breakdown"]
    inp = r["input"]
    lines = [(f"{b['requests']:,} request{'s' if b['requests'] != 1 else ''} ({inp['format_description']}), {b['prompt_tokens']:,} prompt tokens "
              f"({r['tokenizer']}); {inp['skipped_lines']['total']:,} lines skipped"
              + (" (" + ", ".join(f"{k} {v:,}" for k, v in inp["skipped_lines"]["by_reason"].items()) + ")"
                 if inp["skipped_lines"]["total"] else ""))]
    if inp["images"]["count"]:
        lines.append(f"{inp['images']['count']:,} images: {inp['images']['note']}")
    if inp["uncounted_blocks"]:
        lines.append("blocks without countable text: " + ", ".join(f"{k} {v:,}"
                                                                   for k, v in inp["uncounted_blocks"].items()))
    lines.append("share by part: " + ", ".join(f"{p} {100 * d['share_of_total']:.1f}%" for p, d in b["parts"].items()))
    for lever in r.get("levers", []):
        lines.append(f"what to do first ({lever['rank']}): {lever['title']}: {lever['saves_text']}"
                     + (f"; {lever['kv_text']}" if lever["kv_text"] else "") + f". Config: {lever['config']}")
    pc = r["prefix_cache"]
    lines.append(f"prefix cache could serve {100 * pc['as_logged']['served_share_of_prompt_tokens']:.1f}% as logged, "
                 f"{100 * pc['recommended_order']['served_share_of_prompt_tokens']:.1f}% in the recommended order")
    if r.get("savings", {}).get("sampled_requests"):
        from ragtrim.audit.levers import headline_split

        s = r["savings"]["prompt"]
        split = headline_split(r)
        lines.append(f"ragtrim would save {100 * s['saved_share']:.1f}% of prompt tokens in the "
                     f"{r['savings']['sampled_requests']:,} requests trimmed (95% interval "
                     f"{100 * s['saved_share_ci95'][0]:.1f}-{100 * s['saved_share_ci95'][1]:.1f}%)"
                     + (f"; over the whole log: {split}" if split else ""))
    return lines
