"""Load generation for the gateway benchmarks: a lean asyncio HTTP/1.1 client (keep-alive, chunked SSE with the
time of the first event), an open-loop Poisson driver, server start-up helpers, and pure statistics.

Standard library only, so the client's own cost stays small and measurable on a 2-core box.
"""

from __future__ import annotations

import asyncio
import math
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reply:
    """One request's outcome; ``status`` 0 means lost (connection error), -1 hung (client timeout)."""

    user: str
    status: int
    latency_ms: float
    ttft_ms: float
    sent_at_s: float
    error: str = ""


class RawClient:
    """A pool of keep-alive connections to one host:port."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        # (reader, writer, last used): connections idle longer than ``max_idle_s`` are dropped, not reused, because
        # the server may have closed them (uvicorn's keep-alive timeout is 5 s).
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        self.max_idle_s = 2.0

    async def close(self) -> None:
        for _, w, _ in self._idle:
            w.close()
        self._idle.clear()

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> tuple[int, float, float, bytes]:
        """Return (status, seconds to first body event, seconds total, body)."""
        now = time.monotonic()
        while self._idle and now - self._idle[-1][2] > self.max_idle_s:
            self._idle.pop()[1].close()
        if self._idle:
            reader, writer, _ = self._idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lines = [f"{method} {path} HTTP/1.1", f"host: {self.host}:{self.port}", f"content-length: {len(body)}",
                 "content-type: application/json"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        t0 = time.perf_counter()
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            hdrs = {}
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k:
                    hdrs[k.strip().lower()] = v.strip()
            first = 0.0
            if b"content-length" in hdrs:
                data = await reader.readexactly(int(hdrs[b"content-length"]))
                first = time.perf_counter() - t0
            elif hdrs.get(b"transfer-encoding") == b"chunked":
                parts = []
                while True:
                    size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                    if size == 0:
                        await reader.readuntil(b"\r\n")
                        break
                    chunk = (await reader.readexactly(size + 2))[:-2]
                    if not first and b"data:" in chunk:
                        first = time.perf_counter() - t0
                    parts.append(chunk)
                data = b"".join(parts)
            else:
                data = b""
            total = time.perf_counter() - t0
        except BaseException:
            writer.close()
            raise
        if hdrs.get(b"connection") == b"close":
            writer.close()
        else:
            self._idle.append((reader, writer, time.monotonic()))
        return status, first or total, total, data


async def open_loop(client: RawClient, path: str, body_of: dict[str, bytes], rate_per_s: dict[str, float],
                    duration_s: float, headers_of: dict[str, dict[str, str]], timeout_s: float,
                    seed: int = 0) -> list[Reply]:
    """Poisson arrivals per user for ``duration_s``; every request is recorded, none is dropped by the driver."""
    rng = random.Random(seed)
    replies: list[Reply] = []
    tasks: list[asyncio.Task[None]] = []
    start = time.perf_counter()

    async def one(user: str, at: float) -> None:
        t = time.perf_counter()
        try:
            status, first, total, _ = await asyncio.wait_for(
                client.request("POST", path, body_of[user], headers_of[user]), timeout=timeout_s)
            replies.append(Reply(user, status, total * 1000, first * 1000, at))
        except TimeoutError:
            replies.append(Reply(user, -1, (time.perf_counter() - t) * 1000, math.nan, at, "hung"))
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            replies.append(Reply(user, 0, (time.perf_counter() - t) * 1000, math.nan, at, repr(exc)))

    schedule: list[tuple[float, str]] = []
    for user, rate in rate_per_s.items():
        t = rng.expovariate(rate)
        while t < duration_s:
            schedule.append((t, user))
            t += rng.expovariate(rate)
    schedule.sort()
    for at, user in schedule:
        delay = start + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(user, at)))
    await asyncio.gather(*tasks)
    return replies


# -- statistics (pure) ----------------------------------------------------------------------------------------------
def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything; NaN for no values."""
    if not values:
        return math.nan
    total = sum(values)
    squares = sum(v * v for v in values)
    return 1.0 if squares == 0 else total * total / (len(values) * squares)


# -- servers --------------------------------------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_process(args: Sequence[str], ready_url: str, timeout_s: float = 60.0) -> subprocess.Popen[bytes]:
    """Start ``python -m ragtrim <args>`` and wait until ``ready_url`` answers 200."""
    return wait_ready(launch(args), args, ready_url, timeout_s)


def launch(args: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start ``python -m ragtrim <args>`` without waiting (``wait_ready`` waits): servers launched together start
    side by side."""
    return subprocess.Popen([sys.executable, "-m", "ragtrim", *args], stdout=subprocess.DEVNULL)


def wait_ready(proc: subprocess.Popen[bytes], args: Sequence[str], ready_url: str,
               timeout_s: float = 60.0) -> subprocess.Popen[bytes]:
    """Wait until ``ready_url`` answers 200 (RuntimeError when ``proc`` exits first or ``timeout_s`` passes, and
    then ``proc`` is terminated)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{' '.join(args)} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(ready_url, timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError(f"{ready_url} did not answer within {timeout_s} s")


def stop_process(proc: subprocess.Popen[bytes], *, timeout_s: float = 10.0) -> None:
    """Terminate, wait up to ``timeout_s``, then kill: a benchmark's servers never outlive it."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
