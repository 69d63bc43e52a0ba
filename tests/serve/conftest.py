"""Real servers for the gateway tests: uvicorn on free ports in threads, a fake upstream, a real redis-server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")
pytest.importorskip("uvicorn", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")
pytest.importorskip("aiohttp", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")

import httpx
import uvicorn

from ragtrim.serve.app import Gateway
from ragtrim.serve.config import parse_config
from ragtrim.testing import FakeUpstreamConfig, create_fake_app
from ragtrim_bench.serve.load import free_port


class ServerThread:
    """One ASGI app on uvicorn in a background thread (its own event loop)."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    access_log=False, lifespan="on",
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def servers() -> Iterator[list[ServerThread]]:
    started: list[ServerThread] = []
    yield started
    for s in reversed(started):
        s.stop()


@pytest.fixture
def fake(servers: list[ServerThread]) -> Callable[..., ServerThread]:
    """Start a fake upstream: ``fake(base_ms=..., slots=...)``."""

    def start(**kwargs: Any) -> ServerThread:
        s = ServerThread(create_fake_app(FakeUpstreamConfig(**kwargs))).start()
        servers.append(s)
        return s

    return start


@pytest.fixture
def gateway(servers: list[ServerThread]) -> Callable[..., tuple[ServerThread, Gateway]]:
    """Start a gateway from a config dict: ``gateway({"upstream": {"url": ...}, ...})``."""

    def start(raw: dict[str, Any]) -> tuple[ServerThread, Gateway]:
        raw = {**raw, "upstream": {"tokenizer": "whitespace", **raw["upstream"]}}
        gw = Gateway(parse_config(raw))
        s = ServerThread(gw.app()).start()
        servers.append(s)
        return s, gw

    return start


def debug_requests(upstream: ServerThread) -> list[dict[str, Any]]:
    return list(httpx.get(upstream.url + "/debug/requests").json()["requests"])


class RedisServer:
    """``extra_args``: more redis-server options (``--maxmemory 2mb``, ``--requirepass pw``, ``--unixsocket p``)."""

    def __init__(self, binary: str, *extra_args: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="ragtrim-redis-")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.binary = binary
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--daemonize", "no", *self.extra_args], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(64).startswith((b"+PONG", b"-NOAUTH")):  # up (a password-protected one says NOAUTH)
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
            c.sendall(b"FLUSHALL\r\n")
            c.recv(16)


def start_redis(*extra_args: str) -> RedisServer:
    """A real redis-server on a free port, with ``extra_args`` (the test skips when it is not installed)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server; .ci/run installs it)")
    server = RedisServer(binary, *extra_args)
    server.start()
    return server


def wait_idle(gate: Any, timeout_s: float = 3.0) -> Any:
    """Wait until a gate holds and queues nothing: a stream frees its slot just after its last byte goes out."""
    deadline = time.monotonic() + timeout_s
    while gate is not None and (gate.in_use or gate.queued) and time.monotonic() < deadline:
        time.sleep(0.02)
    return gate


def read_log(path: Any, n: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """The first ``n`` lines of a request log, waiting for them: a background thread writes the log."""
    import json
    from pathlib import Path

    deadline = time.monotonic() + timeout_s
    lines: list[str] = []
    while time.monotonic() < deadline:
        p = Path(path)
        lines = (p.read_text() if p.exists() else "").split("\n")[:-1]  # whole lines: the writer may be mid-line
        if len(lines) >= n:
            break
        time.sleep(0.02)
    return [json.loads(x) for x in lines]
