"""Candidate recipes for the default on a CPU, as quality-matrix rows (``--rows ragtrim_bench.tuning.cpu_recipes:<name>``).

Each is the ``balanced`` shape (BM25 picks the candidates; BM25 mixed with MiniLM, BM25's weight rising when it is
sure) with another MiniLM reader on ONNX Runtime: the batch-invariant int8 model (``activation_scales="row"``) over
the first 128 or 64 word pieces, or over a 64-piece window from each passage's best sentence (``WindowScorer``), with
or without the passage's title line in front. ``threads``: 2 (both cores of the machine the matrix runs on).

Below them, two ways to a cheaper model pass without training, measured against the default's answers: MiniLM with
some of its layers left out (``layers4``, ``layers3_spread``, ...; ``layers6`` is their control) and fewer texts
handed to the model (``candidates12``, ``candidates15``); and MiniLMs of three and four layers distilled from the shipped
one (``distilled3``, ``distilled4``, ``distilled3_tuned``, ``distilled3_bundled_adapter``;
``ragtrim_bench.tuning.distill``). Last, the three-layer student ranking every candidate and the shipped model
rescoring only its best 3, 4, 6 or 8 (``rescored3`` ... ``rescored8``; ``rescored4_first64``: the student reads 64
pieces). Then the default reading fewer word pieces (``pieces120``, ``pieces112``), and the default with every ONNX
Runtime fusion on (``fused_layer_norm``: the control for ``ragtrim.scoring.onnx_backend.UNFUSED``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragtrim_bench.relevance.rows import Row, scorer_clearer

THREADS = 2


def _row(name: str, description: str, make: Callable[[], Any]) -> Row:
    scorer = make()

    def run(chunks: Any, query: str, budget: int) -> str:
        from ragtrim import trim

        return trim(chunks, query=query, budget=budget, scorer=scorer).text

    return Row(name, run, description, clear=scorer_clearer(scorer))


def _balanced(minilm: Any, tables: bool = False) -> Any:
    """``balanced``'s mix of BM25 and ``minilm``; with ``tables``, its table view too (as the default reads tables)."""
    from ragtrim.scoring.auto import BALANCED_BM25_WEIGHT, BALANCED_SURE_BM25_WEIGHT, bm25_mix

    return bm25_mix(minilm, BALANCED_BM25_WEIGHT, sure_weight=BALANCED_SURE_BM25_WEIGHT, tables=tables)


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


# -- a cheaper model pass by fewer layers or fewer texts ---------------------------------------------------------------
# On a 2-core host without int8 matrix units (AMD EPYC) the int8 model pass over 21 texts of 128 pieces takes about
# 140 ms, and a text's pass is compute-bound there: only a smaller model or fewer model calls make it cheaper. The rows
# below measure both without training: MiniLM with some of its six layers left out (the bundled weights, no new
# training), and BM25 handing fewer texts to the model.


def layer_model(layers: tuple[int, ...]) -> str:
    """A folder in the cache holding the bundled MiniLM with only ``layers`` (indices of its six, in order), made
    once from the bundled weights; ``OnnxEmbeddingScorer`` exports it to int8 ONNX on first use (the ``torch``
    extra)."""
    from safetensors.numpy import load_file

    from ragtrim._util.paths import cache_dir
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model
    from ragtrim_bench.tuning.distill import model_folder, student_weights

    out = cache_dir() / "tuning" / f"minilm-layers-{'-'.join(map(str, layers))}"
    if not (out / "model.safetensors").is_file():
        src = Path(resolve_model(DEFAULT_EMBEDDING_MODEL))
        model_folder(student_weights(load_file(str(src / "model.safetensors")), layers), out)
    return str(out)


def _layers_row(name: str, layers: tuple[int, ...]) -> Row:
    from ragtrim.scoring.auto import balanced_scorer

    about = f"balanced with MiniLM's layers {', '.join(map(str, layers))} only (no query adapter: it fits six layers)"
    return _row(name, about, lambda: balanced_scorer("onnxruntime-int8-cpu", model=layer_model(layers),
                                                     threads=THREADS, query_adapter=None))


def layers6() -> Row:
    """The control for the rows below: all six layers, exported the same way, no query adapter."""
    return _layers_row("layers6", (0, 1, 2, 3, 4, 5))


def layers4() -> Row:
    return _layers_row("layers4", (0, 1, 2, 3))


def layers4_last() -> Row:
    return _layers_row("layers4-last", (0, 1, 2, 5))


def layers3() -> Row:
    return _layers_row("layers3", (0, 1, 2))


