"""Keep vLLM and the gateways off each other's cores: pin every thread of the running ``vllm serve`` (its own process
session) to half of the host's physical cores, and print the other half for ``taskset -c``.

Hyperthread siblings stay together (``/sys/devices/system/cpu/cpu*/topology/thread_siblings_list``), so a gateway
thread never shares a physical core with a vLLM thread. Used by ``run_e2e.sh latency`` with ``PIN_SPLIT=1``:

    python3 -m ragtrim_bench.gpu.cpu_split            # prints "<vLLM's CPUs> <the rest>", e.g. "0-3,8-11 4-7,12-15"

Exits 1, pinning nothing, when no ``vllm serve`` process runs or the host has fewer than two physical cores.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

CPU_ROOT = Path("/sys/devices/system/cpu")
PROC = Path("/proc")


def parse_cpu_list(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``; ValueError on anything else."""
    out: list[int] = []
    for part in text.strip().split(","):
        lo, sep, hi = part.partition("-")
        out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    return out


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The shortest ``taskset -c`` list of ``cpus`` (runs as ranges)."""
    ordered = sorted(set(cpus))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)


def physical_cores(allowed: Sequence[int], siblings: dict[int, str]) -> list[tuple[int, ...]]:
    """The allowed CPUs grouped by physical core (``siblings``: CPU -> its ``thread_siblings_list``), in order of
    each core's first CPU; a CPU with no topology entry is a core of its own."""
    cores: dict[tuple[int, ...], None] = {}
    allowed_set = set(allowed)
    for cpu in sorted(allowed_set):
        group = tuple(c for c in parse_cpu_list(siblings[cpu]) if c in allowed_set) if cpu in siblings else (cpu,)
        cores[group or (cpu,)] = None
    return list(cores)


def split_cores(cores: Sequence[tuple[int, ...]]) -> tuple[list[int], list[int]]:
    """The first half of the physical cores (rounded down, at least one) and the rest, as CPU lists."""
    if len(cores) < 2:
        raise ValueError(f"{len(cores)} physical core(s): nothing to split")
    half = len(cores) // 2
    return [c for core in cores[:half] for c in core], [c for core in cores[half:] for c in core]


def _siblings(cpus: Iterable[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for cpu in cpus:
        path = CPU_ROOT / f"cpu{cpu}" / "topology" / "thread_siblings_list"
        try:
            out[cpu] = path.read_text(encoding="ascii")
        except OSError:
            continue
    return out


def vllm_processes() -> list[int]:
    """Every process in the session of a running ``vllm serve`` (the server, its engine and their helpers)."""
    sessions: set[int] = set()
    members: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            sid = os.getsid(pid)
        except OSError:  # the process ended meanwhile, or is not ours to read
            continue
        members[pid] = sid
        if b"vllm" in b" ".join(argv[:3]).lower() and b"serve" in argv:
            sessions.add(sid)
    own = os.getsid(0)
    return sorted(pid for pid, sid in members.items() if sid in sessions and sid != own)


def pin(pids: Iterable[int], cpus: Sequence[int]) -> int:
    """Pin every thread of ``pids`` to ``cpus``; the number of threads pinned (threads that ended meanwhile are
    skipped)."""
    pinned = 0
    for pid in pids:
        try:
            tids = [int(t.name) for t in (PROC / str(pid) / "task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                continue
            pinned += 1
    return pinned


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    allowed = sorted(os.sched_getaffinity(0))
    try:
        vllm_cpus, rest = split_cores(physical_cores(allowed, _siblings(allowed)))
    except ValueError as exc:
        print(f"cpu_split: {exc}", file=sys.stderr)
        return 1
    pids = vllm_processes()
    if not pids:
        print("cpu_split: no vllm serve process runs", file=sys.stderr)
        return 1
    threads = pin(pids, vllm_cpus)
    print(f"cpu_split: {threads} threads of {len(pids)} vLLM processes on CPUs {format_cpu_list(vllm_cpus)}",
          file=sys.stderr)
    print(format_cpu_list(vllm_cpus), format_cpu_list(rest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
