"""``ragtrim gate run|squad|log``: arguments and the runs (registered by ragtrim/cli.py; light to import, so
``ragtrim --help`` works without the ``serve`` extra the HTTP client needs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ragtrim._util.cli_help import HelpFormatter, epilog
from ragtrim.errors import ConfigError

GATE_EXIT_CODES = """exit codes:
  0  every change passes every check (run); the golden set is written (squad, log)
  1  a change fails a check: the report says which, and why
  2  bad arguments, arms, thresholds or golden set, an arm that never answered, or a missing extra
  3  --out cannot be written (checked before any request is sent)
  4  internal error in ragtrim (please report it)
  130 interrupted: the results so far are kept; the same command continues"""

_EXAMPLES = (
    "ragtrim gate squad dev-v2.0.json --limit 300 --unanswerable-share 0.3 --json -o golden.jsonl",
    ("ragtrim gate run golden.jsonl --model m --arm bf16=http://gpu1:8000/v1 --arm fp8kv=http://gpu2:8000/v1 "
     "--max-accuracy-drop 0.01 --min-ttft-gain 1.2 --out gate-report"),
    "ragtrim gate run golden.jsonl --arms arms.toml --out gate-report",
    "ragtrim gate log requests.jsonl --sample 200 -o golden.jsonl",
)


def _epilog(*examples: str) -> str:
    return epilog(examples or _EXAMPLES, topic="gate", extra=GATE_EXIT_CODES)


_THRESHOLD_FLAGS = (
    ("max_accuracy_drop", "largest accuracy drop allowed, as a share (default 0.01: one point)"),
    ("max_refusal_drop", "largest drop in refusals of unanswerable items (default 0.01)"),
    ("max_format_drop", "largest drop in JSON-schema compliance (default 0.01)"),
    ("max_f1_drop", "largest drop in mean token F1 (default: not checked)"),
    ("max_error_rate_increase", "largest rise in the share of failed requests (default 0)"),
    ("min_ttft_gain", "TTFT must be at least this many times lower, baseline / change (default: not checked)"),
    ("min_latency_gain", "total latency must be at least this many times lower (default: not checked)"),
)


def _limit(text: str) -> float | None:
    if text.lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None


def add_cli(subparsers: Any) -> None:
    """Register ``gate`` and its subcommands."""
    g = subparsers.add_parser(
        "gate", help="judge one serving change at a time against a baseline on a golden set: accuracy, refusals, "
                     "JSON format, TTFT and latency, with a pass/fail verdict for CI",
        description="Send a golden set of questions to a baseline and to each change (OpenAI-compatible endpoints), "
                    "compare them item by item, and pass or fail each change against thresholds.",
        epilog=_epilog(), formatter_class=HelpFormatter)
    sub = g.add_subparsers(dest="gate_command", required=True)

    r = sub.add_parser("run", help="run the golden set through the arms and judge each change",
                       epilog=_epilog(*_EXAMPLES[1:3]), formatter_class=HelpFormatter,
                       description="Writes results.jsonl (every request; a rerun with the same --out sends only what "
                                   "is missing), gate.json (every number) and gate.html (the page) into --out.")
    r.add_argument("golden", help="golden set, JSONL (ragtrim docs gate; ragtrim gate squad / log build one)")
    a = r.add_argument_group("arms")
    a.add_argument("--arms", default=None, help="arms file, TOML or JSON: [[arm]] tables with name, url, model, "
                                                "options, trim, documents, api_key_env; baseline; [thresholds]")
    a.add_argument("--arm", action="append", default=[], metavar="NAME=URL",
                   help="an arm serving --model at this OpenAI base URL (repeat; the first is the baseline)")
    a.add_argument("--model", default=None, help="the model name of --arm arms")
    a.add_argument("--baseline", default=None, help="the baseline arm's name (default: the file's, else the first)")
    t = r.add_argument_group("thresholds (over --thresholds FILE, over the arms file's [thresholds])")
    t.add_argument("--thresholds", default=None, help="TOML or JSON file of thresholds")
    for name, text in _THRESHOLD_FLAGS:
        t.add_argument("--" + name.replace("_", "-"), type=_limit, default=argparse.SUPPRESS, help=text)
    t.add_argument("--latency-percentile", type=float, default=argparse.SUPPRESS,
                   help="the percentile the gain checks compare (default 50)")
    t.add_argument("--rule", choices=["observed", "significant", "confident"], default=argparse.SUPPRESS,
                   help="observed (default): the measured drop or gain decides; significant: a drop fails only when "
                        "unlikely to be noise; confident: the whole 95%% interval must meet the threshold")
    t.add_argument("--alpha", type=float, default=argparse.SUPPRESS, help="significance level (default 0.05)")
    t.add_argument("--bootstrap-rounds", type=int, default=argparse.SUPPRESS, help="resamples (default 1000)")
    t.add_argument("--seed", type=int, default=argparse.SUPPRESS, help="bootstrap seed (default 0)")
    j = r.add_argument_group("judging")
    j.add_argument("--metric", choices=["contains", "exact", "f1"], default="contains",
                   help="when an answer is right: contains (a gold answer in it as whole words; default), exact, or "
                        "f1 (token F1 >= --f1-threshold)")
    j.add_argument("--f1-threshold", type=float, default=0.5)
    s = r.add_argument_group("sending")
    s.add_argument("--concurrency", type=int, default=4, help="requests in flight per arm (1: single-request "
                                                             "latency; default 4)")
    s.add_argument("--retries", type=int, default=2, help="tries after a retryable failure (default 2)")
    s.add_argument("--backoff-s", type=float, default=0.5, help="wait before the first retry, doubling (default 0.5)")
    s.add_argument("--warmup", type=int, default=2, help="untimed requests per arm first (default 2)")
    s.add_argument("--ready-timeout", type=float, default=30.0, help="seconds to wait for each arm's GET /models")
    s.add_argument("--no-ready-check", action="store_true", help="skip the GET /models check")
    s.add_argument("--retry-errors", action="store_true", help="send again the requests that failed in an "
                                                               "earlier run (default: they stand, counted)")
    s.add_argument("--limit", type=int, default=None, help="only the first N items of the golden set")
    s.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.add_argument("--out", default="gate-report", help="output folder (default: gate-report)")
    r.add_argument("--no-text", action="store_true", help="keep questions and replies out of the reports")
    r.set_defaults(func=run_cli)

    q = sub.add_parser("squad", help="build a golden set from a SQuAD-format file (2.0: with unanswerable "
                                     "questions)", epilog=_epilog(_EXAMPLES[0]), formatter_class=HelpFormatter,
                       description="Writes a golden set (JSONL) from a SQuAD v1.1 or v2.0 file: each question with "
                                   "its paragraph and others of its article as documents; SQuAD 2.0's impossible "
                                   "questions become items to refuse.")
    q.add_argument("squad", help="SQuAD v1.1 or v2.0 JSON file")
    q.add_argument("-o", "--output", required=True, help="golden set JSONL to write")
    q.add_argument("--articles", default=None, help="only these article titles (comma-separated)")
    q.add_argument("--exclude-articles", default="", help="leave out these article titles (comma-separated)")
    q.add_argument("--limit", type=int, default=None, help="sample this many questions (seeded)")
    q.add_argument("--unanswerable-share", type=float, default=None, help="with --limit: this share unanswerable")
    q.add_argument("--documents", type=int, default=5, help="paragraphs per question: the gold one and others of "
                                                           "its article (default 5)")
    q.add_argument("--json", action="store_true", help='answers as JSON: {"answer": "..."}, null to refuse')
    q.add_argument("--seed", type=int, default=0)
    q.set_defaults(func=run_cli)

    lg = sub.add_parser("log", help="build a golden set from a request log (the gateway's log_request lines, or "
                                    "any log ragtrim audit reads), sampled across request shapes",
                        epilog=_epilog(_EXAMPLES[3]), formatter_class=HelpFormatter,
                        description="Writes a golden set (JSONL) sampled from a request log across the audit's "
                                    "request shapes; with no gold answers, the baseline arm's replies become the "
                                    "reference (agreement).")
    lg.add_argument("log", help="request log, JSONL or JSONL.gz")
    lg.add_argument("-o", "--output", required=True, help="golden set JSONL to write")
    lg.add_argument("--sample", type=int, default=200, help="requests to keep (default 200)")
    lg.add_argument("--seed", type=int, default=0)
    lg.add_argument("--tokenizer", default=None, help="counts prompt sizes for the shapes (default cl100k_base)")
    lg.add_argument("--context-tag", default="context")
    lg.set_defaults(func=run_cli)


def run_cli(args: argparse.Namespace) -> int:
    """Dispatch ``ragtrim gate`` (exit codes: GATE_EXIT_CODES)."""
    if args.gate_command == "squad":
        return _squad(args)
    if args.gate_command == "log":
        return _log(args)
    return _run(args)


def _titles(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _squad(args: argparse.Namespace) -> int:
    from ragtrim.gate.builders import golden_from_squad
    from ragtrim.gate.golden import summary, write_golden

    items = golden_from_squad(args.squad, articles=_titles(args.articles) or None,
                              exclude_articles=_titles(args.exclude_articles), limit=args.limit,
                              documents=args.documents, unanswerable_share=args.unanswerable_share,
                              json_answers=args.json, seed=args.seed)
    n = write_golden(items, args.output)
    s = summary(items)
    print(f"wrote {n:,} items to {args.output}: {s['answerable']:,} answerable, {s['unanswerable']:,} unanswerable, "
          f"{len(s['tags'])} articles")
    return 0


def _log(args: argparse.Namespace) -> int:
    from ragtrim.gate.builders import golden_from_log
    from ragtrim.gate.golden import write_golden

    items, info = golden_from_log(args.log, sample=args.sample, seed=args.seed, tokenizer=args.tokenizer,
                                  context_tag=args.context_tag)
    n = write_golden(items, args.output)
    print(f"wrote {n:,} items to {args.output} from {info['requests_read']:,} requests in "
          f"{len(info['shapes'])} shapes; {info['note']}")
    for shape, k in info["sampled_by_shape"].items():
        print(f"  {shape}: {k} of {info['shapes'][shape]:,}")
    if info["left_out"]:
        print("left out: " + ", ".join(f"{k} {v:,}" for k, v in info["left_out"].items()))
    return 0


def _thresholds(args: argparse.Namespace, from_arms: dict[str, Any]) -> Any:
    from ragtrim.gate.arms import read_table_file
    from ragtrim.gate.verdict import Thresholds

    merged: dict[str, Any] = dict(from_arms)
    if args.thresholds:
        merged.update(read_table_file(args.thresholds, "thresholds file"))
    for name in [n for n, _ in _THRESHOLD_FLAGS] + ["latency_percentile", "rule", "alpha", "bootstrap_rounds",
                                                     "seed"]:
        if name in vars(args):
            merged[name] = getattr(args, name)
    return Thresholds.from_mapping(merged)


def _arms(args: argparse.Namespace) -> tuple[list[Any], str, dict[str, Any]]:
    from ragtrim.gate.arms import check_arms, load_arms, parse_arm_option

    arms: list[Any] = []
    baseline = None
    thresholds: dict[str, Any] = {}
    if args.arms:
        f = load_arms(args.arms)
        arms, baseline, thresholds = list(f.arms), f.baseline, dict(f.thresholds)
    arms += [parse_arm_option(text, args.model) for text in args.arm]
    if not arms:
        raise ConfigError("give the arms: --arms FILE, or --arm NAME=URL twice or more with --model")
    base = args.baseline or baseline or arms[0].name
    check_arms(arms, base)
    return arms, base, thresholds


def _run(args: argparse.Namespace) -> int:
    from ragtrim.audit.cli import OutputNotWritable, check_out_dir
    from ragtrim.errors import require
    from ragtrim.gate.core import RESULTS_FILE, run_gate
    from ragtrim.gate.golden import load_golden
    from ragtrim.gate.judging import JudgeConfig
    from ragtrim.gate.runner import RunConfig

    require("httpx", "serve", "ragtrim gate (its HTTP client)")
    arms, baseline, arm_thresholds = _arms(args)
    thresholds = _thresholds(args, arm_thresholds)
    judge = JudgeConfig(metric=args.metric, f1_threshold=args.f1_threshold)
    run_config = RunConfig(concurrency=args.concurrency, retries=args.retries, backoff_s=args.backoff_s,
                           warmup=args.warmup, ready_timeout_s=args.ready_timeout, check_ready=not args.no_ready_check,
                           retry_errors=args.retry_errors, progress=not args.no_progress)
    items = load_golden(args.golden)
    if args.limit is not None:
        if args.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {args.limit}")
        items = items[: args.limit]
    try:
        check_out_dir(args.out)
    except OutputNotWritable as exc:
        print(f"ragtrim: error: {exc}", file=sys.stderr)
        return 3
    try:
        report = run_gate(items, arms, args.out, baseline=baseline, run_config=run_config, thresholds=thresholds,
                          judge_config=judge, keep_text=not args.no_text, golden_path=args.golden)
    except KeyboardInterrupt:
        print(f"ragtrim gate: interrupted; the results so far are in {Path(args.out) / RESULTS_FILE}: run the same "
              "command to continue", file=sys.stderr)
        raise
    for line in summary_lines(report):
        print(line)
    print(f"report: {Path(args.out) / 'gate.html'}  numbers: {Path(args.out) / 'gate.json'}")
    return 0 if report["verdict"] == "pass" else 1


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f} ms"


def summary_lines(r: dict[str, Any]) -> list[str]:
    """The verdict in a few lines: the run, each arm's headline figures, each change's checks."""
    run = r["run"]
    g = r["golden"]
    lines = [f"{g['items']:,} items ({g['unanswerable']:,} unanswerable, {g['with_schema']:,} with a schema); "
             f"sent {sum(run.get('sent', {}).values()):,} requests, reused {run.get('reused', 0):,}"
             + (f", ignored {run['stale_records_ignored']:,} stale" if run.get("stale_records_ignored") else "")]
    for name, a in r["arms"].items():
        req = a["requests"]
        lines.append(f"  {name}{' (baseline)' if a['baseline'] else ''}: accuracy {_pct(a['accuracy']['rate'])}, "
                     f"F1 {_pct(a['f1'])}, refusal {_pct(a['refusal']['rate'])}, format {_pct(a['format']['rate'])}, "
                     f"TTFT p50 {_ms(a['ttft']['p50_ms'])}, "
                     f"errors {req['errors'] + req['missing']}")
    for name, c in r["changes"].items():
        lines.append(f"{name}: {c['verdict'].upper()}")
        for ch in c["checks"]:
            value = ch["value"]
            shown = ("-" if value is None else f"{value:.2f}x") if ch["check"].endswith("_gain") else _pct(value)
            limit = f"{ch['threshold']:.2f}x" if ch["check"].endswith("_gain") else _pct(ch["threshold"])
            p = f", p {ch['p_value']:.3g}" if ch["p_value"] is not None else ""
            lines.append(f"  {'ok  ' if ch['passed'] else 'FAIL'} {ch['check']}: {shown} ({ch['direction']} {limit}"
                         f"{p}){'; ' + ch['note'] if ch['note'] else ''}")
        for s in c["slices"][:3]:
            lines.append(f"  loses most on {s['slice']}: {_pct(s['baseline'])} -> {_pct(s['change'])} "
                         f"({s['n']} items)")
    lines.append(f"verdict: {r['verdict'].upper()}")
    return lines