def layers3_spread() -> Row:
    return _layers_row("layers3-spread", (0, 2, 4))


def _candidates_row(name: str, candidates: int) -> Row:
    from ragtrim.scoring.auto import balanced_scorer
    from ragtrim.scoring.cascade import CascadeScorer

    def make() -> Any:
        default: Any = balanced_scorer("onnxruntime-int8-cpu", threads=THREADS)
        return CascadeScorer(**(default.get_params() | {"candidates": candidates}))

    return _row(name, f"balanced, MiniLM on BM25's best {candidates} texts only (the rest below them, by BM25)", make)


def candidates12() -> Row:
    return _candidates_row("candidates12", 12)


def candidates15() -> Row:
    return _candidates_row("candidates15", 15)


# -- a smaller MiniLM distilled from the shipped one --------------------------------------------------------------------
# ``ragtrim_bench.tuning.distill`` trains MiniLMs of three and four layers to give the shipped int8 model's vectors (on
# the dev requests' texts) and fits each its own query adapter; the rows read them from the cache folder.


def distilled_model(name: str) -> str:
    """The assembled student ``name`` (``distilled-l3``, ...) in the cache folder, with its ``adapter.npz``;
    ConfigError naming the commands that make it when it is not there."""
    from ragtrim._util.paths import cache_dir
    from ragtrim.errors import ConfigError

    out = cache_dir() / "tuning" / name
    if not (out / "model.safetensors").is_file() or not (out / "adapter.npz").is_file():
        raise ConfigError(f"no distilled model at {out}: build it with `ragtrim-bench tuning distill corpus`, "
                          f"`... distill train` (a GPU), `... distill assemble --out {out}` and `ragtrim-bench "
                          f"relevance adapter train --model {out} --output {out / 'adapter.npz'}`")
    return str(out)


def _distilled_scorer(name: str, adapter: str | None = None) -> Any:
    """``balanced`` with the student ``name`` and, on long queries, its own adapter (or ``adapter``)."""
    from ragtrim.scoring.adapter import LONG_QUERY_WORDS
    from ragtrim.scoring.auto import balanced_scorer

    model = distilled_model(name)
    return balanced_scorer("onnxruntime-int8-cpu", model=model, threads=THREADS,
                           query_adapter=adapter or _own_adapter(model), adapter_min_length=LONG_QUERY_WORDS)


def _own_adapter(folder: str) -> str:
    """The query adapter fitted for the student in ``folder`` (``distilled_model`` checks it is there)."""
    return str(Path(folder) / "adapter.npz")


def _distilled_row(name: str) -> Row:
    return _row(name, f"balanced with the distilled MiniLM {name} (int8) and its own query adapter on long queries",
                lambda: _distilled_scorer(name))


def distilled3_scorer() -> Any:
    """The ``distilled3`` row's scorer (``ragtrim-bench relevance losses --scorer
    ragtrim_bench.tuning.cpu_recipes:distilled3_scorer``)."""
    return _distilled_scorer("distilled-l3")


def distilled3() -> Row:
    return _distilled_row("distilled-l3")


def distilled4() -> Row:
    return _distilled_row("distilled-l4")


def distilled3_bundled_adapter() -> Row:
    """``distilled3`` with the bundled adapter (fitted to the six-layer model's vectors) instead of its own."""
    from ragtrim.scoring.adapter import BUNDLED_FILE

    return _row("distilled-l3-bundled-adapter", "distilled-l3 with the six-layer model's query adapter",
                lambda: _distilled_scorer("distilled-l3", str(BUNDLED_FILE)))


def distilled3_tuned() -> Row:
    return _distilled_row("distilled-l3-list")


# -- the distilled MiniLM ranks, the shipped one rescores its best few -----------------------------------------------
# A student's vectors approximate the shipped model's (it was trained to give them), so its cosines sit on about the
# same scale: the shipped six-layer model rescores only the texts the student ranks best, and the others keep the
# student's cosines below them (``CascadeScorer(rest="first")``), inside the ``balanced`` mix.


def _minilm(model: str | None, pieces: int) -> Any:
    """MiniLM on ONNX Runtime over ``pieces``, long queries mapped: the bundled model and adapter (``model`` None) or
    an assembled student from the cache folder and its own adapter."""
    from ragtrim.scoring.adapter import BUNDLED_ADAPTER, LONG_QUERY_WORDS
    from ragtrim.scoring.auto import prefix_minilm

    if model is None:
        return prefix_minilm("onnxruntime-int8-cpu", threads=THREADS, pieces=pieces, query_adapter=BUNDLED_ADAPTER,
                             adapter_min_length=LONG_QUERY_WORDS)
    folder = distilled_model(model)
    return prefix_minilm("onnxruntime-int8-cpu", model=folder, threads=THREADS, pieces=pieces,
                         query_adapter=_own_adapter(folder), adapter_min_length=LONG_QUERY_WORDS)


