"""The ``ragtrim`` command: ``trim`` (JSON/JSONL in, trimmed JSON or text out) and ``bench`` (savings report) here;
the other subcommands (``prepare``, ``serve``, ``index``, ``plan``, ``audit``, ``docs``) are registered by their
packages. This module is the reporting layer of the CLI: it parses arguments, calls library code and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ragtrim._util.redact import redact
from ragtrim.audit import cli as audit_cli
from ragtrim.errors import ConfigError, InputError, MissingDependencyError, OutputError, RagtrimError
from ragtrim.gate import cli as gate_cli
from ragtrim.plan import cli as plan_cli
from ragtrim.scoring.registry import SCORER_NAMES, STAGE_SCORER_NAMES
from ragtrim.serve import cli as serve_cli
from ragtrim.vectors import cli as vectors_cli

BENCH_OUTPUT = "ragtrim-bench.json"
"""Where ``ragtrim bench`` writes without ``--output``: in the working directory."""

EXIT_OK = 0
EXIT_REQUEST_FAILED = 1
EXIT_USAGE = 2
EXIT_OUTPUT = 3
EXIT_INTERNAL = 4

EXIT_CODES = f"""exit codes:
  {EXIT_OK}  success
  {EXIT_REQUEST_FAILED}  one or more requests failed (pinned chunks over the budget; JSONL: an error record at each
     failed request's line, the rest trimmed; bench: some requests had errors; index: the vector store failed)
  {EXIT_USAGE}  bad arguments, pipeline config or input (missing, a directory, not UTF-8, not JSON, nested too
     deeply, wrong shape, also of a single request), or a missing optional extra: nothing was trimmed; the
     message names the input
  {EXIT_OUTPUT}  the output could not be written (-o names a directory, a read-only file, a missing folder)
  {EXIT_INTERNAL}  internal error in ragtrim (please report it)
every failure prints one line on stderr: "ragtrim: error: ..."."""

_MAX_JSON_DEPTH_MESSAGE = "is nested too deeply for JSON input"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (usage goes to --help), so every CLI failure is one line on stderr with the
    one prefix ``ragtrim: error:``; subcommands' parsers are of this class too (argparse makes them so)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ragtrim: error: {message} (see {self.prog} --help)\n")


def _one_line(exc: BaseException) -> str:
    return " ".join(redact(exc).split()) or type(exc).__name__


def _read_config(path: str) -> Any:
    raw = _read_text(path, "pipeline config")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"pipeline config {path!r} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"pipeline config {path!r} {_MAX_JSON_DEPTH_MESSAGE}") from None


def _build_pipeline(args: argparse.Namespace, budget: int | None) -> Any:
    from ragtrim.api import default_pipeline
    from ragtrim.pipeline import Pipeline

    if args.config:
        config = _read_config(args.config)
        if not isinstance(config, dict):
            raise ConfigError(
                f"pipeline config {args.config!r} must hold a JSON object (see Pipeline.to_dict), got "
                f"{type(config).__name__}"
            )
        if not args.tokenizer:
            # A tokenizer file named inside the config must lie under $RAGTRIM_TOKENIZER_DIRS.
            return Pipeline.from_dict(config)
        # --tokenizer is the operator's and replaces the config's, which is then never resolved or read.
        stages = Pipeline.from_dict({**config, "tokenizer": None}).stages
        return Pipeline(stages, tokenizer=args.tokenizer)
    return default_pipeline(budget=budget, tokenizer=args.tokenizer, scorer=args.scorer)


# -- trim -----------------------------------------------------------------------------------------------------------
def _read_bytes(path: str | None, what: str) -> bytes | str:
    """The raw bytes of ``path`` or stdin (a text-only stdin, as in embedding or tests, gives its text)."""
    if path in (None, "-"):
        buffer = getattr(sys.stdin, "buffer", None)
        return buffer.read() if buffer is not None else sys.stdin.read()
    assert path is not None
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except IsADirectoryError:
        raise InputError(f"{what} {path!r} is a directory; pass a file") from None
    except FileNotFoundError:
        raise InputError(f"{what} {path!r} does not exist") from None
    except (OSError, ValueError) as exc:  # permission denied, a NUL in the name, ...
        raise InputError(f"{what} {path!r} cannot be read: {exc.strerror if isinstance(exc, OSError) else exc}") from None


def _decode(data: bytes | str, where: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where} is not valid UTF-8 ({exc.reason} at byte {exc.start}); convert it first, e.g. "
            "iconv -f latin1 -t utf-8"
        ) from None


def _read_text(path: str | None, what: str) -> str:
    return _decode(_read_bytes(path, what), f"{what} {'stdin' if path in (None, '-') else repr(path)}")


def _parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError(f"{where} {_MAX_JSON_DEPTH_MESSAGE}") from None


def _check_text(value: Any, where: str) -> None:
    """Reject lone surrogates (JSON "\\ud800"): they are not text, no tokenizer takes them, no UTF-8 holds them."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(
                    f"{where} holds a lone surrogate {v[exc.start]!r} (a JSON \\u escape of half a character); "
                    "send valid Unicode text"
                ) from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


