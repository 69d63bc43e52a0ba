"""The evaluation package's layout, checked from the source: benchmarks by topic, one way to start them, one answer
normalisation, results under ``results/<topic>/`` without raw logs, and ``tests/bench/`` mirroring the package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ragtrim_bench.cli import benchmarks

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
PACKAGE = BENCHMARKS / "ragtrim_bench"
RESULTS = BENCHMARKS / "results"
TESTS = ROOT / "tests" / "bench"
TOPICS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
RESULT_FOLDERS_BESIDE_TOPICS = {"examples"}  # `ragtrim bench` on the shipped example corpus (`make bench`)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_no_loose_scripts() -> None:
    """Everything runnable lives in the package; benchmarks/ holds the package, its project file and the results."""
    assert sorted(p.name for p in BENCHMARKS.iterdir() if not p.name.endswith(".egg-info")) == [
        "README.md", "pyproject.toml", "ragtrim_bench", "results"]
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py", "cli.py"]


def test_every_topic_says_what_it_holds() -> None:
    for topic in TOPICS:
        assert ast.get_docstring(_tree(PACKAGE / topic / "__init__.py")), topic
    assert "not benchmarks" in (ast.get_docstring(_tree(PACKAGE / "tuning" / "__init__.py")) or "")


def test_every_benchmark_starts_the_same_way() -> None:
    """A benchmark is a module with ``main(argv)`` and a ``__main__`` guard, so ``ragtrim-bench <topic> <name>`` and
    ``python -m ragtrim_bench.<topic>.<name>`` both run it."""
    listed = benchmarks()
    assert {"pipeline", "relevance", "dedup", "html", "history", "serve", "audit", "gpu"} <= set(listed)
    for topic, names in listed.items():
        for name in names:
            tree = _tree(PACKAGE / topic / f"{name}.py")
            main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
            assert [a.arg for a in main.args.args] == ["argv"], f"{topic}.{name}: main(argv)"
            guards = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
            assert guards, f"{topic}.{name}: no __main__ guard"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_one_answer_normalisation(path: Path) -> None:
    """Answer recall means one thing: no benchmark defines its own normalisation (``common.answers`` re-exports the
    library's, SQuAD's)."""
    tree = _tree(path)
    own = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
           and re.match(r"_?normali[sz]e", n.name)]
    assert own == []
    text = path.read_text(encoding="utf-8")
    assert "string.punctuation" not in text and r"[^\w\s]" not in text


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_results_are_found_one_way(path: Path) -> None:
    """No module builds the results folder from its own location or a hard-coded relative path:
    ``common.results`` knows it."""
    if path.relative_to(PACKAGE).as_posix() == "common/results.py":
        return
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"""["']benchmarks/results|Path\(["']benchmarks["']\)|__file__\)\.resolve\(\)\.parent""",
                         text)


def test_results_by_topic_without_raw_logs() -> None:
    files = [p for p in RESULTS.rglob("*") if p.is_file()]
    assert files
    assert [p.name for p in RESULTS.iterdir() if p.is_file()] == ["README.md"]
    assert {p.relative_to(RESULTS).parts[0] for p in files if p.parent != RESULTS} <= set(TOPICS) | (
        RESULT_FOLDERS_BESIDE_TOPICS)
    raw = [str(p.relative_to(RESULTS)) for p in files if p.suffix == ".log" or p.name.endswith(".tar.gz")]
    assert raw == []


def test_tests_mirror_the_package() -> None:
    """Each ``tests/bench/<topic>/test_<module>.py`` tests ``ragtrim_bench/<topic>/<module>.py``."""
    for test in TESTS.rglob("test_*.py"):
        rel = test.relative_to(TESTS)
        if len(rel.parts) == 1:
            assert rel.stem in ("test_layout", "test_cli"), rel
            continue
        module = PACKAGE.joinpath(*rel.parts[:-1], rel.name.removeprefix("test_"))
        assert module.is_file(), f"{rel} names no module of the package"
