"""The processes this one started (Ray's workers among them), read from /proc: their command lines and peak memory."""

from __future__ import annotations

import os
from pathlib import Path


def descendants(root: int | None = None) -> dict[int, str]:
    """pid -> command line of every process below ``root`` (default: this one). Ray names a worker's process after
    what it runs: ``ray::MapWorker(MapBatches(ShardAuditor)).submit`` while an actor works on a batch."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: dict[int, str] = {}
    todo = [os.getpid() if root is None else root]
    while todo:
        for pid in children.get(todo.pop(), []):
            try:
                out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[pid] = out[pid].strip()
            todo.append(pid)
    return out


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident memory (VmHWM), or None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None
