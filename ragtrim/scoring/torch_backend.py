"""MiniLM called directly on torch: the tokenizers library and transformers' ``AutoModel``, with no
sentence-transformers in between. What the fast path runs on a CUDA device.

sentence-transformers' ``encode`` spends most of a 20-passage, 16-piece call outside the model (its tokenizer
call, feature dicts, per-batch sorting and device moves, a progress check), several times the model pass itself on a
GPU. This scorer tokenizes with the same prefix encoding as the ONNX scorer
(``ragtrim.scoring.onnx_backend.padded_batches``, one ``encode_batch`` call), moves one int64 array to the device, and runs the encoder in half
precision (on CUDA) under ``torch.inference_mode`` with mean pooling and L2 normalization on the device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.notice import announced
from ragtrim._util.redact import get_logger
from ragtrim._util.validate import Boolean, Constraints, Interval, Text
from ragtrim.components import component, register
from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim.scoring.adapter import adapter_suffix
from ragtrim.scoring.device import resolve_device
from ragtrim.scoring.embedding import (
    DEFAULT_EMBEDDING_MODEL,
    CachedEmbedder,
    cpu_threads,
    quietly,
    resolve_model,
)
from ragtrim.scoring.onnx_backend import BatchGrouping, load_tokenizer, padded_batches
from ragtrim.scoring.rows import probe_lengths, rows_independent

logger = get_logger("ragtrim")

_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = fork_safe_lock()


def _load(model_dir: str, device: str) -> Any:
    """One encoder per (model, device) and process: fp16 on CUDA, fp32 on the CPU."""
    key = (model_dir, device)
    with _LOCK:
        if key not in _MODELS:
            try:
                import torch
                from transformers import AutoModel
            except ImportError as exc:
                raise MissingDependencyError("torch", "torch", "the torch MiniLM scorer") from exc
            dtype = torch.float16 if device.startswith("cuda") else torch.float32
            with announced(f"loading {Path(model_dir).name} with torch on {device} from {model_dir} (once per "
                           "process, on first use)"):
                encoder = quietly(lambda: AutoModel.from_pretrained(model_dir, local_files_only=True, dtype=dtype))
                _MODELS[key] = encoder.to(device).eval()
            logger.info("loaded %s with torch on %s (%s)", Path(model_dir).name, device, str(dtype).split(".")[-1])
        return _MODELS[key]


def _pooled(encoder: Any, ids: Any, mask: Any) -> Any:
    """Mean of the unmasked last hidden states, L2-normalized, in fp32 (on the device)."""
    import torch

    hidden = encoder(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-4)
    return torch.nn.functional.normalize(mean.float(), p=2, dim=1)


def _eager(encoder: Any, device: str, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    import torch

    with torch.inference_mode(), (contextlib.nullcontext() if device.startswith("cuda") else cpu_threads(None)):
        both = torch.from_numpy(np.stack([ids, mask])).to(device, non_blocking=True)
        return np.asarray(_pooled(encoder, both[0], both[1]).cpu().numpy())


_BUCKETS = (8, 16, 32, 64)


class _Graphs:
    """Captured CUDA graphs of ``_pooled`` for inputs of ``width`` pieces, one per batch bucket (made on first use).

    Inputs are copied into static device tensors (rows past the batch get a lone ``[CLS]``-like first piece so that
    no row is all padding); the replay writes a static output whose first rows are the batch's vectors."""

    def __init__(self, encoder: Any, device: str, width: int) -> None:
        self.encoder, self.device, self.width = encoder, device, width
        self._captured: dict[int, tuple[Any, Any, Any]] = {}
        self._failed: set[int] = set()
        self._lock = fork_safe_lock()

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
        rows, width = ids.shape
        # Always the largest bucket: one input shape means the same kernels for every call, so a row's result
        # cannot depend on how many other rows share the call (smaller buckets made it depend on the batch).
        bucket = _BUCKETS[-1] if rows <= _BUCKETS[-1] else None
        if bucket is None or width > self.width or bucket in self._failed:
            return None
        import torch

        with self._lock, torch.inference_mode():
            if bucket not in self._captured and not self._capture(bucket):
                return None
            graph, static_in, static_out = self._captured[bucket]
            host = np.zeros((2, bucket, self.width), dtype=np.int64)
            host[1, :, 0] = 1
            host[0, :rows, :width] = ids
            host[1, :rows, :width] = mask
            static_in.copy_(torch.from_numpy(host), non_blocking=False)
            graph.replay()
            return np.asarray(static_out[:rows].cpu().numpy())

    def _capture(self, bucket: int) -> bool:
        import torch

        try:
            static_in = torch.zeros((2, bucket, self.width), dtype=torch.long, device=self.device)
            static_in[1, :, 0] = 1
            side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    _pooled(self.encoder, static_in[0], static_in[1])
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = _pooled(self.encoder, static_in[0], static_in[1])
        except Exception as exc:  # noqa: BLE001  # any capture failure means: run this shape eagerly
            self._failed.add(bucket)
            logger.warning("CUDA graph capture of MiniLM failed for %d rows (%s: %s); running it eagerly", bucket,
                           type(exc).__name__, exc)
            return False
        self._captured[bucket] = (graph, static_in, static_out)
        logger.info("captured a CUDA graph of MiniLM for %d rows of %d pieces", bucket, self.width)
        return True


