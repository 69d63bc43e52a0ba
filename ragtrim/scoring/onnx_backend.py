"""MiniLM through ONNX Runtime, without torch: ``OnnxEmbeddingScorer`` runs the int8 export of all-MiniLM-L6-v2 that
ships with ragtrim (``ragtrim.scoring.onnx_export``) and needs only onnxruntime, tokenizers and numpy (the
``embeddings`` extra). Another model, or the fp32 graph, is exported into the cache folder once (the ``torch``
extra). ``activation_scales="row"`` runs the batch-invariant int8 model of ``ragtrim.scoring.onnx_rows`` instead,
built once into the cache folder from the fp32 export (the ``torch`` extra).
"""

from __future__ import annotations

import importlib.util
import platform
import unicodedata
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

import numpy as np

from ragtrim._util.background import run_parallel
from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.redact import get_logger
from ragtrim._util.validate import Boolean, Constraints, Interval, Options, Text
from ragtrim.components import component, register
from ragtrim.errors import MissingDependencyError
from ragtrim.scoring.adapter import adapter_suffix
from ragtrim.scoring.device import onnx_threads
from ragtrim.scoring.embedding import (
    DEFAULT_EMBEDDING_MODEL,
    CachedEmbedder,
    prefix_chars,
    resolve_model,
)
from ragtrim.scoring.fingerprint import file_fingerprint
from ragtrim.scoring.onnx_export import _import as import_extra
from ragtrim.scoring.onnx_export import export_dir, export_onnx, is_default, shipped_dir
from ragtrim.scoring.onnx_rows import ROW_FILE, build_row_quantized

logger = get_logger("ragtrim")

ActivationScales = Literal["row", "call"]
"""How an int8 model quantizes its activations: ``call``, ONNX Runtime's dynamic quantization, one scale per call
(the shipped export; each text then runs alone); ``row``, one scale per token row (``ragtrim.scoring.onnx_rows``:
batch-invariant, so texts of one length share a call)."""


def onnx_file(model: str = DEFAULT_EMBEDDING_MODEL, *, quantized: bool = True,
              activation_scales: ActivationScales = "call") -> Path:
    """The ONNX graph the scorer runs: the shipped int8 export for the bundled model, else the cache's export; the
    row-quantized model is always the cache's (built from the fp32 export)."""
    if quantized and activation_scales == "row":
        return export_dir(model) / ROW_FILE
    if quantized and is_default(model):
        return shipped_dir() / "model.int8.onnx"
    return export_dir(model) / ("model.int8.onnx" if quantized else "model.onnx")


def tokenizer_dir(model: str = DEFAULT_EMBEDDING_MODEL) -> Path:
    """The folder with the ``tokenizer.json`` of ``model`` (the shipped copy for the bundled model)."""
    return shipped_dir() if is_default(model) else Path(resolve_model(model))


def is_exported(model: str = DEFAULT_EMBEDDING_MODEL, *, quantized: bool = True,
                activation_scales: ActivationScales = "call") -> bool:
    """True when the model file exists, or (the row-quantized one) can be built from the fp32 export without torch."""
    try:
        path = onnx_file(model, quantized=quantized, activation_scales=activation_scales)
        if quantized and activation_scales == "row" and not path.is_file():
            return onnx_file(model, quantized=False).is_file() and importlib.util.find_spec("onnx") is not None
        return path.is_file()
    except (MissingDependencyError, OSError, ValueError):
        return False


_ROW_LOCK = fork_safe_lock()


def row_model(model: str = DEFAULT_EMBEDDING_MODEL) -> Path:
    """The row-quantized int8 model of ``model`` in the cache folder, built once: from the fp32 export (made first
    when missing, which needs the ``torch`` extra) by ``ragtrim.scoring.onnx_rows`` (needs ``onnx``)."""
    target = onnx_file(model, activation_scales="row")
    with _ROW_LOCK:
        if not target.is_file():
            fp32 = onnx_file(model, quantized=False)
            if not fp32.is_file():
                export_onnx(model)
            build_row_quantized(fp32, target)
    return target


