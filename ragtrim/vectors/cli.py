"""``ragtrim index CORPUS``: its arguments (registered by ``add_cli``, light to import) and the run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ragtrim._util.cli_help import epilog


def add_cli(sub: Any) -> None:
    """Add ``index`` to the ``ragtrim`` command's subparsers."""
    from ragtrim.scoring.registry import SCORER_NAMES

    p = sub.add_parser(
        "index", help="fill the passage-vector store ahead of time, so that trims of these passages need no model "
                      "pass",
        epilog=epilog(["ragtrim index corpus/                  # every .jsonl and text file under corpus/",
                       "ragtrim index passages.jsonl --title-field title --store redis://cache:6379/0",
                       "ragtrim index shards/*.jsonl --engine ray --store redis://cache:6379/0   # on a Ray cluster"],
                      topic="relevance"),
        description="Embed every passage of CORPUS with the model(s) of the scorer that will read them (default: "
                    "the auto scorer, as trim() uses) and store the vectors the store lacks. CORPUS: .jsonl files "
                    "(one passage a line: a string or an object with a text field), other files (one passage "
                    "each) or folders of them. Passages must be the chunk texts your retriever returns.")
    p.add_argument("corpus", nargs="+", help="JSONL or text files, or folders; - or /dev/stdin: JSONL on stdin")
    p.add_argument("--scorer", default="auto", choices=["auto", *SCORER_NAMES],
                   help="the scorer whose vectors to store (default: auto, what trim() uses on this host)")
    p.add_argument("--store", default=None,
                   help="a file path or redis:// URL (default: $RAGTRIM_VECTOR_STORE, else "
                        "~/.cache/ragtrim/vectors.sqlite3)")
    p.add_argument("--max-mb", default=None, help="the store's bound in MiB, from 1 to 1048576 (default 256)")
    p.add_argument("--text-field", default=None, help="the JSONL key holding the text (default: text, "
                                                       "page_content, content, contents or passage)")
    p.add_argument("--title-field", default=None, help='a JSONL key whose value goes first: "title\\ntext"')
    p.add_argument("--batch-size", type=int, default=256, help="passages embedded per model call")
    p.add_argument("--no-html-cleanup", action="store_true",
                   help="store markup as given (default: under the HTML stage's cleaned text, which trims embed)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    from ragtrim.engines.options import add_engine_args

    add_engine_args(p, "batches (--batch-size passages each)")
    p.set_defaults(func=run_index)


def run_index(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ragtrim.errors import ConfigError, InputError
    from ragtrim.vectors.index import STDIN_NAMES, index_passages, read_corpus
    from ragtrim.vectors.store import (
        configure_default_store,
        default_store_spec,
        open_store,
        store_size_bytes,
    )

    max_bytes = store_size_bytes(args.max_mb, source="--max-mb") if args.max_mb is not None else None
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {args.batch_size}")
    for raw in args.corpus:  # a usage error before anything is resolved or opened (the files are read lazily)
        if raw not in STDIN_NAMES and not Path(raw).exists():
            raise InputError(f"corpus file {raw!r} does not exist")
    if args.store is not None or max_bytes is not None:
        spec = args.store if args.store is not None else default_store_spec()[0]
        configure_default_store(spec, max_bytes=max_bytes)
    shared = open_store("default")
    location = shared.store.location if shared is not None else "off"
    passages = read_corpus(args.corpus, text_field=args.text_field, title_field=args.title_field)
    with tqdm(desc="ragtrim index", unit=" passages", disable=args.quiet, file=sys.stderr) as bar:
        if args.engine == "ray":
            from ragtrim.engines.ray_index import run_ray_index_cli

            report = run_ray_index_cli(args, progress=bar.update)
        else:
            report = index_passages(passages, scorer=args.scorer, batch_size=args.batch_size,
                                    clean_html=not args.no_html_cleanup, progress=bar.update)
    print(json.dumps({"store": location, **report.to_dict()}))
    return 0
