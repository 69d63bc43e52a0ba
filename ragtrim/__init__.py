"""ragtrim: make RAG prompts small before they reach the model.

``trim(chunks, query=..., budget=...)`` runs the default pipeline; build your own ``Pipeline`` from stages for
control. Stage, scorer and history classes load on first access (their modules are in ``ragtrim._catalog``, generated
from the source), so ``import ragtrim`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from ragtrim import _catalog
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
from ragtrim.text.tokens import (
    ApproxCounter,
    HFTokenizerCounter,
    TiktokenCounter,
    TokenCounter,
    WhitespaceCounter,
    get_counter,
)

__version__ = "0.1.0"



def __getattr__(name: str) -> Any:
    module = _catalog.PUBLIC.get(name)
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
    "RetentionFilter",
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
