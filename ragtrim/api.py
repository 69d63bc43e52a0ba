"""``trim()``: one call with sensible defaults, and the default pipeline it uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim.models import TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import Stage
from ragtrim.tokens import TokenCounter


def default_stages(*, budget: int | None = None) -> list[Stage]:
    """HTML cleanup -> exact and near duplicates -> hard token budget (when ``budget`` is given)."""
    from ragtrim.stages.budget import TokenBudget
    from ragtrim.stages.dedup import DuplicateFilter
    from ragtrim.stages.html import HtmlCleaner

    stages: list[Stage] = [HtmlCleaner(), DuplicateFilter()]
    if budget is not None:
        stages.append(TokenBudget(max_tokens=budget))
    return stages


def default_pipeline(*, budget: int | None = None, tokenizer: str | TokenCounter | None = None) -> Pipeline:
    return Pipeline(default_stages(budget=budget), tokenizer=tokenizer)


def trim(
    chunks: Iterable[Any],
    *,
    query: str = "",
    budget: int | None = None,
    tokenizer: str | TokenCounter | None = None,
    pipeline: Pipeline | None = None,
    history: Iterable[Any] | None = None,
    state: Any = None,
) -> TrimResult:
    """Trim retrieved ``chunks`` for ``query`` to at most ``budget`` tokens.

    ``chunks`` may be strings, dicts (``text``/``page_content``, optional ``id``, ``score``, ``metadata``) or
    Chunk objects. Tokens are counted with tiktoken ``cl100k_base`` unless ``tokenizer`` names another counter
    (e.g. ``"hf:/models/gemma-3/tokenizer.json"``). Pass ``pipeline`` to use your own stages.
    """
    if pipeline is None:
        pipeline = default_pipeline(budget=budget, tokenizer=tokenizer)
    elif budget is not None or tokenizer is not None:
        raise ConfigError("pass either pipeline= or budget=/tokenizer=, not both; put the budget stage in your pipeline")
    return pipeline.run(chunks, query=query, history=history, state=state)
