from __future__ import annotations

from pathlib import Path

import pytest

from ragtrim import get_counter
from ragtrim_bench.relevance.columns import build_column
from ragtrim_bench.relevance.matrix import answer_kept, budget_for, context_tokens, trim_input
from ragtrim_bench.relevance.rows import no_lookup, no_reason_hint, own_text_hint, resolve_rows

# A TAT-QA dev request whose answer (a year) is only in the header of the row that answers it.
YEAR_IN_HEADER = "b2d71998bec64fb234c7b0f93a8ed6d3"
# A TAT-QA dev request, "What was the research and development expense in 2019?", whose table ranks 12th of 20.
LOOKUP = "414b4ef29d5fb8114a86f0d8a33ddace"
# A TAT-QA dev request, "What caused the increase in research and development expense?": the cause is the next sentence.
REASON = "8db7f46bf649c3befa9d8020ccad6874"


@pytest.mark.model
def test_own_text_hint_is_the_default_with_the_hint_as_it_was(shared_data: Path) -> None:
    """"In which year was the total deferred tax assets larger?": the default's hint reads the answering row with
    its header's years and keeps the answer at 4x; the row as it was reads the row alone and loses it."""
    request = next(r for r in build_column("tatqa", "dev", limit=400, seed=0) if r.id == YEAR_IN_HEADER)
    budget = budget_for(context_tokens(request, get_counter(None)), 4)
    chunks = trim_input(request, with_scores=False)
    (default,) = resolve_rows(["default"])
    assert answer_kept(request.answers, default.trim(chunks, request.question, budget))
    assert not answer_kept(request.answers, own_text_hint().trim(chunks, request.question, budget))
    assert [r.name for r in resolve_rows(["ragtrim_bench.relevance.rows:own_text_hint"])] == ["own-text-hint"]


@pytest.mark.model
def test_no_lookup_is_the_default_without_the_lookup_bonus(shared_data: Path) -> None:
    """The table that answers "What was the research and development expense in 2019?" ranks low among its chunks:
    the default keeps its "Research and development" row under the 2019 header at 4x through the lookup bonus; the
    row without the bonus loses it to paragraphs that repeat the question's words."""
    request = next(r for r in build_column("tatqa", "dev", limit=400, seed=0) if r.id == LOOKUP)
    budget = budget_for(context_tokens(request, get_counter(None)), 4)
    chunks = trim_input(request, with_scores=False)
    (default,) = resolve_rows(["default"])
    assert answer_kept(request.answers, default.trim(chunks, request.question, budget))
    assert not answer_kept(request.answers, no_lookup().trim(chunks, request.question, budget))
    assert [r.name for r in resolve_rows(["ragtrim_bench.relevance.rows:no_lookup"])] == ["no-lookup"]


@pytest.mark.model
def test_no_reason_hint_is_the_default_without_the_reason_kind(shared_data: Path) -> None:
    """"What caused the increase in research and development expense?": the default's hint lifts the sentence that
    gives the reason ("primarily due to ...") and keeps the answer at 8x; without the reason kind it is lost."""
    request = next(r for r in build_column("tatqa", "dev", limit=400, seed=0) if r.id == REASON)
    budget = budget_for(context_tokens(request, get_counter(None)), 8)
    chunks = trim_input(request, with_scores=False)
    (default,) = resolve_rows(["default"])
    assert answer_kept(request.answers, default.trim(chunks, request.question, budget))
    assert not answer_kept(request.answers, no_reason_hint().trim(chunks, request.question, budget))