UNFUSED: tuple[str, ...] = ("SkipLayerNormFusion",)
"""ONNX Runtime graph optimizations left out wherever ragtrim loads a model (``load_session``): the CPU
``SkipLayerNormalization`` kernel, which that fusion puts in place of each residual ``Add`` and
``LayerNormalization`` pair, is several times slower than the two kernels it replaces on MiniLM's shapes, and the
model pass the slower for it (per-operator profiles with and without it: ``ragtrim-bench relevance onnx_ops``). The
result is the same computation in another order, so an int8 model's vectors differ from those of the fused graph in
the last rounding steps; the recipe names it."""

_SESSIONS: dict[tuple[str, int, tuple[str, ...]], Any] = {}
_TOKENIZERS: dict[tuple[str, int], Any] = {}
_LOAD_LOCK = fork_safe_lock()  # loaded sessions stay in a forked child: ONNX Runtime's CPU sessions run there


def _load_once(cache: dict[Any, Any], key: Hashable, load: Callable[[], Any]) -> Any:
    """``cache[key]``, loaded by ``load()`` on first use; one lock, so concurrent first calls load it once."""
    with _LOAD_LOCK:
        if key not in cache:
            cache[key] = load()
        return cache[key]


def _import(module: str) -> Any:
    """``module``, or the MissingDependencyError that names the extra to install."""
    return import_extra(module, "embeddings", "the ONNX MiniLM scorer")


