"""ragtrim: make RAG prompts small before they reach the model.

``trim(chunks, query=..., budget=...)`` runs the default pipeline; build your own ``Pipeline`` from stages for
control. Stage classes load on first access so ``import ragtrim`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from ragtrim.api import default_pipeline, trim
from ragtrim.errors import (
    BudgetError,
    ConfigError,
    ContractError,
    InputError,
    MissingDependencyError,
    RagtrimError,
    StageError,
)
from ragtrim.models import Chunk, Message, Removal, StageOutput, StageReport, TrimContext, TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import Stage
from ragtrim.tokens import (
    ApproxCounter,
    HFTokenizerCounter,
    TiktokenCounter,
    TokenCounter,
    WhitespaceCounter,
    get_counter,
)

__version__ = "0.1.0"

_LAZY = {
    "BM25Scorer": "ragtrim.scoring",
    "CascadeScorer": "ragtrim.cascade",
    "OnnxEmbeddingScorer": "ragtrim.onnx_embed",
    "TorchEmbeddingScorer": "ragtrim.torch_embed",
    "DuplicateFilter": "ragtrim.stages.dedup",
    "EmbeddingScorer": "ragtrim.scoring",
    "FixedScorer": "ragtrim.scoring",
    "HybridScorer": "ragtrim.scoring",
    "QueryLikelihoodScorer": "ragtrim.rerank",
    "RerankScorer": "ragtrim.rerank",
    "Scorer": "ragtrim.scoring",
    "get_scorer": "ragtrim.scoring",
    "HistoryCompressor": "ragtrim.stages.history",
    "HtmlCleaner": "ragtrim.stages.html",
    "RelevanceFilter": "ragtrim.stages.relevance",
    "Reorder": "ragtrim.stages.order",
    "SentenceCompressor": "ragtrim.stages.compress",
    "TokenBudget": "ragtrim.stages.budget",
    "HistoryResult": "ragtrim.history_state",
    "HistoryState": "ragtrim.history_state",
    "OpenAICompatibleSummarizer": "ragtrim.summarizers",
    "RuleBasedSummarizer": "ragtrim.summarizers",
    "ScriptedSummarizer": "ragtrim.summarizers",
    "StateItem": "ragtrim.history_state",
    "Summarizer": "ragtrim.summarizers",
    "compress_history": "ragtrim.history",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragtrim' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ApproxCounter",
    "BM25Scorer",
    "BudgetError",
    "CascadeScorer",
    "Chunk",
    "ConfigError",
    "ContractError",
    "DuplicateFilter",
    "EmbeddingScorer",
    "FixedScorer",
    "HFTokenizerCounter",
    "HistoryCompressor",
    "HistoryResult",
    "HistoryState",
    "HtmlCleaner",
    "HybridScorer",
    "InputError",
    "Message",
    "MissingDependencyError",
    "OnnxEmbeddingScorer",
    "OpenAICompatibleSummarizer",
    "Pipeline",
    "QueryLikelihoodScorer",
    "RagtrimError",
    "RelevanceFilter",
    "Removal",
    "Reorder",
    "RerankScorer",
    "RuleBasedSummarizer",
    "Scorer",
    "ScriptedSummarizer",
    "SentenceCompressor",
    "Stage",
    "StageError",
    "StageOutput",
    "StageReport",
    "StateItem",
    "Summarizer",
    "TiktokenCounter",
    "TokenBudget",
    "TokenCounter",
    "TorchEmbeddingScorer",
    "TrimContext",
    "TrimResult",
    "WhitespaceCounter",
    "__version__",
    "compress_history",
    "default_pipeline",
    "get_counter",
    "get_scorer",
    "trim",
]
