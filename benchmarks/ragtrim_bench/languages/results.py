"""Writing a language benchmark's JSON: the numbers with the command that produced them and where it ran."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path("benchmarks") / "results" / "languages"


def write(path: str | os.PathLike[str], payload: dict[str, Any], *, module: str,
          argv: Sequence[str] | None) -> Path:
    """``payload`` plus the command that made it (``python -m module argv``; ``argv`` None: this process's
    arguments), the date, the host and its load, as indented JSON at ``path``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    args = list(sys.argv[1:] if argv is None else argv)
    meta = {"command": shlex.join(["python", "-m", module, *args]),
            "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}",
            "load_average_1_5_15": [round(x, 2) for x in load],
            "note": "timings are provisional on a shared 2-core machine: compare ratios measured in one run"}
    out.write_text(json.dumps({**meta, **payload}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
