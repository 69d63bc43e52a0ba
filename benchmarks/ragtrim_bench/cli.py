"""``ragtrim-bench <topic> <name> [args]``: run one benchmark of the evaluation package, the same as
``python -m ragtrim_bench.<topic>.<name> [args]``.

A benchmark is a module ``ragtrim_bench/<topic>/<name>.py`` with a top-level ``main(argv)``; ``ragtrim-bench`` alone
lists them by topic, ``ragtrim-bench <topic>`` lists one topic's. Results go to ``benchmarks/results/<topic>/``
(``ragtrim_bench.common.results``). A ragtrim error is one line on stderr (exit 2: bad input or a missing extra,
else 1).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import cast

from ragtrim.errors import ConfigError, InputError, MissingDependencyError, RagtrimError

PACKAGE = "ragtrim_bench"
SUMMARY_CHARS = 96
USAGE = "usage: ragtrim-bench <topic> <name> [args]   (ragtrim-bench [<topic>] lists them)"


def _summary(path: Path) -> str | None:
    """The first docstring line of a module with a top-level ``main``; None for a module that is not a benchmark."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
        return None
    first = " ".join((ast.get_docstring(tree) or "").split("\n\n")[0].split())
    return first if len(first) <= SUMMARY_CHARS else first[: SUMMARY_CHARS - 3].rstrip() + "..."


def benchmarks() -> dict[str, dict[str, str]]:
    """``{topic: {name: first docstring line}}`` of every benchmark, read from the source (nothing imported)."""
    root = Path(str(resources.files(PACKAGE)))
    found: dict[str, dict[str, str]] = {}
    for folder in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
        names = {p.stem: s for p in sorted(folder.glob("*.py")) if not p.stem.startswith("_")
                 and (s := _summary(p)) is not None}
        if names:
            found[folder.name] = names
    return found


def listing(topic: str | None = None) -> str:
    lines = [USAGE, ""]
    for t, names in benchmarks().items():
        if topic is None or t == topic:
            lines.append(f"{t}:")
            lines += [f"  {name:22s} {summary}" for name, summary in names.items()]
    return "\n".join(lines)


def resolve(topic: str, name: str) -> Callable[[Sequence[str]], int | None]:
    """The ``main`` of ``ragtrim_bench.<topic>.<name>``; ConfigError naming the choices when there is none."""
    known = benchmarks()
    if topic not in known:
        raise ConfigError(f"no benchmark topic {topic!r}; topics: {', '.join(known)}")
    if name not in known[topic]:
        raise ConfigError(f"no benchmark {name!r} in {topic}; choose from: {', '.join(known[topic])}")
    module = importlib.import_module(f"{PACKAGE}.{topic}.{name}")
    return cast(Callable[[Sequence[str]], "int | None"], module.main)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args or args[0] in ("-h", "--help", "list"):
            print(listing())
            return 0
        if len(args) == 1 or args[1] in ("-h", "--help"):
            if args[0] not in benchmarks():
                raise ConfigError(f"no benchmark topic {args[0]!r}; topics: {', '.join(benchmarks())}")
            print(listing(args[0]))
            return 0
        run = resolve(args[0], args[1])
        sys.argv = [f"ragtrim-bench {args[0]} {args[1]}", *args[2:]]  # argparse's prog and the recorded command
        return int(run(args[2:]) or 0)
    except (ConfigError, InputError, MissingDependencyError) as exc:
        print(f"ragtrim-bench: error: {exc}", file=sys.stderr)
        return 2
    except RagtrimError as exc:
        print(f"ragtrim-bench: error: {exc}", file=sys.stderr)
        return 1