_Item = tuple[int, "dict[str, Any] | Exception"]  # (line number, request or the reason it is not one)


def _read_requests(text: str, default_query: str) -> tuple[list[_Item], bool]:
    """Return ([(line, request or error)], is_jsonl). JSON: a list of chunks or one request object; JSONL: one
    request object per line (a bad line becomes an error at its position), or one chunk per line."""
    if not text.strip():
        raise InputError("no input: pass a JSON list of chunks, a request object, or JSONL")
    try:
        obj = _parse_json(text, "input")
    except json.JSONDecodeError:
        pass
    else:
        _check_text(obj, "input")
        if isinstance(obj, list):
            return [(1, {"query": default_query, "chunks": obj})], False
        if isinstance(obj, dict) and "chunks" in obj:
            return [(1, dict(obj))], False
        raise InputError(
            "JSON input must be a list of chunks or an object with 'chunks' (and optional 'query', 'budget')"
        )
    lines: list[tuple[int, Any]] = []
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines(): U+2028 may sit raw inside a JSON string
        if not line.strip():
            continue
        try:
            doc: Any = _parse_json(line, f"input line {n}")
            _check_text(doc, f"input line {n}")
        except json.JSONDecodeError as exc:
            doc = InputError(f"input line {n} is not valid JSON: {exc.msg} (column {exc.colno})")
        except InputError as exc:
            doc = exc
        lines.append((n, doc))
    if any(isinstance(d, dict) and "chunks" in d for _, d in lines):  # one request per line
        return [
            (n, d if isinstance(d, Exception) else dict(d) if isinstance(d, dict) and "chunks" in d else
             InputError(f"input line {n} is not a request object with 'chunks'")) for n, d in lines
        ], True
    bad = next((d for _, d in lines if isinstance(d, Exception)), None)  # one chunk per line: one request
    if bad is not None:
        raise bad
    return [(1, {"query": default_query, "chunks": [d for _, d in lines]})], False


def _trim_one(req: dict[str, Any], args: argparse.Namespace, pipelines: dict[str, Any]) -> Any:
    """The ``TrimResult`` of one request."""
    budget = req.get("budget", args.budget)
    key = json.dumps(budget, sort_keys=True, default=repr)  # budgets come from JSON and may be unhashable
    if key not in pipelines:
        pipelines[key] = _build_pipeline(args, budget)
    query = req.get("query") or args.query or ""
    if not isinstance(query, str):
        raise InputError(f"'query' must be a string, got {type(query).__name__}")
    return pipelines[key].run(req["chunks"], query=query, history=req.get("history"))


def _error_record(line: int, exc: BaseException) -> dict[str, Any]:
    return {"error": {"type": type(exc).__name__, "message": _one_line(exc)}, "line": line}