def _rescoring_scorer(first: Any, candidates: int) -> Any:
    """``balanced``'s mix around ``CascadeScorer(first -> the bundled MiniLM over 128 pieces, rest="first")``."""
    from ragtrim.scoring.auto import BALANCED_PREFIX_TOKENS
    from ragtrim.scoring.cascade import CascadeScorer

    second = _minilm(None, BALANCED_PREFIX_TOKENS)
    return _balanced(CascadeScorer(first=first, second=second, candidates=candidates, rest="first"), tables=True)


def _rescoring(name: str, description: str, first: Callable[[], Any], candidates: int) -> Row:
    return _row(name, description, lambda: _rescoring_scorer(first(), candidates))


def rescored4_scorer() -> Any:
    """The ``rescored4`` row's scorer (``ragtrim-bench relevance losses --scorer
    ragtrim_bench.tuning.cpu_recipes:rescored4_scorer``)."""
    return _rescoring_scorer(_minilm("distilled-l3", 128), 4)


def _rescored(name: str, candidates: int, first_pieces: int = 128) -> Row:
    return _rescoring(name, f"balanced; distilled-l3 over {first_pieces} pieces ranks, the six-layer MiniLM rescores "
                            f"its best {candidates}", lambda: _minilm("distilled-l3", first_pieces), candidates)


def rescored3() -> Row:
    return _rescored("rescored3", 3)


def rescored4() -> Row:
    return _rescored("rescored4", 4)


def rescored6() -> Row:
    return _rescored("rescored6", 6)


def rescored8() -> Row:
    return _rescored("rescored8", 8)


def rescored4_first64() -> Row:
    return _rescored("rescored4-first64", 4, first_pieces=64)


# -- the shipped model over a shorter lead ranks, the same model over 128 pieces rescores its best few -----------------


def _lead_rescored(name: str, lead: int, candidates: int) -> Row:
    return _rescoring(name, f"balanced; MiniLM over {lead} pieces ranks, over 128 pieces it rescores the best "
                            f"{candidates}", lambda: _minilm(None, lead), candidates)


def lead64_rescored4() -> Row:
    return _lead_rescored("lead64-rescored4", 64, 4)


def lead64_rescored6() -> Row:
    return _lead_rescored("lead64-rescored6", 64, 6)


def lead48_rescored4() -> Row:
    return _lead_rescored("lead48-rescored4", 48, 4)


def lead96_rescored4() -> Row:
    return _lead_rescored("lead96-rescored4", 96, 4)


# The default with ONNX Runtime's SkipLayerNormalization fusion left on in its MiniLM sessions, as it ran before
# ``ragtrim.scoring.onnx_backend.UNFUSED`` left it out: the control for that change, the same recipe otherwise.


def fused_layer_norm_scorer() -> Any:
    """The default's scorer (``balanced``: the bundled MiniLM over 128 pieces on int8 ONNX, its adapter on long
    queries, the table view) with ONNX Runtime's fusions all on."""
    from ragtrim.scoring.auto import BALANCED_PREFIX_TOKENS
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    class FusedOnnxEmbeddingScorer(OnnxEmbeddingScorer):
        unfused = ()

    return _balanced(FusedOnnxEmbeddingScorer(**_minilm(None, BALANCED_PREFIX_TOKENS).get_params()), tables=True)


def fused_layer_norm() -> Row:
    return _row("fused-layer-norm", "the default with ONNX Runtime's SkipLayerNormalization fusion on",
                fused_layer_norm_scorer)


# The default reading fewer word pieces of each passage (``balanced_scorer(pieces=...)``): a model pass cheaper in
# proportion, measured against the default's answers.


def _pieces_row(pieces: int) -> Row:
    def make() -> Any:
        from ragtrim.scoring.auto import balanced_scorer

        return balanced_scorer("onnxruntime-int8-cpu", threads=THREADS, pieces=pieces)

    return _row(f"pieces{pieces}", f"the default with MiniLM over the first {pieces} word pieces", make)


def pieces120() -> Row:
    return _pieces_row(120)


def pieces112() -> Row:
    return _pieces_row(112)
