"""The bench rows that stand for the default before one of its changes: each loses, on a real TAT-QA dev request,
the answer the default keeps because of that change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ragtrim import get_counter
from ragtrim_bench.relevance.columns import build_column
from ragtrim_bench.relevance.matrix import answer_kept, budget_for, context_tokens, trim_input
from ragtrim_bench.relevance.rows import (
    Row,
    lookup_per_table,
    no_lookup,
    no_reason_hint,
    own_text_hint,
    resolve_rows,
)

# A TAT-QA dev request whose answer (a year) is only in the header of the row that answers it.
YEAR_IN_HEADER = "b2d71998bec64fb234c7b0f93a8ed6d3"
# A TAT-QA dev request, "What was the research and development expense in 2019?", whose table ranks 12th of 20.
LOOKUP = "414b4ef29d5fb8114a86f0d8a33ddace"
# A TAT-QA dev request, "What caused the increase in research and development expense?": the cause is the next sentence.
REASON = "8db7f46bf649c3befa9d8020ccad6874"
# A TAT-QA dev request, "What was the total revenue in FY19?": its table's header says "30 June 2019".
FISCAL = "84eb91242486f294cff97bd29c6cde0c"


@pytest.mark.model
@pytest.mark.parametrize(("make", "name", "request_id", "ratio"), [
    # "In which year was the total deferred tax assets larger?": the default's hint reads the answering row with its
    # header's years; the row as it was reads the row alone.
    (own_text_hint, "own_text_hint", YEAR_IN_HEADER, 8),
    # The table ranks low among its chunks: the default keeps its "Research and development" row under the 2019
    # header through the lookup bonus; without it, paragraphs that repeat the question's words take the budget.
    (no_lookup, "no_lookup", LOOKUP, 4),
    # The default's hint lifts the sentence that gives the reason ("primarily due to ..."); without the reason
    # kind the sentence that repeats the question is kept instead.
    (no_reason_hint, "no_reason_hint", REASON, 8),
    # At 8x the lookup lifts the best row of many tables, and rows that share one word of "research and development
    # expense" take the budget; the default lifts only rows close to the best match of the request.
    (lookup_per_table, "lookup_per_table", LOOKUP, 8),
    # "FY19" is the year 2019: the default's lookup finds the "Total revenue" row under "30 June 2019".
    (lookup_per_table, "lookup_per_table", FISCAL, 4),
])
def test_the_row_is_the_default_without_its_change(shared_data: Path, make: Callable[[], Row], name: str,
                                                    request_id: str, ratio: int) -> None:
    request = next(r for r in build_column("tatqa", "dev", limit=400, seed=0) if r.id == request_id)
    budget = budget_for(context_tokens(request, get_counter(None)), ratio)
    chunks = trim_input(request, with_scores=False)
    (default,) = resolve_rows(["default"])
    assert answer_kept(request.answers, default.trim(chunks, request.question, budget))
    assert not answer_kept(request.answers, make().trim(chunks, request.question, budget))
    (named,) = resolve_rows([f"ragtrim_bench.relevance.rows:{name}"])
    assert named.name == make().name