def _dumps(obj: Any, *, indent: int | None = None) -> str:
    text = json.dumps(obj, ensure_ascii=False, indent=indent)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # cannot happen after _check_text, but output must stay valid UTF-8 JSON
        text = json.dumps(obj, ensure_ascii=True, indent=indent)
    return text


def _write_output(path: str | None, text: str) -> None:
    data = (text + "\n").encode("utf-8")
    if path in (None, "-"):
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:
            sys.stdout.write(data.decode("utf-8"))
            return
        sys.stdout.flush()
        buffer.write(data)
        buffer.flush()
        return
    assert path is not None
    try:
        with open(path, "wb") as stream:
            stream.write(data)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OutputError(f"cannot write output {path!r}: {reason}") from None


def _check_output_path(path: str | None) -> None:
    """Fail before trimming when -o cannot be a file, so no work is lost."""
    if path in (None, "-"):
        return
    assert path is not None
    p = Path(path)
    try:
        if p.is_dir():
            raise OutputError(f"cannot write output {path!r}: it is a directory")
        if not p.parent.is_dir():
            raise OutputError(f"cannot write output {path!r}: folder {str(p.parent)!r} does not exist")
    except (OSError, ValueError) as exc:
        raise OutputError(f"cannot write output {path!r}: {exc}") from None


def cmd_trim(args: argparse.Namespace) -> int:
    _check_output_path(args.output)
    pipelines: dict[str, Any] = {}  # one pipeline per distinct budget (the --config file is read once per budget)
    key = json.dumps(args.budget)
    pipelines[key] = _build_pipeline(args, args.budget)  # a bad config or budget stops here, before any input
    requests, jsonl = _read_requests(_read_text(args.input, "input"), args.query or "")
    if args.text and jsonl:
        raise ConfigError("--text prints the trimmed text of one request (JSON input); for JSONL input, one JSON "
                          "record a request, leave --text out")
    records: list[dict[str, Any]] = []
    texts: list[str] = []
    failed = 0
    for line, req in requests:
        try:
            if isinstance(req, Exception):
                raise req
            result = _trim_one(req, args, pipelines)
            records.append(result.to_dict())
            texts.append(result.text)
        except (RagtrimError, RecursionError) as exc:
            failed += 1
            if not jsonl:
                if isinstance(exc, (InputError, ConfigError)):  # the one request is bad input: nothing trimmed
                    name = "stdin" if args.input in (None, "-") else repr(args.input)
                    print(f"ragtrim: error: input {name}: {_one_line(exc)}", file=sys.stderr)
                    return EXIT_USAGE
                print(f"ragtrim: error: {_one_line(exc)}", file=sys.stderr)
                return EXIT_REQUEST_FAILED
            records.append(_error_record(line, exc))
            message = _one_line(exc)
            where = "" if message.startswith("input line ") else f"input line {line}: "
            print(f"ragtrim: error: {where}{message}", file=sys.stderr)
    if jsonl:
        _write_output(args.output, "\n".join(_dumps(r) for r in records))
    elif args.text:
        _write_output(args.output, texts[0])
    else:
        _write_output(args.output, _dumps(records[0], indent=2))
    return EXIT_REQUEST_FAILED if failed else EXIT_OK


