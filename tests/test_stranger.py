"""A stranger's path, as the README tells it: a clone, ``pip install .`` into a fresh venv, ``ragtrim --version``, the
first trim, ``ragtrim trim --text`` in a shell pipe, ``ragtrim audit`` and ``ragtrim plan`` on the example data,
``ragtrim docs`` and ``ragtrim prepare``.

Offline: the clone (the checkout's tracked and new files, as ``git clone`` of this tree would give) is installed with
the README's command plus ``--no-build-isolation --no-index --no-deps``; the dependencies come from this
environment's site-packages through a path file, with every package outside ragtrim's core and the extras the README
installs blocked (``tests/test_doc_examples.blocked_modules``), so the venv can import what such an install has and
nothing more. About 30 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_doc_examples import blocked_modules

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_EXTRAS = ("embeddings",)
"""The extras of the README's install line (checked against it below)."""
CHUNKS = ["<nav><a href='/'>Home</a></nav><p>The Eiffel Tower is 330 metres tall.</p><footer>© 2026</footer>",
          "The Eiffel Tower is 330 metres tall.", "Paris is the capital of France.",
          "Gustave Eiffel's company built the tower in 1889."]


def _tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=False, timeout=60)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    return [f for f in listed.stdout.splitlines() if (ROOT / f).is_file()]


def _clone(dest: Path) -> Path:
    for name in _tracked_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return dest


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("stranger")
    clone = _clone(tmp / "ragtrim")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    shared = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (purelib / "deps.pth").write_text("\n".join(dict.fromkeys(shared)) + "\n", encoding="utf-8")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                              "--no-build-isolation", "--no-index", "--no-deps", f".[{','.join(README_EXTRAS)}]"],
                             cwd=clone, capture_output=True, text=True, timeout=600, check=False)
    assert install.returncode == 0, install.stderr
    # From here on the venv imports what the README's install has: core, its extras and their requirements.
    blocked = blocked_modules(README_EXTRAS, ())
    (purelib / "sitecustomize.py").write_text(
        "import importlib.abc, sys\n"
        f"BLOCKED = frozenset({blocked!r})\n"
        "class _NotInstalled(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'{name} is not installed with these extras', name=name)\n"
        "sys.meta_path.insert(0, _NotInstalled())\n", encoding="utf-8")
    return {"clone": clone, "venv": venv, "work": tmp / "work"}


def _ragtrim(s: dict[str, Path], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    work = s["work"]
    work.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "RAGTRIM_VECTOR_STORE")}
    env.update(HOME=str(work / "home"), RAGTRIM_CACHE_DIR=str(work / "cache"))
    return subprocess.run([str(s["venv"] / "bin" / "ragtrim"), *args], cwd=work, input=stdin, capture_output=True,
                          text=True, env=env, timeout=600, check=False)


def test_the_readme_says_how_to_install_from_a_clone_or_a_wheel() -> None:
    first_screen = README[: README.index("## Results")]  # install, disk, the ten-line example
    assert "pip install ." in first_screen and "pip install '.[embeddings]'" in first_screen
    assert re.search(r"pip install '\./dist/ragtrim-[^']*\.whl\[embeddings\]'", first_screen)
    assert "pip install ragtrim\n" not in README and "pip install ragtrim`" not in README
    for extra in ("embeddings", "torch", "serve", "langchain", "llamaindex", "haystack"):
        assert f"`{extra}`" in first_screen, f"the install section does not name the {extra} extra"
    assert "RAGTRIM_VECTOR_STORE=off" in first_screen and "~/.cache/ragtrim" in first_screen


def test_version(stranger: dict[str, Path]) -> None:
    out = _ragtrim(stranger, "--version")
    assert out.returncode == 0 and out.stdout == "ragtrim 0.1.0\n", out.stderr


def test_first_trim_and_the_text_for_a_pipe(stranger: dict[str, Path]) -> None:
    out = _ragtrim(stranger, "trim", "-q", "How tall is the Eiffel Tower?", "-b", "30", stdin=json.dumps(CHUNKS))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["tokens_after"] <= 30 and "330 metres" in result["chunks"][0]["text"]
    assert {r["reason"] for t in result["trace"] for r in t["removals"]} >= {"boilerplate", "exact_duplicate"}
    text = _ragtrim(stranger, "trim", "-q", "How tall is the Eiffel Tower?", "-b", "12", "--text",
                    stdin=json.dumps(CHUNKS))
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == "The Eiffel Tower is 330 metres tall."
    assert not text.stdout.lstrip().startswith("{")


def test_audit_on_the_example_requests(stranger: dict[str, Path]) -> None:
    data = subprocess.run([str(stranger["venv"] / "bin" / "python"), "-c",
                           "from ragtrim.savings import example_requests; print(example_requests())"],
                          capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    out = _ragtrim(stranger, "audit", data, "--out", "audit-report")
    assert out.returncode == 0, out.stderr
    assert "12 requests" in out.stdout and "what to do first (1)" in out.stdout
    assert 'Config: trim.budget = "lossless"' in out.stdout
    report = stranger["work"] / "audit-report"
    assert (report / "audit.html").is_file() and json.loads((report / "audit.json").read_text())["breakdown"]


def test_plan(stranger: dict[str, Path]) -> None:
    config = stranger["clone"] / "tests" / "fixtures" / "configs" / "gemma-3-12b-text.json"
    out = _ragtrim(stranger, "plan", "--config", str(config), "--gpu-mem-gib", "141", "--input-p50", "2400",
                   "--input-p95", "3000", "--output-p95", "32", "--trim-ratio", "4")
    assert out.returncode == 0, out.stderr
    assert "concurrent p95 requests (governs)" in out.stdout and "--max-num-seqs" in out.stdout
    bad = _ragtrim(stranger, "plan", "--config", "nope.json", "--gpu-mem-gib", "141", "--input-p95", "3",
                   "--output-p95", "3")
    assert bad.returncode == 2 and bad.stderr.startswith("ragtrim: error: ") and bad.stderr.count("ragtrim:") == 1


def test_the_guide_and_prepare(stranger: dict[str, Path]) -> None:
    docs = _ragtrim(stranger, "docs", "serve")
    assert docs.returncode == 0 and docs.stdout == (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")
    prepare = _ragtrim(stranger, "prepare")
    assert prepare.returncode == 0, prepare.stderr
    assert "scorer='auto' on this host" in prepare.stdout and "disk:" in prepare.stdout
    assert not (stranger["work"] / "cache" / "onnx").exists()  # nothing exported
