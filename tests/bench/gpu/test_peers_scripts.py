"""The peers GPU run's shell side: ``session_peers.sh`` takes the staged chunks and refuses to run on a bundle that
is incomplete or corrupt, or without the GGUF the vLLM staging writes, before it installs or runs anything."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "benchmarks" / "ragtrim_bench" / "gpu"
SESSION = SCRIPTS / "session_peers.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def stage(root: Path, chunks: list[bytes]) -> str:
    """``.gpu/peers/p1 .. pN`` as stage_peers.sh lays them out; the bundle's checksum and count in p1."""
    sha = hashlib.sha256(b"".join(chunks)).hexdigest()
    for k, data in enumerate(chunks, 1):
        folder = root / ".gpu" / "peers" / f"p{k}"
        folder.mkdir(parents=True)
        (folder / f"chunk.{k - 1:02d}").write_bytes(data)
    (root / ".gpu" / "peers" / "p1" / "bundle.sha256").write_text(f"{sha} {len(chunks)}\n")
    return sha


def session(root: Path, *args: str, gguf: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PEERS_WORK": str(root / "pe"), "OUT": str(root / "out"),
           "PEERS_GGUF": str(gguf or root / "absent.gguf")}
    return subprocess.run(["bash", str(SESSION), *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_scripts_parse() -> None:
    for script in ("stage_peers.sh", "session_peers.sh"):
        assert subprocess.run(["bash", "-n", str(SCRIPTS / script)], check=False).returncode == 0


def test_take_copies_one_chunk(tmp_path: Path) -> None:
    stage(tmp_path, [b"a" * 10, b"b" * 5])
    done = session(tmp_path, "take", "p2")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pe" / "p2" / "chunk.01").read_bytes() == b"b" * 5
    assert not (tmp_path / "pe" / "p1").exists()


def test_run_needs_the_gguf_of_the_vllm_staging(tmp_path: Path) -> None:
    stage(tmp_path, [b"a"])
    done = session(tmp_path, "run")
    assert done.returncode == 2 and "absent.gguf is missing" in done.stdout and "gpu-setup.sh" in done.stdout


def test_run_refuses_a_missing_chunk(tmp_path: Path) -> None:
    stage(tmp_path, [b"a" * 10, b"b" * 5])
    shutil.rmtree(tmp_path / ".gpu" / "peers" / "p2")  # carried p1 only
    gguf = tmp_path / "g.gguf"
    gguf.write_bytes(b"GGUF")
    done = session(tmp_path, "run", gguf=gguf)
    assert done.returncode == 2 and "chunk p2 of 2 is missing" in done.stdout


def test_run_refuses_a_corrupt_bundle(tmp_path: Path) -> None:
    stage(tmp_path, [b"a" * 10, b"b" * 5])
    (tmp_path / ".gpu" / "peers" / "p2" / "chunk.01").write_bytes(b"c" * 5)
    gguf = tmp_path / "g.gguf"
    gguf.write_bytes(b"GGUF")
    done = session(tmp_path, "run", gguf=gguf)
    assert done.returncode == 2 and "bundle checksum differs" in done.stdout
    assert not (tmp_path / "pe" / "site").exists()  # nothing installed