def _fixed_shape(ids: np.ndarray, mask: np.ndarray, rows: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` and ``mask`` padded to ``rows`` x ``width`` (extra rows get one unmasked first piece, as in the
    captured graphs, so that no row is all padding)."""
    out = np.zeros((2, rows, width), dtype=np.int64)
    out[1, :, 0] = 1
    out[0, : ids.shape[0], : ids.shape[1]] = ids
    out[1, : ids.shape[0], : ids.shape[1]] = mask
    return out[0], out[1]


_GRAPHS: dict[tuple[int, str, int], _Graphs] = {}


def _graphs(encoder: Any, device: str, width: int) -> _Graphs:
    key = (id(encoder), device, width)
    with _LOCK:
        if key not in _GRAPHS:
            _GRAPHS[key] = _Graphs(encoder, device, width)
        return _GRAPHS[key]


@register("scorer", "torch_embedding")
@component
class TorchEmbeddingScorer(CachedEmbedder):
    """Cosine similarity of MiniLM embeddings from a direct torch call (see the module docstring).

    ``device="auto"`` takes CUDA when a device is usable, else the CPU. Texts are cut to ``max_seq_length`` word
    pieces. Embeddings are cached per text like the other embedding scorers'. Its vectors match
    ``EmbeddingScorer``'s for the same model and length up to the precision used (fp16 on CUDA).

    On CUDA, ``cuda_graphs`` (default) replays a captured CUDA graph of 64 rows of ``max_seq_length`` pieces: the
    eager forward pass launches about a hundred kernels from Python, which costs more than the GPU work of a
    20-passage request and holds the GIL while it does. Every call has that one shape (fewer rows are padded), so
    that a text's vector does not depend on the other texts of its batch; the eager pass, where a graph cannot be
    captured (logged once), pads to the same shape. On the CPU texts of the same number of pieces run together,
    without padding (torch's CPU kernels give a row the same bits whatever the number of rows;
    benchmarks/results/relevance/batch_invariance.json), with the process's torch thread count (one in a forked
    child, see ``cpu_threads``).

    Not kept in the vector store (no ``_recipe``): on the CPU the thread count, which changes vectors, is the host
    application's; on CUDA the fixed shape is batch-invariant by construction, but that is yet to be measured on a
    GPU (``python -m ragtrim_bench.relevance.batch_invariance --backends torch-cuda@64``).
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "model": [Text("a model name or local path")],
        "device": [Text("'auto' or a torch device string such as 'cuda'")],
        "max_seq_length": [Interval(int, 8, None)],
        "batch_size": [Interval(int, 1, None)],
        "cuda_graphs": [Boolean()],
    }

    model: str = DEFAULT_EMBEDDING_MODEL
    device: str = "auto"
    max_seq_length: int = 256
    batch_size: int = 64
    cuda_graphs: bool = True
    warms_up: ClassVar[bool] = True
    batch_invariant: ClassVar[bool] = True  # one shape per call on CUDA; on the CPU same-length batches where the
    # host's kernels keep a row's bits whatever the number of rows (ragtrim.scoring.rows), else one text per call

    @property
    def name(self) -> str:
        return f"torch:{Path(self.model).name}@{self.max_seq_length}{adapter_suffix(self.query_adapter, self.query_adapter_min_length)}"

    def _parts(self) -> tuple[Any, Any, str]:
        model_dir = str(Path(resolve_model(self.model)))
        if not (Path(model_dir) / "tokenizer.json").is_file():
            raise ConfigError(f"{model_dir!r} is not a local transformers model with a tokenizer.json")
        device = resolve_device(self.device)
        return _load(model_dir, device), load_tokenizer(Path(model_dir), self.max_seq_length), device

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._prepare(texts)()

    def _prepare(self, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        """The returned call tokenizes (``encode_batch`` releases the GIL) and runs the encoder (torch releases the
        GIL inside its ops; a graph replay needs it only to launch)."""
        encoder, tokenizer, device = self._parts()
        graphs = _graphs(encoder, device, self.max_seq_length) if self.cuda_graphs and device.startswith("cuda") else None
        texts = list(texts)

        cuda = device.startswith("cuda")
        rows = min(self.batch_size, _BUCKETS[-1])

        def encode(group: list[str], grouping: BatchGrouping, rows: int) -> np.ndarray:
            out = np.zeros((len(group), 0), dtype=np.float32)
            for batch, ids, mask in padded_batches(tokenizer, group, self.max_seq_length, rows, grouping):
                vectors = graphs(ids, mask) if graphs is not None else None
                if vectors is None:
                    vectors = _eager(encoder, device, *_fixed_shape(ids, mask, rows, self.max_seq_length)) if cuda \
                        else _eager(encoder, device, ids, mask)
                    vectors = vectors[: len(batch)]
                if out.shape[1] == 0:
                    out = np.zeros((len(group), vectors.shape[1]), dtype=np.float32)
                out[batch] = vectors
            return out

        def run() -> np.ndarray:
            if cuda:
                return encode(texts, "padded", rows)
            import torch

            # texts of one length in one call, where this host's kernels keep each row's bits (ragtrim.scoring.rows)
            grouped = rows_independent(("torch", self.model, self.max_seq_length, torch.get_num_threads()),
                                       lambda group: encode(group, "exact_length", len(group)),
                                       lengths=probe_lengths(self.max_seq_length))
            return encode(texts, "exact_length" if grouped else "single", rows)

        return run

