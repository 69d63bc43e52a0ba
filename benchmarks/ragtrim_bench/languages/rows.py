"""Candidate rows for the quality matrix (``ragtrim_bench.relevance.matrix --rows module:attribute``).

  ragtrim-bench relevance matrix --columns korquad --rows bm25,ragtrim_bench.languages.rows:kiwi_row

``kiwi_row``: the default pipeline with Korean morphemes (``BM25Scorer(analyzer="kiwi")``, the ``ko`` extra) ranking
the chunks and the sentences, against ``bm25``, the same pipeline with the core's character bigrams.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from ragtrim.api import default_stages
from ragtrim.pipeline import Pipeline
from ragtrim.scoring.bm25 import BM25Scorer


def kiwi_stages(budget: int, scorer: BM25Scorer) -> list[Any]:
    """``default_stages(budget=..., scorer="bm25")`` with ``scorer`` wherever a stage ranks."""
    return [dataclasses.replace(s, scorer=scorer) if hasattr(s, "scorer") else s  # type: ignore[type-var]
            for s in default_stages(budget=budget, scorer="bm25")]


def kiwi_row() -> Any:
    """The matrix row ``bm25-kiwi`` (a ``ragtrim_bench.relevance.rows.Row``)."""
    rows = importlib.import_module("ragtrim_bench.relevance.rows")
    scorer = BM25Scorer(analyzer="kiwi")

    def run(chunks: Sequence[Mapping[str, Any]], query: str, budget: int) -> str:
        return Pipeline(kiwi_stages(budget, scorer)).run(chunks, query=query).text

    return rows.Row("bm25-kiwi", run, 'the default pipeline with BM25Scorer(analyzer="kiwi") ranking chunks and '
                    "sentences (Korean morphemes before the bigrams)", clear=rows.scorer_clearer(scorer))
