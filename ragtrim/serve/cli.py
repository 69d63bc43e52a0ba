"""``ragtrim serve`` and ``ragtrim serve-fake-upstream``: their arguments (registered by ``add_cli``, light to import,
so ``ragtrim --help`` works without the ``serve`` extra) and the runs, which need it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ragtrim._util.cli_help import epilog
from ragtrim._util.redact import redact_url
from ragtrim.errors import require

_EXTRA_PACKAGES = ("starlette", "uvicorn", "aiohttp", "prometheus_client")


def add_cli(sub: Any) -> None:
    """Add ``serve`` and ``serve-fake-upstream`` to the ``ragtrim`` command's subparsers."""
    s = sub.add_parser(
        "serve", help="OpenAI-compatible gateway that trims in flight and enforces limits (extra: serve)",
        description="Run the OpenAI-compatible gateway in front of a model server (vLLM, llama.cpp, any "
                    "/v1/chat/completions): it trims the documents of each request ([trim]), folds old turns, "
                    "enforces per-key and per-org limits ([limits], shared through Redis when several replicas run), "
                    "and serves /metrics and health probes. Needs pip install 'ragtrim[serve]'. SIGHUP re-reads "
                    "the config; SIGTERM or SIGINT drains (readiness and new requests 503, requests in flight "
                    "finish for up to [serve] drain_timeout_s, default 25 s).",
        epilog=epilog(["ragtrim serve --config gateway.toml",
                       "ragtrim serve --config gateway.toml --host 0.0.0.0 --port 8080 --log-level info",
                       "# gateway.toml: [upstream] url = \"http://127.0.0.1:8000/v1\"  [trim] budget = 0.25"],
                      topic="serve"))
    s.add_argument("--config", required=True, help="gateway TOML file")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=int, default=8080, help="port to listen on")
    s.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn's and the gateway's log level")
    s.add_argument("--access-log", action="store_true", help="uvicorn's access log (off: it costs throughput)")
    s.set_defaults(func=run_serve)

    f = sub.add_parser(
        "serve-fake-upstream", help="a fake OpenAI-compatible model server whose prefill time grows with the prompt "
                                    "(for tests and benchmarks)",
        description="A fake OpenAI-compatible model server (chat, completions, models): it waits a prefill time "
                    "that grows with the prompt's tokens, then streams a few tokens. For trying the gateway and "
                    "measuring it without a GPU.",
        epilog=epilog(["ragtrim serve-fake-upstream --port 8001 &",
                       "ragtrim serve --config gateway.toml   # with [upstream] url = \"http://127.0.0.1:8001/v1\""],
                      topic="serve"))
    add_fake_upstream_args(f)
    f.set_defaults(func=run_fake_upstream)


def add_fake_upstream_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``ragtrim serve-fake-upstream``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8001, help="port to listen on")
    parser.add_argument("--base-ms", type=float, default=20.0, help="prefill floor per request (ms)")
    parser.add_argument("--per-1k-ms", type=float, default=37.0, help="prefill ms per 1,000 prompt tokens")
    parser.add_argument("--decode-ms", type=float, default=0.0, help="ms between output tokens")
    parser.add_argument("--output-tokens", type=int, default=8, help="tokens each answer streams")
    parser.add_argument("--slots", type=int, default=0, help="requests processed at once (0: unlimited)")
    parser.add_argument("--fail-status", type=int, default=0, help="answer every request with this HTTP status "
                                                                  "(0: answer normally)")
    parser.add_argument("--answers", default=None, help="a golden set (JSONL, ragtrim gate): reply to each question "
                                                        "with its first accepted answer (a reader for testing gates)")
    parser.add_argument("--wrong-share", type=float, default=0.0, help="with --answers: this share of the "
                                                                       "questions get a wrong reply")
    parser.add_argument("--needs-evidence", action="store_true", help="with --answers: answer only when the gold "
                                                                      "answer is in the prompt (else unanswerable)")
    parser.add_argument("--max-model-len", type=int, default=0, help="refuse (400) a prompt whose tokens plus "
                                                                     "max_tokens exceed this (0: no limit)")
    parser.add_argument("--models-ms", type=float, default=0.0, help="GET /v1/models answers after this long (ms)")


def _require_extra() -> None:
    for package in _EXTRA_PACKAGES:
        require(package, "serve", "ragtrim serve")


def run_serve(args: argparse.Namespace) -> int:
    _require_extra()

    from ragtrim.serve.config import load_config

    _redact_output()
    _log_to_stderr()  # before the config is read: its warnings go out as the gateway's log lines
    config = load_config(args.config)
    # Parsing, counting and trimming run in worker threads; a 1 ms switch interval (Python's default is 5 ms)
    # hands the interpreter lock back to the event loop sooner while they run, so small requests and probes
    # wait less behind a large one (benchmarks/ragtrim_bench/serve_hostile.py).
    sys.setswitchinterval(0.001)
    from ragtrim.serve.app import Gateway
    from ragtrim.serve.drain import serve_with_drain

    gateway = Gateway(config, config_path=args.config)  # SIGHUP re-reads this file
    gateway.check_state_servers()
    app = gateway.app()
    print(f"ragtrim serve: {args.host}:{args.port} -> {redact_url(config.upstream.url)} "
          f"({len(config.keys) or 'no'} keys, state {redact_url(config.limits.state)})", flush=True)
    # SIGTERM and SIGINT drain: requests in flight finish for up to serve.drain_timeout_s (ragtrim.serve.drain).
    serve_with_drain(app, gateway.drain, host=args.host, port=args.port, log_level=args.log_level,
                     access_log=args.access_log)
    return 0


def run_fake_upstream(args: argparse.Namespace) -> int:
    _require_extra()
    import uvicorn

    from ragtrim.testing import FakeUpstreamConfig, create_fake_app, golden_answers, golden_evidence

    answers = evidence = None
    if args.answers:
        from ragtrim.gate.golden import load_golden

        items = load_golden(args.answers)
        answers = golden_answers(items)
        evidence = golden_evidence(items) if args.needs_evidence else None
    app = create_fake_app(FakeUpstreamConfig(base_ms=args.base_ms, per_1k_ms=args.per_1k_ms,
                                             decode_ms=args.decode_ms, output_tokens=args.output_tokens,
                                             slots=args.slots, fail_status=args.fail_status, answers=answers,
                                             wrong_share=args.wrong_share, evidence=evidence,
                                             max_model_len=args.max_model_len, models_ms=args.models_ms))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def _redact_output() -> None:
    """Everything this process prints passes the one redaction function, whoever prints it (uvicorn, asyncio, a
    traceback of an uncaught exception, a warning): the config's keys and passwords never reach a terminal or a log
    collector."""
    from ragtrim._util.redact import RedactingStream

    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)


def _log_to_stderr() -> None:
    """The gateway's own log lines (config reloads, internal errors) on stderr beside uvicorn's."""
    import logging

    from ragtrim._util.redact import get_logger, redact_logger

    log = get_logger(__package__)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        redact_logger(logging.getLogger(name))
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
