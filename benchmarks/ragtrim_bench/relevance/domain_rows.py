"""Candidate rows for the domain columns that need a GPU: the default recipe's ranking, then Gemma 3 270M's query
likelihood over its best chunks (``RerankScorer`` + ``QueryLikelihoodScorer``), inside the default pipeline.

Name them in ``--rows`` as ``ragtrim_bench.relevance.domain_rows:qlm_top5`` (or ``qlm_top10``); the model folder is
``$RAGTRIM_QLM_MODEL`` (a transformers directory, e.g. written by ``ragtrim-bench models gemma --out DIR``), on
``$RAGTRIM_QLM_DEVICE`` (default ``cuda``). ``benchmarks/ragtrim_bench/gpu/run_domain.sh`` runs them on the H200
host. On two CPU cores a request costs seconds: they are not a CPU recipe.
"""

from __future__ import annotations

import os
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim_bench.relevance.rows import Chunks, Row, scorer_clearer

QLM_WEIGHT = 0.3
"""The query likelihood's weight over the first ranking's min-max mixed score (``RerankScorer``): the value chosen on
NQ dev questions (docs/relevance.md, ``ragtrim-bench tuning qlm_rerank``)."""


def _qlm_row(top_k: int) -> Row:
    model = os.environ.get("RAGTRIM_QLM_MODEL")
    if not model:
        raise ConfigError("set RAGTRIM_QLM_MODEL to a transformers causal-LM folder (ragtrim-bench models gemma "
                          "--out DIR writes Gemma 3 270M's)")
    device = os.environ.get("RAGTRIM_QLM_DEVICE", "cuda")
    from ragtrim.scoring.auto import balanced_scorer
    from ragtrim.scoring.rerank import QueryLikelihoodScorer, RerankScorer

    first = balanced_scorer()
    second = QueryLikelihoodScorer(model, device=device, dtype="bfloat16" if device != "cpu" else "float32",
                                   max_text_tokens=256, batch_size=16)
    scorer = RerankScorer(first, second, top_k=top_k, weight=QLM_WEIGHT)

    def run(chunks: Chunks, query: str, budget: int) -> str:
        from ragtrim import Pipeline, RelevanceFilter, trim
        from ragtrim.api import default_stages

        stages: list[Any] = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                             for s in default_stages(budget=budget)]
        return trim(chunks, query=query, pipeline=Pipeline(stages)).text

    return Row(f"qlm-top{top_k}", run, f"default, its {top_k} best chunks reranked by Gemma 3 270M's query "
               f"likelihood (weight {QLM_WEIGHT}) on {device}", clear=scorer_clearer(first, second))


def qlm_top5() -> Row:
    return _qlm_row(5)


def qlm_top10() -> Row:
    return _qlm_row(10)
