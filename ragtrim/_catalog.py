"""Where ragtrim's lazily loaded names live: generated from the source by ``python -m ragtrim._util.catalog``
(``tests/test_catalog.py`` fails while it is stale). Never edit it by hand.

``PUBLIC``: each name ``ragtrim`` exports lazily -> its module. ``COMPONENTS``: kind -> registered type name -> its
module (``ragtrim.components``). ``NAMED_SCORERS``: scorer name -> the module of its factory
(``ragtrim.scoring.registry``).
"""

from __future__ import annotations

PUBLIC: dict[str, str] = {
    "BM25Scorer": "ragtrim.scoring.bm25",
    "CascadeScorer": "ragtrim.scoring.cascade",
    "DuplicateFilter": "ragtrim.stages.dedup",
    "EmbeddingScorer": "ragtrim.scoring.embedding",
    "FixedScorer": "ragtrim.testing",
    "HistoryCompressor": "ragtrim.stages.history",
    "HistoryResult": "ragtrim.history.state",
    "HistoryState": "ragtrim.history.state",
    "HtmlCleaner": "ragtrim.stages.html",
    "HybridScorer": "ragtrim.scoring.hybrid",
    "OnnxEmbeddingScorer": "ragtrim.scoring.onnx_backend",
    "OpenAICompatibleSummarizer": "ragtrim.history.summarizers",
    "QueryLikelihoodScorer": "ragtrim.scoring.rerank",
    "RelevanceFilter": "ragtrim.stages.relevance",
    "Reorder": "ragtrim.stages.order",
    "RerankScorer": "ragtrim.scoring.rerank",
    "RetentionFilter": "ragtrim.stages.retention",
    "RuleBasedSummarizer": "ragtrim.history.summarizers",
    "Scorer": "ragtrim.scoring.base",
    "ScriptedSummarizer": "ragtrim.testing",
    "SentenceCompressor": "ragtrim.stages.compress",
    "StateItem": "ragtrim.history.state",
    "Summarizer": "ragtrim.history.summarizers",
    "TokenBudget": "ragtrim.stages.budget",
    "TorchEmbeddingScorer": "ragtrim.scoring.torch_backend",
    "compress_history": "ragtrim.history.fold",
    "get_scorer": "ragtrim.scoring.registry",
}

COMPONENTS: dict[str, dict[str, str]] = {
    "counter": {
        "approx": "ragtrim.text.tokens",
        "gemma3": "ragtrim.text.tokens",
        "hf": "ragtrim.text.tokens",
        "tiktoken": "ragtrim.text.tokens",
        "whitespace": "ragtrim.text.tokens",
    },
    "scorer": {
        "bm25": "ragtrim.scoring.bm25",
        "cascade": "ragtrim.scoring.cascade",
        "embedding": "ragtrim.scoring.embedding",
        "fixed": "ragtrim.testing",
        "hybrid": "ragtrim.scoring.hybrid",
        "onnx_embedding": "ragtrim.scoring.onnx_backend",
        "query_likelihood": "ragtrim.scoring.rerank",
        "rerank": "ragtrim.scoring.rerank",
        "table_rows": "ragtrim.scoring.tables",
        "torch_embedding": "ragtrim.scoring.torch_backend",
        "window": "ragtrim.scoring.window",
    },
    "stage": {
        "budget": "ragtrim.stages.budget",
        "compress": "ragtrim.stages.compress",
        "dedup": "ragtrim.stages.dedup",
        "history": "ragtrim.stages.history",
        "html": "ragtrim.stages.html",
        "order": "ragtrim.stages.order",
        "relevance": "ragtrim.stages.relevance",
        "retention": "ragtrim.stages.retention",
    },
    "summarizer": {
        "openai_compatible": "ragtrim.history.summarizers",
        "rule_based": "ragtrim.history.summarizers",
        "scripted": "ragtrim.testing",
    },
}

NAMED_SCORERS: dict[str, str] = {
    "balanced": "ragtrim.scoring.auto",
    "balanced-qa": "ragtrim.scoring.auto",
    "bm25": "ragtrim.scoring.bm25",
    "embedding": "ragtrim.scoring.embedding",
    "fast": "ragtrim.scoring.auto",
    "hybrid": "ragtrim.scoring.hybrid",
}
