"""Command-line glue: ``ragtrim serve`` and ``ragtrim serve-fake-upstream`` (arguments live in ragtrim/cli.py so
that ``ragtrim --help`` works without the extra)."""

from __future__ import annotations

import argparse
import sys


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ragtrim.serve.app import create_app
    from ragtrim.serve.config import load_config

    config = load_config(args.config)
    _log_to_stderr()
    # Parsing, counting and trimming run in worker threads; a 1 ms switch interval (Python's default is 5 ms)
    # hands the interpreter lock back to the event loop sooner while they run, so small requests and probes
    # wait less behind a large one (benchmarks/ragtrim_bench/serve_hostile.py).
    sys.setswitchinterval(0.001)
    app = create_app(config, config_path=args.config)  # SIGHUP re-reads this file
    print(f"ragtrim serve: {args.host}:{args.port} -> {config.upstream.url} "
          f"({len(config.keys) or 'no'} keys, state {config.limits.state.split('@')[-1]})", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.access_log,
                timeout_graceful_shutdown=5)
    return 0


def run_fake_upstream(args: argparse.Namespace) -> int:
    from ragtrim.serve.fake_upstream import run_from_args

    return run_from_args(args)


def _log_to_stderr() -> None:
    """The gateway's own log lines (config reloads, internal errors) on stderr beside uvicorn's."""
    import logging
    import sys

    log = logging.getLogger("ragtrim.serve")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
