"""Candidate recipes for the default on a CPU, as quality-matrix rows (``--rows ragtrim_bench.tuning.cpu_recipes:<name>``).

Each is the ``balanced`` shape (BM25 picks the candidates; BM25 mixed with MiniLM, BM25's weight rising when it is
sure) with another MiniLM reader on ONNX Runtime: the batch-invariant int8 model (``activation_scales="row"``) over
the first 128 or 64 word pieces, or over a 64-piece window from each passage's best sentence (``WindowScorer``), with
or without the passage's title line in front. ``threads``: 2 (both cores of the machine the matrix runs on).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragtrim_bench.relevance.rows import Row, scorer_clearer

THREADS = 2


def _row(name: str, description: str, make: Callable[[], Any]) -> Row:
    scorer = make()

    def run(chunks: Any, query: str, budget: int) -> str:
        from ragtrim import trim

        return trim(chunks, query=query, budget=budget, scorer=scorer).text

    return Row(name, run, description, clear=scorer_clearer(scorer))


def _balanced(minilm: Any) -> Any:
    from ragtrim.scoring.auto import BALANCED_BM25_WEIGHT, BALANCED_SURE_BM25_WEIGHT, bm25_mix

    return bm25_mix(minilm, BALANCED_BM25_WEIGHT, sure_weight=BALANCED_SURE_BM25_WEIGHT)


def _onnx(pieces: int, scales: str = "row") -> Any:  # the row model: these rows were measured with it
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    return OnnxEmbeddingScorer(max_seq_length=pieces, threads=THREADS, activation_scales=scales)  # type: ignore[arg-type]


def row128() -> Row:
    return _row("row128", "balanced, row-quantized int8 MiniLM over the first 128 pieces",
                lambda: _balanced(_onnx(128)))


def lead64() -> Row:
    return _row("lead64", "balanced, row-quantized int8 MiniLM over the first 64 pieces", lambda: _balanced(_onnx(64)))


def _window(name: str, description: str, pieces: int, **params: Any) -> Row:
    from ragtrim.scoring.window import WindowScorer

    return _row(name, description, lambda: _balanced(WindowScorer(scorer=_onnx(pieces), **params)))


def window64() -> Row:
    return _window("window64", "64 pieces from the best sentence", 64, lead_chars=0)


def lb64() -> Row:
    return _window("lb64", "64 pieces: the first sentence (160 characters at most), then the best sentence on", 64)


def lb80() -> Row:
    return _window("lb80", "80 pieces: the first sentence (200 characters at most), then the best sentence on", 80,
                   lead_chars=200, fill_chars=400)


def lb96() -> Row:
    return _window("lb96", "96 pieces: the first sentence (240 characters at most), then the best sentence on", 96,
                   lead_chars=240, fill_chars=480)
