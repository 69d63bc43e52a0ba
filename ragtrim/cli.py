"""The ``ragtrim`` command: ``trim`` (JSON/JSONL in, trimmed JSON out), ``bench`` (savings report), ``plan``.

This module is the reporting layer of the CLI: it parses arguments, calls library code and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ragtrim.errors import InputError, RagtrimError

_REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_REQUESTS = _REPO_ROOT / "examples" / "corpus" / "requests.jsonl"


def _build_pipeline(args: argparse.Namespace, budget: int | None) -> Any:
    from ragtrim.api import default_pipeline
    from ragtrim.pipeline import Pipeline

    if args.config:
        try:
            config = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read pipeline config {args.config!r}: {exc}") from None
        if args.tokenizer:
            config["tokenizer"] = args.tokenizer
        return Pipeline.from_dict(config)
    return default_pipeline(budget=budget, tokenizer=args.tokenizer, scorer=args.scorer)


# -- trim -----------------------------------------------------------------------------------------------------------
def _read_requests(stream: TextIO, default_query: str) -> tuple[list[dict[str, Any]], bool]:
    """Return (requests, is_jsonl). JSON: a list of chunks or one request object; JSONL: chunks or requests per line."""
    raw = stream.read()
    if not raw.strip():
        raise InputError("no input: pass a JSON list of chunks, a request object, or JSONL")
    try:
        obj = json.loads(raw)
        docs: list[Any] = [obj]
        jsonl = False
    except json.JSONDecodeError:
        docs = []
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    docs.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(f"input line {n} is not valid JSON: {exc.msg}") from None
        jsonl = True
    if jsonl and docs and all(isinstance(d, dict) and "chunks" in d for d in docs):
        return [dict(d) for d in docs], True
    if jsonl:
        return [{"query": default_query, "chunks": docs}], False
    if isinstance(obj, list):
        return [{"query": default_query, "chunks": obj}], False
    if isinstance(obj, dict) and "chunks" in obj:
        return [dict(obj)], False
    raise InputError("JSON input must be a list of chunks or an object with 'chunks' (and optional 'query', 'budget')")


def cmd_trim(args: argparse.Namespace) -> int:
    if args.input in (None, "-"):
        requests, jsonl = _read_requests(sys.stdin, args.query or "")
    else:
        with open(args.input, encoding="utf-8") as stream:
            requests, jsonl = _read_requests(stream, args.query or "")
    out_lines = []
    pipelines: dict[str, Any] = {}  # one pipeline per distinct budget (the --config file is read once per budget)
    for req in requests:
        budget = req.get("budget", args.budget)
        key = repr(budget)  # budgets come from JSON and may be unhashable; a bad one fails in _build_pipeline
        if key not in pipelines:
            pipelines[key] = _build_pipeline(args, budget)
        pipeline = pipelines[key]
        result = pipeline.run(req["chunks"], query=req.get("query") or args.query or "", history=req.get("history"))
        out_lines.append(result.to_dict())
    text = "\n".join(json.dumps(d, ensure_ascii=False) for d in out_lines) if jsonl else json.dumps(
        out_lines[0], ensure_ascii=False, indent=2
    )
    if args.output in (None, "-"):
        sys.stdout.write(text + "\n")
    else:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 0


# -- bench ----------------------------------------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    return _bench_examples(args)


def _qa_bench(argv: list[str]) -> int:
    """``ragtrim bench --dataset nq|nq-random|squad ...``: the QA savings benchmark (its own arguments)."""
    from ragtrim.bench import qa

    parser = argparse.ArgumentParser(prog="ragtrim bench", description="QA savings benchmark on ../shared/data")
    qa.add_bench_args(parser)
    return int(qa.run_bench(parser.parse_args(argv)))


def _dataset_of(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--dataset" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--dataset="):
            return a.split("=", 1)[1]
    return "examples"


def _bench_examples(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ragtrim.bench.savings import aggregate, load_requests, measure, peak_memory_mib
    from ragtrim.bench.table import format_table

    path = Path(args.requests) if args.requests else EXAMPLE_REQUESTS
    requests = load_requests(path)
    if args.limit:
        requests = requests[: args.limit]
    budgets = [int(b) for b in args.budgets.split(",")] if args.budgets else [500, 1000]
    methods: list[tuple[str, Any]] = [("default, no budget", _build_pipeline(args, None))]
    methods += [(f"default @ {b} tokens", _build_pipeline(args, b)) for b in budgets]
    summaries = []
    all_records = []
    for name, pipeline in methods:

        def bar(it: Any, n: str = name) -> Any:
            return tqdm(it, desc=n, total=len(requests), file=sys.stderr, leave=False)

        def job(p: Any = pipeline, n: str = name) -> Any:
            return measure(n, p, requests, progress=bar)

        records, peak = peak_memory_mib(job)
        summary = aggregate(records)
        summary["peak_python_heap_mib"] = peak
        summary["pipeline"] = pipeline.to_dict()
        summaries.append(summary)
        all_records.extend(records)
    out = Path(args.output) if args.output else _REPO_ROOT / "benchmarks" / "results" / "bench_examples.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "requests_file": str(path.relative_to(_REPO_ROOT) if path.is_relative_to(_REPO_ROOT) else path),
        "requests": len(requests),
        "tokenizer": methods[0][1].counter.name,
        "methods": summaries,
        "records": [r.__dict__ | {"stage_tokens_saved": dict(r.stage_tokens_saved), "stage_ms": dict(r.stage_ms)}
                    for r in all_records],
    }
    out.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"ragtrim bench: {len(requests)} requests from {path} (tokens: {methods[0][1].counter.name})\n")
    print(
        format_table(
            summaries,
            [
                ("method", "method"),
                ("mean_tokens_before", "tokens before"),
                ("mean_tokens_after", "tokens after"),
                ("compression_ratio", "ratio"),
                ("answer_recall", "answer recall"),
                ("p50_latency_ms", "p50 ms"),
                ("p95_latency_ms", "p95 ms"),
            ],
        )
    )
    stage_rows = []
    for s in summaries:
        for stage, saved in s["stage_tokens_saved"].items():
            stage_rows.append(
                {
                    "method": s["method"],
                    "stage": stage,
                    "mean_tokens_saved": saved / max(1, s["requests"] - s["errors"]),
                    "p50_ms": s["stage_p50_ms"].get(stage),
                }
            )
    print("\nper-stage savings (mean tokens per request)\n")
    print(format_table(stage_rows, [("method", "method"), ("stage", "stage"), ("mean_tokens_saved", "tokens saved"),
                                    ("p50_ms", "p50 ms")]))
    print(f"\nwrote {out}")
    return 0 if all(s["errors"] == 0 for s in summaries) else 1


# -- serve ----------------------------------------------------------------------------------------------------------
def _serve_module() -> Any:
    import importlib

    from ragtrim.errors import require

    for package in ("starlette", "uvicorn", "aiohttp", "prometheus_client"):
        require(package, "serve", "ragtrim serve")
    return importlib.import_module("ragtrim.serve.cli")


def _serve(args: argparse.Namespace) -> int:
    return int(_serve_module().run_serve(args))


def _serve_fake_upstream(args: argparse.Namespace) -> int:
    return int(_serve_module().run_fake_upstream(args))


def add_fake_upstream_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``ragtrim serve-fake-upstream`` (here so that ``--help`` works without the extra)."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--base-ms", type=float, default=20.0, help="prefill floor per request (ms)")
    parser.add_argument("--per-1k-ms", type=float, default=37.0, help="prefill ms per 1,000 prompt tokens")
    parser.add_argument("--decode-ms", type=float, default=0.0, help="ms between output tokens")
    parser.add_argument("--output-tokens", type=int, default=8)
    parser.add_argument("--slots", type=int, default=0, help="requests processed at once (0: unlimited)")
    parser.add_argument("--fail-status", type=int, default=0)


# -- parser ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragtrim", description="Make RAG prompts small before they reach the model.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("trim", help="trim chunks: JSON or JSONL in, trimmed JSON out")
    p.add_argument("input", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument("-q", "--query", default="", help="the query (overridden by a request's 'query')")
    p.add_argument("-b", "--budget", type=int, default=None, help="token budget for the kept chunks")
    p.add_argument("--tokenizer", default=None, help="cl100k_base (default), tiktoken:<enc>, hf:<path>, approx")
    p.add_argument("--config", default=None, help="pipeline config JSON (see Pipeline.to_dict)")
    p.add_argument("--scorer", default="auto", choices=["auto", "bm25", "embedding", "hybrid"],
                   help="chunk ranking (auto: MiniLM when installed, else BM25)")
    p.set_defaults(func=cmd_trim)

    b = sub.add_parser("bench", help="measure token savings on a dataset (default: the shipped example corpus)")
    b.add_argument("--dataset", default="examples", choices=["examples"],
                   help="examples (default); nq, nq-random and squad run the QA benchmark (see --dataset nq --help)")
    b.add_argument("--requests", default=None, help="JSONL of requests for --dataset examples")
    b.add_argument("--budgets", default=None, help="comma-separated token budgets (examples: 500,1000)")
    b.add_argument("--limit", type=int, default=None, help="only the first N requests/questions")
    b.add_argument("--tokenizer", default=None)
    b.add_argument("--config", default=None, help="pipeline config JSON")
    b.add_argument("--scorer", default="auto", choices=["auto", "bm25", "embedding", "hybrid"])
    b.add_argument("-o", "--output", default=None, help="JSON output path")
    b.set_defaults(func=cmd_bench)

    s = sub.add_parser("serve", help="OpenAI-compatible gateway that trims in flight and enforces limits "
                       "(extra: serve; docs/serve.md)")
    s.add_argument("--config", required=True, help="gateway TOML file")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    s.add_argument("--access-log", action="store_true", help="uvicorn's access log (off: it costs throughput)")
    s.set_defaults(func=_serve)

    f = sub.add_parser("serve-fake-upstream", help="a fake OpenAI-compatible model server whose prefill time "
                       "grows with the prompt (for tests and benchmarks)")
    add_fake_upstream_args(f)
    f.set_defaults(func=_serve_fake_upstream)

    for module in ("ragtrim.plan", "ragtrim.bench.model_prep"):
        try:
            mod = __import__(module, fromlist=["add_cli"])
        except ImportError:
            continue
        before = set(sub.choices)
        mod.add_cli(sub)
        for name in set(sub.choices) - before:
            if sub.choices[name].get_default("func") is None:
                sub.choices[name].set_defaults(func=mod.run_cli)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:2] == ["bench", "prepare-model"]:  # `ragtrim bench prepare-model` is an alias
        args_list = args_list[1:]
    try:
        if args_list[:1] == ["bench"] and _dataset_of(args_list[1:]) != "examples":
            return _qa_bench(args_list[1:])
        parser = build_parser()
        args = parser.parse_args(args_list)
        return int(args.func(args))
    except RagtrimError as exc:
        print(f"ragtrim: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