def session_options(threads: int) -> Any:
    """The ``onnxruntime.SessionOptions`` ragtrim loads its models with: ``threads`` intra-op threads that do not
    spin when idle (so they never burn a core the host application needs), every graph optimization level, warnings
    only."""
    ort = _import("onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3
    return opts


def load_session(path: Path, threads: int = 1, unfused: tuple[str, ...] = UNFUSED, options: Any = None) -> Any:
    """A new ``onnxruntime.InferenceSession`` of the model at ``path`` on the CPU, with ``options`` (default
    ``session_options(threads)``) and the graph optimizations in ``unfused`` left out."""
    return _import("onnxruntime").InferenceSession(str(path), options if options is not None else
                                                   session_options(threads), providers=["CPUExecutionProvider"],
                                                   disabled_optimizers=list(unfused))


def _runtime(path: Path, threads: int, unfused: tuple[str, ...] = UNFUSED) -> Any:
    """The model at ``path`` loaded once per (file, threads, optimizations left out) and process (``load_session``)."""

    def load() -> Any:
        session = load_session(path, threads, unfused)
        logger.info("loaded %s with ONNX Runtime (%d thread%s)", path.name, threads, "" if threads == 1 else "s")
        return session

    return _load_once(_SESSIONS, (str(path), threads, unfused), load)


def load_tokenizer(model_dir: Path, max_tokens: int) -> Any:
    def load() -> Any:
        tok = _import("tokenizers").Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(max_tokens)
        tok.no_padding()
        return tok

    return _load_once(_TOKENIZERS, (str(model_dir), max_tokens), load)


_CHARS_PER_PIECE = 6
"""Characters of text read per word piece wanted before the first cut: English averages under five characters per
piece (a word and its space), so ``6 x max_seq_length`` characters nearly always hold the pieces the model reads; a
prefix that does not is extended fourfold (and at last encoded whole), so the result never depends on it."""
_CUT_WINDOW = 4
"""A cut is looked for in ``[chars, 4 x chars)``; the prefix grows fourfold when it holds too few pieces."""


def _bert_style(tokenizer: Any) -> int | None:
    """For a BERT tokenizer (BertNormalizer isolating CJK ideographs, BertPreTokenizer, WordPiece) its longest word
    (``max_input_chars_per_word``: a longer one is one [UNK]); None for any other tokenizer."""
    normalizer, pre, model = (getattr(tokenizer, a, None) for a in ("normalizer", "pre_tokenizer", "model"))
    if (type(pre).__name__ != "BertPreTokenizer" or type(normalizer).__name__ != "BertNormalizer"
            or type(model).__name__ != "WordPiece" or not getattr(normalizer, "handle_chinese_chars", False)):
        return None
    return int(getattr(model, "max_input_chars_per_word", 100))


def _starts_bert_word(ch: str) -> bool:
    """BERT's tokenizer starts a word at ``ch``: whitespace (it splits there), a CJK ideograph (its normalizer puts
    spaces around each) or punctuation (its pre-tokenizer isolates each mark): the rules of BERT's BasicTokenizer."""
    cp = ord(ch)
    if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
        return True
    if (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2CEAF or 0x2F800 <= cp <= 0x2FA1F):
        return True
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _lead(text: str, chars: int, max_word: int | None) -> str:
    """A prefix of ``text`` whose pieces start like the whole text's: for any whitespace-splitting pre-tokenizer
    (``Whitespace``, ``Metaspace``, byte-level BPE) cut at the first space from ``chars`` on; for a BERT tokenizer
    (``max_word``: its longest word) at the first whitespace, CJK ideograph or punctuation mark in
    ``[chars, 4 x chars)``. A window without one lies inside a single word: when more than ``max_word`` of its
    characters survive BERT's normalizer (combining marks and control characters do not), that word is one [UNK]
    however it is cut, so the window's end will do. Otherwise the whole text. A text of at most ``chars`` characters
    is read whole."""
    if len(text) <= chars:
        return text
    if max_word is None:
        cut = text.find(" ", chars)
        return text[:cut] if cut > 0 else text
    limit = min(len(text), _CUT_WINDOW * chars)
    for i in range(chars, limit):
        if _starts_bert_word(text[i]):
            return text[:i]
    kept = sum(1 for c in text[chars:limit] if unicodedata.category(c) not in _DROPPED_BY_BERT)
    return text[:limit] if kept > max_word else text


_DROPPED_BY_BERT = frozenset({"Mn", "Cc", "Cf"})
"""What BERT's normalizer removes: accents (after NFD; counted conservatively as every non-spacing mark) and control
characters."""


def encode_prefixes(tokenizer: Any, texts: Sequence[str], max_tokens: int) -> list[Any]:
    """The truncated encodings of ``texts``, tokenizing only a prefix of each long text (tokenizing whole passages costs
    more than a 10-piece model pass, and a text without spaces tokenized whole costs time and memory in proportion
    to its length), in one ``encode_batch`` call per round, which releases
    the GIL (a prefetch tokenizes on the background thread while the caller's thread works).

    A prefix ends where the tokenizer starts a new word (``_lead``), so its pieces are the whole text's first
    pieces; a prefix that holds fewer than ``max_tokens`` pieces is extended fourfold, up to the whole text or
    ``prefix_chars(max_tokens)`` characters, whichever is shorter: the model reads the first pieces of at most that
    many characters (``ragtrim.scoring.embedding.prefix_chars``)."""
    max_word = _bert_style(tokenizer)
    chars = _CHARS_PER_PIECE * max_tokens
    bound = prefix_chars(max_tokens)
    heads = [text[:bound] for text in texts]  # nothing past the bound is read, copied or scanned
    cuts = [_lead(head, chars, max_word) for head in heads]
    encodings = list(tokenizer.encode_batch(cuts))
    redo = [i for i, enc in enumerate(encodings) if len(cuts[i]) < len(heads[i]) and len(enc.ids) < max_tokens]
    while redo:
        chars *= _CUT_WINDOW
        for i in redo:
            cuts[i] = _lead(heads[i], chars, max_word)
        for i, enc in zip(redo, tokenizer.encode_batch([cuts[i] for i in redo]), strict=True):
            encodings[i] = enc
        redo = [i for i in redo if len(cuts[i]) < len(heads[i]) and len(encodings[i].ids) < max_tokens]
    return encodings


BatchGrouping = Literal["padded", "exact_length", "single"]
"""How ``padded_batches`` groups texts into model calls: ``padded`` (length-sorted batches of ``batch_size``,
right-padded to the longest), ``exact_length`` (texts of the same number of pieces together, no padding) or
``single`` (one text per call). Only ``single`` makes a text's vector independent of the other texts of the call on
every CPU backend measured (int8 ONNX quantizes activations with one scale per call;
benchmarks/results/relevance/batch_invariance.json)."""


def padded_batches(tokenizer: Any, texts: Sequence[str], max_tokens: int, batch_size: int,
                   grouping: BatchGrouping = "padded") -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
    """The texts' word pieces (at most ``max_tokens`` each, see ``encode_prefixes``) in batches grouped by
    ``grouping`` (at most ``batch_size`` texts each), the longest batch first: ``(positions in texts, input ids,
    attention mask)``, int64 and right-padded to the batch's longest text."""
    encodings = encode_prefixes(tokenizer, texts, max_tokens)
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    if grouping == "single":
        groups = [[i] for i in order]
    elif grouping == "exact_length":
        by_length: dict[int, list[int]] = {}
        for i in order:
            by_length.setdefault(len(encodings[i].ids), []).append(i)
        groups = [g[s:s + batch_size] for g in by_length.values() for s in range(0, len(g), batch_size)]
    else:
        groups = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    # the longest first: calls run side by side take the next one as they finish, and the short ones, left for
    # last, even out when they finish
    for batch in reversed(groups):
        width = max(len(encodings[i].ids) for i in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, i in enumerate(batch):
            n = len(encodings[i].ids)
            ids[row, :n] = encodings[i].ids
            mask[row, :n] = 1
        yield batch, ids, mask


@register("scorer", "onnx_embedding")
@component
class OnnxEmbeddingScorer(CachedEmbedder):
    """Cosine similarity of MiniLM embeddings computed by ONNX Runtime (int8 weights by default), without torch.

    The bundled model's int8 export ships with ragtrim; another ``model``, ``quantized=False`` or
    ``activation_scales="row"`` is exported or built once into the cache folder on first use (the ``torch`` extra;
    ``ragtrim.scoring.onnx_export``, ``row_model``). Texts are cut to ``max_seq_length`` word pieces and tokenized in
    one batch. With ``activation_scales="call"`` (the default, the shipped model: ONNX Runtime's dynamic
    quantization, one activation scale per call) and with fp32 weights each text runs in a call of its own: in a
    shared call a text's vector depended on its neighbours (benchmarks/results/relevance/batch_invariance.json). With
    ``activation_scales="row"`` (``ragtrim.scoring.onnx_rows``) texts of the same length share a call, ``batch_size``
    at most: every activation scale comes from its own token row, so a text's vector is bitwise the one it gets
    alone, and closer to the fp32 model's. ``threads`` calls run at once, each on one thread (default
    ``ragtrim.scoring.device.onnx_threads()``: one per core, at most 8); a vector does not depend on it. Embeddings are cached per text like ``EmbeddingScorer``'s, and kept in the
    vector store.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "model": [Text("a model name or local path")],
        "quantized": [Boolean()],
        "max_seq_length": [Interval(int, 8, None)],
        "threads": [Interval(int, 1, None), None],
        "batch_size": [Interval(int, 1, None)],
        "activation_scales": [Options(get_args(ActivationScales))],
    }

    model: str = DEFAULT_EMBEDDING_MODEL
    quantized: bool = True
    max_seq_length: int = 256
    threads: int | None = None
    batch_size: int = 32
    activation_scales: ActivationScales = "call"
    warms_up: ClassVar[bool] = True
    batch_invariant: ClassVar[bool] = True  # shared calls only where the model is batch-invariant (``_grouping``)
    unfused: ClassVar[tuple[str, ...]] = UNFUSED  # ONNX Runtime optimizations left out when its model loads

    @property
    def name(self) -> str:
        precision = ("-int8row" if self.activation_scales == "row" else "-int8") if self.quantized else ""
        return f"onnx{precision}:{Path(self.model).name}@{self.max_seq_length}{adapter_suffix(self.query_adapter, self.query_adapter_min_length)}"

    def _path(self) -> Path:
        return onnx_file(self.model, quantized=self.quantized, activation_scales=self.activation_scales)

    def _grouping(self) -> BatchGrouping:
        """``exact_length`` for the row-quantized model (batch-invariant), else one text per call."""
        return "exact_length" if self.quantized and self.activation_scales == "row" else "single"

    def _recipe(self) -> str:
        """The model file's fingerprint (it holds the weights, quantized or not, and the pooling and normalization
        in the graph), ONNX Runtime's and tokenizers' versions, the word pieces read, how texts share calls, the CPU
        architecture, and the vector of a probe text here (``host_digest``: int8 kernels round differently by
        instruction set). Not the thread count: a text's vector is the same at 1 and 2 threads
        (benchmarks/results/relevance/batch_invariance.json)."""
        ort = _import("onnxruntime")
        tokenizers = _import("tokenizers")
        self._parts()  # the model file exists (an export or the row model is made on first use)
        precision = ("int8row" if self.activation_scales == "row" else "int8") if self.quantized else "fp32"
        grouping = "exact-length" if self._grouping() == "exact_length" else "single"
        return (f"onnxruntime-{precision}/{file_fingerprint(str(self._path()))}/"
                f"ort-{ort.__version__}/tokenizers-{tokenizers.__version__}/pieces-{self.max_seq_length}-of-"
                f"{prefix_chars(self.max_seq_length)}-chars/"
                f"mean-l2/{grouping}/unfused-{'-'.join(self.unfused)}/{platform.machine()}/"
                f"probe-{self.host_digest()}")

    def _parts(self) -> tuple[Any, Any]:
        path = self._path()
        if not path.is_file():
            if self.quantized and self.activation_scales == "row":
                row_model(self.model)
            else:
                export_onnx(self.model)
        # one thread a call: on inputs of at most a few hundred pieces ONNX Runtime's intra-op threads cost more in
        # wake-ups than they save, and calls running side by side use the cores instead (``_model_pass``)
        return _runtime(path, 1, self.unfused), load_tokenizer(tokenizer_dir(self.model), self.max_seq_length)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._prepare(texts)()

    def _prepare(self, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        runtime, tokenizer = self._parts()
        return self._model_pass(runtime, tokenizer, texts)

    def _model_pass(self, runtime: Any, tokenizer: Any, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        """The returned call tokenizes (``encode_batch`` releases the GIL), runs the model's calls ``threads`` at
        once, each on one thread (which releases the GIL too), and assembles the rows: on the background thread,
        nothing of it holds the caller's thread up."""
        texts = list(texts)
        grouping = self._grouping()
        batch_size = self.batch_size if grouping == "exact_length" else 1
        workers = self.threads if self.threads is not None else onnx_threads()

        def call(item: tuple[Any, np.ndarray, np.ndarray]) -> tuple[Any, np.ndarray]:
            batch, ids, mask = item
            return batch, runtime.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]

        def run() -> np.ndarray:
            calls = list(padded_batches(tokenizer, texts, self.max_seq_length, batch_size, grouping))
            out = np.zeros((len(texts), 0), dtype=np.float32)
            for batch, vectors in run_parallel(call, calls, workers):
                if out.shape[1] == 0:
                    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
                out[batch] = vectors
            return out

        return run
