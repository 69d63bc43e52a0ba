"""The API reference (docs/build_api.py, pdoc) builds from the docstrings, and a broken reference fails the build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pdoc", reason="pdoc is in the dev extra: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "docs" / "build_api.py"


def build(out: Path, *args: str, pythonpath: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, str(BUILD), "-o", str(out), *args], capture_output=True, text=True,
                          timeout=300, check=False, env=env, cwd=pythonpath)


def test_reference_builds(tmp_path: Path) -> None:
    out = build(tmp_path / "api")
    assert out.returncode == 0, out.stderr
    pages = {p.relative_to(tmp_path / "api").as_posix() for p in (tmp_path / "api").rglob("*.html")}
    assert {"index.html", "ragtrim.html", "ragtrim/pipeline.html", "ragtrim/plan.html", "ragtrim/plan/model.html",
            "ragtrim/stages/dedup.html", "ragtrim/dedup/engine.html"} <= pages
    assert not any("/_" in p or p.startswith("ragtrim/_") for p in pages), "private modules are not documented"
    top = (tmp_path / "api" / "ragtrim.html").read_text(encoding="utf-8")
    # Lazily exported names are documented where users import them from, with their docstrings.
    assert 'id="DuplicateFilter"' in top and "Drop exact and near-duplicate chunks" in top


def test_broken_reference_fails_the_build(tmp_path: Path) -> None:
    pkg = tmp_path / "brokenpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A package whose __all__ names something that does not exist."""\n'
                                     '__all__ = ["does_not_exist"]\n', encoding="utf-8")
    out = build(tmp_path / "api", "--package", "brokenpkg", pythonpath=tmp_path)
    assert out.returncode == 1
    assert "API reference build failed" in out.stderr and "does_not_exist" in out.stderr