# -- bench ----------------------------------------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    """Token savings of the default pipeline (no budget, then each budget) on a requests file."""
    from tqdm import tqdm

    from ragtrim._util.table import format_table
    from ragtrim.savings import (
        EXAMPLE_REQUESTS,
        aggregate,
        example_requests,
        load_requests,
        measure,
        peak_memory_mib,
    )
    from ragtrim.vectors.store import configure_default_store

    configure_default_store(None)  # cold latency: no passage vector from an earlier run's store either

    path = Path(args.requests) if args.requests else example_requests()
    requests = load_requests(path)
    if args.limit:
        requests = requests[: args.limit]
    try:
        budgets = [int(b) for b in args.budgets.split(",")] if args.budgets else [500, 1000]
    except ValueError:
        raise ConfigError(f"--budgets must be comma-separated integers, got {args.budgets!r}") from None
    out = Path(args.output or BENCH_OUTPUT)
    _check_output_path(str(out))
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
    payload = {
        "requests_file": args.requests or f"ragtrim/{EXAMPLE_REQUESTS}",
        "requests": len(requests),
        "tokenizer": methods[0][1].counter.name,
        "methods": summaries,
        "records": [r.__dict__ | {"stage_tokens_saved": dict(r.stage_tokens_saved), "stage_ms": dict(r.stage_ms)}
                    for r in all_records],
    }
    try:
        out.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write output {str(out)!r}: {exc.strerror or exc}") from None
    print(f"ragtrim bench: {len(requests)} requests from {payload['requests_file']} "
          f"(tokens: {methods[0][1].counter.name})\n")
    print(
        format_table(
            summaries,
            [
                ("method", "method"),
                ("mean_tokens_before", "tokens before"),
                ("mean_tokens_after", "tokens after"),
                ("compression_ratio", "ratio"),
                ("answer_recall", "answer recall"),
                ("p50_latency_ms", "p50 ms (cold)"),
                ("p95_latency_ms", "p95 ms (cold)"),
                ("mean_cpu_s_per_request", "CPU s/request"),
            ],
        )
    )
    print("\ncold: every cache emptied before each request (no token count, sentence split or embedding reused from "
          "an earlier request or row); times include everything trim() does")
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
                                    ("p50_ms", "p50 ms (cold)")]))
    print(f"\nwrote {out}")
    return 0 if all(s["errors"] == 0 for s in summaries) else 1


# -- parser ---------------------------------------------------------------------------------------------------------
TRIM_EXAMPLES = [
    'ragtrim trim chunks.json -q "How tall is the tower?" -b 800 > trimmed.json',
    'ragtrim trim chunks.json -q "How tall is the tower?" -b 800 --text | llm "answer from this context"',
    "ragtrim trim requests.jsonl -o trimmed.jsonl        # one request object a line, one result a line",
    "cat chunks.json | ragtrim trim -q \"...\" --scorer bm25 --tokenizer hf:/models/gemma/tokenizer.json",
]
BENCH_EXAMPLES = [
    "ragtrim bench                                      # the 12 example requests shipped in the package",
    "ragtrim bench --requests mine.jsonl --budgets 500,1500 -o bench.json",
]


def _version() -> str:
    """The installed distribution's version (the one pip reports)."""
    import importlib.metadata

    try:
        return f"ragtrim {importlib.metadata.version('ragtrim')}"
    except importlib.metadata.PackageNotFoundError:
        return "ragtrim (not installed: run from a source tree)"


