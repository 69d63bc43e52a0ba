"""The install footprint's pure parts: which distributions are a CUDA stack, what a venv gained, what a pip report
says it would fetch."""

from __future__ import annotations

from pathlib import Path

from ragtrim_bench.install.footprint import added, cuda_distributions, folder_bytes, report_sizes


def test_cuda_distributions() -> None:
    names = ["numpy", "nvidia-cublas", "cuda-toolkit", "triton", "torch", "onnxruntime", "tokenizers"]
    assert cuda_distributions(names, {"torch": "2.14.1"}) == ["cuda-toolkit", "nvidia-cublas", "torch", "triton"]
    assert cuda_distributions(["torch"], {"torch": "2.13.0+cpu"}) == []
    assert cuda_distributions(["onnxruntime", "tokenizers"]) == []


def test_added_is_what_the_install_brought() -> None:
    assert added({"pip": "26"}, {"pip": "26", "Tokenizers": "0.23", "numpy": "2.4"}) == {"numpy": "2.4",
                                                                                          "Tokenizers": "0.23"}


def test_folder_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_bytes(b"12345")
    (tmp_path / "y").write_bytes(b"123")
    (tmp_path / "link").symlink_to(tmp_path / "y")
    assert folder_bytes(tmp_path) == 8


def test_report_sizes(tmp_path: Path) -> None:
    wheel = tmp_path / "big.whl"
    wheel.write_bytes(b"x" * 1000)
    report = {"install": [
        {"metadata": {"name": "big", "version": "1"}, "download_info": {"url": wheel.as_uri()}},
        {"metadata": {"name": "far", "version": "2"}, "download_info": {"url": "https://example.invalid/far.whl"}},
    ]}
    assert report_sizes(report) == ({"big": "1", "far": "2"}, 1000, ["far"])
