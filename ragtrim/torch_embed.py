"""MiniLM called directly on torch: the tokenizers library and transformers' ``AutoModel``, with no
sentence-transformers in between. What the fast path runs on a CUDA device.

sentence-transformers' ``encode`` spends most of a 20-passage, 16-piece call outside the model (its tokenizer
call, feature dicts, per-batch sorting and device moves, a progress check): about 15 ms on the H200 host, for a
model pass that takes 1-2 ms there. This scorer tokenizes with the same prefix encoding as the ONNX scorer
(``ragtrim.onnx_embed.padded_batches``), moves one int64 array to the device, and runs the encoder in half
precision (on CUDA) under ``torch.inference_mode`` with mean pooling and L2 normalization on the device.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim._validate import check_int
from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim.onnx_embed import _tokenizer, padded_batches
from ragtrim.scoring import DEFAULT_EMBEDDING_MODEL, CachedEmbedder, quietly, resolve_device, resolve_model

logger = logging.getLogger("ragtrim")

_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _load(model_dir: str, device: str) -> Any:
    """One encoder per (model, device) and process: fp16 on CUDA, fp32 on the CPU."""
    key = (model_dir, device)
    with _LOCK:
        if key not in _MODELS:
            try:
                import torch
                from transformers import AutoModel
            except ImportError as exc:
                raise MissingDependencyError("torch", "embeddings", "the torch MiniLM scorer") from exc
            dtype = torch.float16 if device.startswith("cuda") else torch.float32
            encoder = quietly(lambda: AutoModel.from_pretrained(model_dir, local_files_only=True, dtype=dtype))
            _MODELS[key] = encoder.to(device).eval()
            logger.info("loaded %s with torch on %s (%s)", Path(model_dir).name, device, str(dtype).split(".")[-1])
        return _MODELS[key]


class TorchEmbeddingScorer(CachedEmbedder):
    """Cosine similarity of MiniLM embeddings from a direct torch call (see the module docstring).

    ``device="auto"`` takes CUDA when a device is usable, else the CPU. Texts are cut to ``max_seq_length`` word
    pieces. Embeddings are cached per text like the other embedding scorers'. Its vectors match
    ``EmbeddingScorer``'s for the same model and length up to the precision used (fp16 on CUDA).
    """

    def __init__(
        self,
        *,
        model: str = DEFAULT_EMBEDDING_MODEL,
        device: str = "auto",
        max_seq_length: int = 256,
        batch_size: int = 64,
        cache_size: int = 16384,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model must be a model name or local path, got {model!r}")
        if not isinstance(device, str) or not device:
            raise ConfigError(f"device must be 'auto' or a torch device string such as 'cuda', got {device!r}")
        check_int("max_seq_length", max_seq_length, minimum=8)
        check_int("batch_size", batch_size, minimum=1)
        check_int("cache_size", cache_size, minimum=0)
        super().__init__(cache_size=cache_size)
        self.model = model
        self.device = device
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size

    @property
    def name(self) -> str:
        return f"torch:{Path(self.model).name}@{self.max_seq_length}"

    def _parts(self) -> tuple[Any, Any, str]:
        model_dir = str(Path(resolve_model(self.model)))
        if not (Path(model_dir) / "tokenizer.json").is_file():
            raise ConfigError(f"{model_dir!r} is not a local transformers model with a tokenizer.json")
        device = resolve_device(self.device)
        return _load(model_dir, device), _tokenizer(Path(model_dir), self.max_seq_length), device

    def warm_up(self) -> None:
        self._encode(["warm up"])

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._prepare(texts)()

    def _prepare(self, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        """Tokenize now; the returned call runs the encoder (torch releases the GIL inside its ops)."""
        encoder, tokenizer, device = self._parts()
        batches = list(padded_batches(tokenizer, texts, self.max_seq_length, self.batch_size))

        def run() -> np.ndarray:
            import torch

            out = np.zeros((len(texts), 0), dtype=np.float32)
            with torch.inference_mode():
                for batch, ids, mask in batches:
                    both = torch.from_numpy(np.stack([ids, mask])).to(device, non_blocking=True)
                    hidden = encoder(input_ids=both[0], attention_mask=both[1],
                                     token_type_ids=torch.zeros_like(both[0])).last_hidden_state
                    weights = both[1].unsqueeze(-1).to(hidden.dtype)
                    mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-4)
                    vectors = torch.nn.functional.normalize(mean.float(), p=2, dim=1).cpu().numpy()
                    if out.shape[1] == 0:
                        out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
                    out[batch] = vectors
            return out

        return run

    def __repr__(self) -> str:
        return (f"TorchEmbeddingScorer(model={self.model!r}, device={self.device!r}, "
                f"max_seq_length={self.max_seq_length})")
