"""The ``ragtrim-bench`` command (also ``python -m ragtrim_bench``): evaluation tools that are not ``ragtrim bench``.

``prepare-model`` writes the Gemma 3 270M model directory and the dummy 4B/12B/27B configs for the GPU harness
(docs/model-prep.md). The QA savings benchmark runs as ``python -m benchmarks.qa_savings``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ragtrim.errors import ConfigError, InputError, MissingDependencyError, RagtrimError
from ragtrim_bench import model_prep


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragtrim-bench", description="ragtrim's evaluation tools")
    sub = parser.add_subparsers(dest="command", required=True)
    model_prep.add_cli(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a subcommand; a ragtrim error is one line on stderr (exit 2: bad input or a missing extra, else 1)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ConfigError, InputError, MissingDependencyError) as exc:
        print(f"ragtrim-bench: error: {exc}", file=sys.stderr)
        return 2
    except RagtrimError as exc:
        print(f"ragtrim-bench: error: {exc}", file=sys.stderr)
        return 1
