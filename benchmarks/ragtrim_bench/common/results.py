"""Where results go and how they are written: ``benchmarks/results/<topic>/``, one JSON per run with the command
that produced it and the host it ran on.

The results folder is ``benchmarks/results`` of the checkout that holds this package (found from the package's own
location), or ``$RAGTRIM_BENCH_RESULTS`` when set (needed when the package is installed outside a checkout).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim_bench.common.host import host_metadata, load_average

RESULTS_ENV = "RAGTRIM_BENCH_RESULTS"
PACKAGE = "ragtrim_bench"


def results_root() -> Path:
    """``$RAGTRIM_BENCH_RESULTS``, else ``results/`` beside the evaluation package's ``pyproject.toml``."""
    env = os.environ.get(RESULTS_ENV)
    if env:
        return Path(env)
    project = Path(str(resources.files(PACKAGE))).parent
    if not (project / "pyproject.toml").is_file():
        raise ConfigError(f"{PACKAGE} is not inside a checkout ({project} has no pyproject.toml); set {RESULTS_ENV} "
                          "to the folder the results should go to")
    return project / "results"


def topic_and_name(module: str) -> tuple[str, str]:
    """``ragtrim_bench.<topic>.<name>`` -> ``(topic, name)``."""
    parts = module.split(".")
    if len(parts) != 3 or parts[0] != PACKAGE:
        raise ConfigError(f"a benchmark module is named {PACKAGE}.<topic>.<name>, got {module!r}")
    return parts[1], parts[2]


def result_path(module: str, suffix: str = "", ext: str = ".json") -> Path:
    """The default output of a benchmark: ``<results>/<topic>/<name><suffix><ext>``."""
    topic, name = topic_and_name(module)
    return results_root() / topic / f"{name}{suffix}{ext}"


def command_line(module: str, argv: Sequence[str] | None = None) -> str:
    """The command that reruns a benchmark: ``ragtrim-bench <topic> <name> <args>`` (``argv``: its arguments, the
    process's own when None)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join(["ragtrim-bench", *topic_and_name(module), *args])


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when inside it (how results and reports name their inputs), else
    absolute."""
    resolved = path.resolve()
    cwd = Path.cwd().resolve()
    return str(resolved.relative_to(cwd)) if resolved.is_relative_to(cwd) else str(resolved)


def json_safe(value: Any) -> Any:
    """NaN and infinity become null (strict JSON); tuples become lists; mapping keys become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write_result(path: Path, result: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, command: str,
                 packages: Sequence[str] = ()) -> Path:
    """Write one run's result as JSON: the result's own keys, then ``command`` and ``host``. A list of rows is
    kept under ``rows``. Returns the path."""
    body: dict[str, Any] = dict(result) if isinstance(result, Mapping) else {"rows": list(result)}
    for key in ("command", "host"):
        if key in body:
            raise ConfigError(f"a result may not set {key!r} itself: write_result records it")
    body.update(command=command, host=host_metadata(packages))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(body), indent=1) + "\n", encoding="utf-8")
    return path


def write_and_report(module: str, argv: Sequence[str] | None, output: Path | None, result: Mapping[str, Any], *,
                     report: str | None = None, packages: Sequence[str] = ()) -> Path:
    """Print ``report`` (when given), write ``result`` to ``output`` (else the module's default path) with the
    command that reruns it, and say where; returns the path."""
    if report is not None:
        print(report)
    out = write_result(output or result_path(module), result, command=command_line(module, argv), packages=packages)
    print(f"wrote {out}")
    return out


def measure_and_write(module: str, argv: Sequence[str] | None, output: Path | None, config: Mapping[str, Any],
                      measure: Callable[[], Any], report: Callable[[Mapping[str, Any]], str],
                      packages: Sequence[str] = ()) -> Path:
    """Run ``measure()`` between two readings of the load average, write ``config`` and its ``results`` (to
    ``output``, else the module's default path, with the command that reruns it) and print ``report`` of them."""
    start = load_average()
    result = {**config, "load_average_at_start": start, "results": measure(), "load_average_at_end": load_average()}
    out = write_result(output or result_path(module), result, command=command_line(module, argv), packages=packages)
    print(report(result))
    print(f"wrote {out}")
    return out


def write_with_plot(result: Mapping[str, Any], output: str | Path,
                    plot: Callable[[], Callable[[Mapping[str, Any], Path], Any]]) -> tuple[Path, Path | None]:
    """A matrix-style result as JSON at ``output`` and its plot beside it (same stem, .png). ``plot`` imports and
    returns the plotting function; the PNG is None when that import fails (matplotlib missing)."""
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(result), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    png: Path | None = path.with_suffix(".png")
    try:
        plot()(result, png)  # type: ignore[arg-type]
    except ImportError:
        png = None
    return path, png


def comma_names(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")``: a comma-separated option's names."""
    return tuple(n.strip() for n in text.split(",") if n.strip())