def build_parser() -> argparse.ArgumentParser:
    from ragtrim._util import docs as docs_cli
    from ragtrim._util.cli_help import HelpFormatter, epilog
    from ragtrim.scoring import cli as scoring_cli

    parser = _Parser(prog="ragtrim", description="Make RAG prompts small before they reach the model.",
                     epilog=epilog(["ragtrim trim chunks.json -q \"How tall is the tower?\" -b 800 --text",
                                    "ragtrim serve --config gateway.toml", "ragtrim audit requests.jsonl.gz",
                                    "ragtrim docs"], topic="index", extra=EXIT_CODES),
                     formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=_version(), help="print ragtrim's version and exit")
    sub: Any = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("trim", help="trim chunks: JSON or JSONL in, trimmed JSON (or --text) out",
                       epilog=epilog(TRIM_EXAMPLES, topic="budget-and-config", extra=EXIT_CODES),
                       description="Trim chunks. Input: a JSON list of chunks, one request object {query, chunks, "
                                   "budget, history}, or JSONL (one request object per line, or one chunk per "
                                   "line). JSONL requests are trimmed one by one: a bad line gives an error "
                                   'record {"error": {"type", "message"}, "line": n} in its place. Output: the '
                                   "result as JSON (kept chunks, token counts, and the trace of every removal), or "
                                   "with --text only the trimmed text.")
    p.add_argument("input", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument("-q", "--query", default="", help="the query (overridden by a request's 'query')")
    p.add_argument("-b", "--budget", type=int, default=None,
                   help="token budget for the kept chunks (default: none, only lossless stages and ranking)")
    p.add_argument("--text", action="store_true",
                   help="print only the trimmed text (the kept chunks joined by blank lines), for a shell pipe")
    p.add_argument("--tokenizer", default=None,
                   help="cl100k_base (default), gemma3 (after ragtrim prepare --tokenizer gemma3), tiktoken:<enc>, "
                        "hf:<path>, approx")
    p.add_argument("--config", default=None, help="pipeline config JSON (see Pipeline.to_dict; default: the default "
                                                   "pipeline)")
    p.add_argument("--scorer", default="auto", choices=[*STAGE_SCORER_NAMES, *SCORER_NAMES],
                   help="chunk ranking (auto: 'balanced', BM25 mixed with MiniLM over each chunk's first 128 word "
                        "pieces, when MiniLM can run, else BM25; 'fast': MiniLM over the first 10 only)")
    p.set_defaults(func=cmd_trim)

    b = sub.add_parser("bench", help="measure token savings on a requests file (default: the shipped example corpus)",
                       epilog=epilog(BENCH_EXAMPLES, extra=EXIT_CODES),
                       description="Token savings, answer recall and latency of the default pipeline, without a "
                                   "budget and at each budget, on a JSONL requests file (default: the 12 example "
                                   "requests shipped in the package). The QA benchmarks on NQ and SQuAD are in the "
                                   "repository's evaluation package (ragtrim-bench relevance qa_savings).")
    b.add_argument("--requests", default=None,
                   help='JSONL, one request a line: {"id", "query", "answers": [...], "chunks": [...]} '
                        "(default: the shipped example requests)")
    b.add_argument("--budgets", default=None, help="comma-separated token budgets (default: 500,1000)")
    b.add_argument("--limit", type=int, default=None, help="only the first N requests (default: all)")
    b.add_argument("--tokenizer", default=None, help="the token counter, as for trim (default: cl100k_base)")
    b.add_argument("--config", default=None, help="pipeline config JSON (default: the default pipeline)")
    b.add_argument("--scorer", default="auto", choices=[*STAGE_SCORER_NAMES, *SCORER_NAMES],
                   help="chunk ranking, as for trim")
    b.add_argument("-o", "--output", default=None, help=f"JSON output path (default: ./{BENCH_OUTPUT})")
    b.set_defaults(func=cmd_bench)

    scoring_cli.add_cli(sub)  # each package registers its own subcommands
    serve_cli.add_cli(sub)
    vectors_cli.add_cli(sub)
    for add_cli, run_cli in ((plan_cli.add_cli, plan_cli.run_cli), (audit_cli.add_cli, audit_cli.run_cli),
                             (gate_cli.add_cli, gate_cli.run_cli)):
        before = set(sub.choices)
        add_cli(sub)
        for name in set(sub.choices) - before:
            if sub.choices[name].get_default("func") is None:
                sub.choices[name].set_defaults(func=run_cli)
    docs_cli.add_cli(sub)
    for command in sub.choices.values():  # one help layout: defaults beside each option, text as written
        command.formatter_class = HelpFormatter
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see EXIT_CODES). Every failure is one line on stderr."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        return int(args.func(args))
    except OutputError as exc:
        print(f"ragtrim: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_OUTPUT
    except (ConfigError, InputError, MissingDependencyError) as exc:
        print(f"ragtrim: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except RagtrimError as exc:
        print(f"ragtrim: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_REQUEST_FAILED
    except BrokenPipeError:
        return EXIT_OK
    except SystemExit as exc:  # argparse: --help (0) or a usage error (already printed, one line)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        print("ragtrim: error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence: one line, never a traceback
        print(f"ragtrim: error: internal error, please report it: {type(exc).__name__}: {_one_line(exc)}",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
