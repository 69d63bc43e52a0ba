"""The README's "gateway in ten lines" runs as written: its shell block (the fake upstream, the config, ``ragtrim
serve``) in a fresh folder, then its Python block through the official ``openai`` SDK. Only the ports change, to
free ones, so that parallel runs do not collide."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section_blocks(heading: str) -> dict[str, str]:
    section = README.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r"^```(\w+)\n(.*?)^```", section, re.DOTALL | re.MULTILINE)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not become ready in {deadline_s} s")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    blocks = _section_blocks("The gateway in ten lines")
    upstream, port = _free_port(), _free_port()
    shell = blocks["bash"].replace("8001", str(upstream)).replace("8080", str(port))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen(["bash", "-euc", shell], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/health/readiness")
        yield port, blocks
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the block's servers run in its own process group
        out, _ = proc.communicate(timeout=30)
        assert "Traceback" not in out, out


def test_the_readme_gateway_answers_the_openai_sdk(gateway: tuple[int, dict[str, str]]) -> None:
    port, blocks = gateway
    code = blocks["python"].replace("8080", str(port))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    first, answer = run.stdout.splitlines()[:2]
    before, after = (int(n) for n in first.split(" -> "))
    assert 0 < after < before, run.stdout  # the duplicate and the HTML chrome are gone
    assert answer.strip(), run.stdout
