"""``ragtrim serve`` and ``ragtrim serve-fake-upstream`` as real processes; the missing-extra error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from ragtrim.cli import main
from tests.serve.conftest import free_port


def _wait_ok(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


def test_serve_and_fake_upstream_processes(tmp_path: Path) -> None:
    up_port, gw_port = free_port(), free_port()
    config = tmp_path / "gateway.toml"
    config.write_text(textwrap.dedent(f"""
        [upstream]
        url = "http://127.0.0.1:{up_port}/v1"
        [trim]
        budget = 0.5
        [keys."sk-test"]
        user = "tester"
        org = "lab"
        rpm = 100
    """))
    procs = [
        subprocess.Popen([sys.executable, "-m", "ragtrim", "serve-fake-upstream", "--port", str(up_port),
                          "--base-ms", "1", "--per-1k-ms", "1"], stderr=subprocess.PIPE),
        subprocess.Popen([sys.executable, "-m", "ragtrim", "serve", "--config", str(config), "--port", str(gw_port)],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL),
    ]
    try:
        _wait_ok(f"http://127.0.0.1:{up_port}/health", procs[0])
        _wait_ok(f"http://127.0.0.1:{gw_port}/healthz", procs[1])
        r = httpx.post(f"http://127.0.0.1:{gw_port}/v1/chat/completions",
                       json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                       headers={"authorization": "Bearer sk-test"})
        assert r.status_code == 200 and r.headers["x-ratelimit-remaining-requests"] == "99"
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


def test_bad_config_exits_2_with_the_key(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('[upstream]\nurl = "http://x/v1"\n[limits]\nrpm = 5\n')
    out = subprocess.run([sys.executable, "-m", "ragtrim", "serve", "--config", str(config)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "unknown config key 'limits.rpm'" in out.stderr


@pytest.mark.parametrize(("config", "message"), [
    ('[trim]\nvector_store_max_mb = 1e308\n', "trim.vector_store_max_mb must be a number of MiB from 1 to 1048576"),
    ('[trim]\nvector_store_max_mb = 0.01\n', "a smaller store holds too few vectors to help"),
    ('# caf\xe9\n', "is not valid UTF-8: byte 0xe9 on line 3"),
])
def test_config_errors_exit_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str,
                                          message: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_bytes(b'[upstream]\nurl = "http://x/v1"\n' + config.encode("latin-1"))
    assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_missing_extra_names_serve() -> None:
    code = textwrap.dedent("""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("starlette", "uvicorn"):
                    raise ImportError(name)
                return None
        sys.meta_path.insert(0, Block())
        import importlib.util
        real = importlib.util.find_spec
        importlib.util.find_spec = lambda n, *a: None if n in ("starlette", "uvicorn") else real(n, *a)
        import ragtrim
        from ragtrim.cli import main
        assert main(["serve", "--config", "gateway.toml"]) == 2
        try:
            import ragtrim.serve.app
        except ragtrim.MissingDependencyError as exc:
            print("ok", exc.extra)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok serve"
    assert "pip install 'ragtrim[serve]'" in out.stderr
