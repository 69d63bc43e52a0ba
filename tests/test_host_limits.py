"""The default ``trim()`` on hosts that refuse writes: a read-only cache folder (a real read-only bind mount, as in a
container), no home directory, a full disk (RLIMIT_FSIZE). Each degrades with one warning to what still works
(vectors in memory), and the trim's result is the one a writable host gives."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

TRIM = textwrap.dedent(
    """
    import sys, ragtrim
    from ragtrim.vectors.store import flush_stores
    r = ragtrim.trim(["The Eiffel Tower is 330 metres tall.", "Paris is the capital of France.",
                      "Gustave Eiffel's company built the tower in 1889."],
                     query="How tall is the Eiffel Tower?", budget=20, scorer=sys.argv[1])
    flush_stores(10)  # the store writes on ragtrim's I/O thread: let a failing write happen before the exit
    print(r.text)
    """)
ANSWER = "The Eiffel Tower is 330 metres tall."


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAGTRIM_VECTOR_STORE", "RAGTRIM_CACHE_DIR", "XDG_CACHE_HOME", "RAGTRIM_QUIET")}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


def _run(argv: Sequence[str], env: dict[str, str], preexec: Callable[[], None] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=300, check=False,
                          preexec_fn=preexec)


def _read_only(folder: Path, command: Sequence[str]) -> list[str]:
    """``command`` run with ``folder`` mounted read-only (a user and mount namespace: no root needed)."""
    quoted = " ".join(f"'{c}'" for c in command)
    return ["unshare", "-rm", "sh", "-c",
            f"mount --bind '{folder}' '{folder}' && mount -o remount,bind,ro '{folder}' && exec {quoted}"]


def _can_mount_read_only(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(_read_only(probe, ["touch", str(probe / "x")]), capture_output=True, text=True,
                          timeout=30, check=False)
    return "Read-only file system" in done.stderr


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "passage-vector store" in line]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "trim.py"
    path.write_text(TRIM, encoding="utf-8")
    return path


@pytest.mark.model
class TestDefaultTrim:
    """The default scorer (int8 MiniLM through ONNX Runtime) and its default vector store in the cache folder."""

    def test_read_only_cache_folder(self, tmp_path: Path, script: Path) -> None:
        if not _can_mount_read_only(tmp_path):
            pytest.skip("no user namespaces here to mount a folder read-only")
        cache = tmp_path / "cache"
        cache.mkdir()
        done = _run(_read_only(cache, [sys.executable, str(script), "auto"]), _env(RAGTRIM_CACHE_DIR=str(cache)))
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == ANSWER
        (warning,) = _warnings(done.stderr)
        assert "Read-only file system" in warning or "unable to open" in warning, warning
        assert "RAGTRIM_VECTOR_STORE=off" in warning and list(cache.iterdir()) == []

    def test_no_home_directory(self, tmp_path: Path) -> None:
        """No $HOME and no passwd entry (an arbitrary container user): no cache folder, vectors in memory."""
        code = ("import pwd\ndef _no_entry(*a):\n    raise KeyError('no such user')\npwd.getpwuid = _no_entry\n"
                + TRIM)
        env = {k: v for k, v in _env().items() if k != "HOME"}
        done = _run([sys.executable, "-c", code, "auto"], env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == ANSWER
        (warning,) = _warnings(done.stderr)
        assert "home directory cannot be determined" in warning and "RAGTRIM_CACHE_DIR" in warning

    def test_full_disk(self, tmp_path: Path, script: Path) -> None:
        def small_files() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # Python ignores SIGXFSZ: writes fail EFBIG

        done = _run([sys.executable, str(script), "auto"], _env(RAGTRIM_CACHE_DIR=str(tmp_path / "cache")),
                    small_files)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == ANSWER
        (warning,) = _warnings(done.stderr)
        assert "failed" in warning

    def test_writable_cache_announces_the_store_once(self, tmp_path: Path, script: Path) -> None:
        env = _env(RAGTRIM_CACHE_DIR=str(tmp_path / "cache"))
        first, second = (_run([sys.executable, str(script), "auto"], env) for _ in range(2))
        assert first.returncode == second.returncode == 0, first.stderr + second.stderr
        assert first.stdout == second.stdout and first.stdout.splitlines()[0] == ANSWER
        created = (f"ragtrim: created the passage-vector store {tmp_path / 'cache' / 'vectors.sqlite3'} (at most "
                   "256 MiB; passages seen again need no model pass; RAGTRIM_VECTOR_STORE=off keeps none)")
        assert [line for line in first.stderr.splitlines() if line.startswith("ragtrim: ")] == [created]
        assert second.stderr == ""


class TestCoreInstall:
    """BM25 (the core install's default) writes nothing anywhere, so a read-only host changes nothing."""

    def test_read_only_cache_folder_no_warning(self, tmp_path: Path, script: Path) -> None:
        if not _can_mount_read_only(tmp_path):
            pytest.skip("no user namespaces here to mount a folder read-only")
        cache = tmp_path / "cache"
        cache.mkdir()
        done = _run(_read_only(cache, [sys.executable, str(script), "bm25"]), _env(RAGTRIM_CACHE_DIR=str(cache)))
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == ANSWER and done.stderr == ""
