"""Facts read from the GPU runs' raw logs, which stay out of the repository: per log, the largest CUDA-graph capture
size, the engine's init and compile times, the driver's one-line run summaries and the first error lines.

The raw logs come back from a GPU run beside the suites' JSON (``gpu_suite_*_logs.tar.gz`` from ``gpu suites``,
``*.log`` from the driver scripts); this summary of them is what is committed, and ``gpu report`` reads the capture
sizes from it.
Run: ragtrim-bench gpu engine_logs DIR [DIR ...]  -> benchmarks/results/gpu/engine_logs.json
"""

from __future__ import annotations

import argparse
import re
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import command_line, result_path, shown_path, write_result

_CAPTURE = re.compile(r"max_cudagraph_capture_size': (\d+)")
_INIT = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s")
_COMPILE = re.compile(r"torch\.compile took ([\d.]+) s in total")
_ERROR = re.compile(r"\b(Error|Traceback|CUDA error|RuntimeError)\b")
_DRIVER = "[run_gpu]"
MAX_ERROR_LINES = 3
MAX_LINE_CHARS = 300


def log_facts(text: str) -> dict[str, Any]:
    """What one log says about its engine (absent facts are None or empty)."""
    capture = [int(m) for m in _CAPTURE.findall(text)]
    errors = [line.strip()[:MAX_LINE_CHARS] for line in text.splitlines() if _ERROR.search(line)]
    init = [float(m) for m in _INIT.findall(text)]
    compile_s = [float(m) for m in _COMPILE.findall(text)]
    return {
        "lines": text.count("\n") + (1 if text and not text.endswith("\n") else 0),
        "max_cudagraph_capture_size": max(capture) if capture else None,
        "init_engine_s": init,
        "torch_compile_s": compile_s,
        "driver_lines": [line.strip()[:MAX_LINE_CHARS] for line in text.splitlines() if line.startswith(_DRIVER)],
        "error_lines": errors[:MAX_ERROR_LINES],
        "error_line_count": len(errors),
    }


def logs_in(folder: Path) -> Iterator[tuple[str, str]]:
    """``(name, text)`` of every log below ``folder``: plain ``*.log`` files and the members of ``*_logs.tar.gz``
    (named ``<archive>:<member>``), relative to ``folder``'s parent so the run folder stays in the name."""
    base = folder.parent
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path) as tar:
                for member in sorted(tar.getmembers(), key=lambda m: m.name):
                    extracted = tar.extractfile(member) if member.isfile() else None
                    if extracted is not None:
                        yield f"{rel}:{member.name}", extracted.read().decode("utf-8", "replace")
        elif path.suffix == ".log" and path.is_file():
            yield rel, path.read_text(encoding="utf-8", errors="replace")


def summarize_logs(folders: Sequence[Path]) -> dict[str, Any]:
    return {"benchmark": "gpu_engine_logs", "folders": [shown_path(f) for f in folders],
            "logs": {name: log_facts(text) for folder in folders for name, text in logs_in(folder)}}


def cudagraph_max_tokens(summary: dict[str, Any], log: str) -> int | None:
    """The largest CUDA-graph capture size recorded for ``log`` (``<archive>:<member>``), None when unknown."""
    facts = summary.get("logs", {}).get(log)
    return facts.get("max_cudagraph_capture_size") if facts else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding the raw logs of GPU runs")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/gpu/engine_logs.json")
    args = parser.parse_args(argv)
    summary = summarize_logs(args.folders)
    out = write_result(args.output or result_path(__spec__.name), summary, command=command_line(__spec__.name, argv))
    for name, facts in summary["logs"].items():
        print(f"{name}: capture {facts['max_cudagraph_capture_size']}, init {facts['init_engine_s']}, "
              f"errors {facts['error_line_count']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
