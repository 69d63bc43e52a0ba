"""``trim()``: one call with sensible defaults, and the default pipeline it uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from ragtrim._util.validate import check_choice, check_float, check_int
from ragtrim.errors import ConfigError
from ragtrim.models import TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import Stage
from ragtrim.text.tokens import TokenCounter

ScorerChoice = Literal["auto", "given", "bm25", "embedding", "hybrid", "balanced", "balanced-qa", "fast"]
"""A stage-level name (``ragtrim.scoring.registry.STAGE_SCORER_NAMES``: ``"auto"``, ``"given"``) or a named scorer
(``ragtrim.scoring.registry.SCORER_NAMES``); a test keeps them equal."""


def embeddings_available() -> bool:
    """True when MiniLM can run here: the ``embeddings`` extra (onnxruntime and tokenizers; the model ships with
    ragtrim) or the ``torch`` extra is installed."""
    from ragtrim.scoring.auto import embeddings_available as sentence_transformers
    from ragtrim.scoring.auto import onnx_available, torch_available

    return onnx_available() or torch_available() or sentence_transformers()


def resolve_scorer(scorer: ScorerChoice) -> str:
    """The named scorer ``scorer`` stands for: ``auto`` is decided once per process by ``ragtrim.scoring.auto.choose``
    (``balanced`` when MiniLM can run, else ``bm25``); the decision and its reason are in ``to_dict()`` and the trace."""
    from ragtrim.scoring.auto import choose
    from ragtrim.scoring.registry import SCORER_NAMES, STAGE_SCORER_NAMES

    check_choice("scorer", scorer, (*STAGE_SCORER_NAMES, *SCORER_NAMES))
    return choose().scorer if scorer == "auto" else scorer


def default_stages(*, budget: int | None = None, scorer: ScorerChoice = "auto",
                   keep: float | None = None) -> list[Stage]:
    """HTML cleanup -> exact and near duplicates -> relevance scores -> [query-aware sentence compression -> hard
    token budget, when ``budget`` is given] -> best chunks first.

    With ``keep`` (retention mode) the compression step is replaced by ``RetentionFilter``: the fewest best chunks
    that hold the answer with probability ``keep`` under the scorer's calibration, whole; ``budget`` then caps
    them (``ragtrim.stages.retention``).

    Chosen by the QA savings benchmark (docs/qa-benchmark.md) and the net-latency benchmark (docs/latency.md):
    passages ranked by ``scorer`` (``auto``: ``balanced``, BM25 mixed with MiniLM over each passage's first 128 word
    pieces, when MiniLM can run, else BM25; chosen on every column of the quality matrix, docs/relevance.md),
    sentences selected across passages by BM25 against one global budget, then
    the budget enforced. BM25-only ranking loses 4-8 points of answer recall against hard distractors, so it is
    the fallback when the embeddings extra is absent, not the default.
    """
    budget = check_int("budget", budget, minimum=0, allow_none=True)
    from ragtrim.stages.budget import TokenBudget
    from ragtrim.stages.compress import SentenceCompressor
    from ragtrim.stages.dedup import DuplicateFilter
    from ragtrim.stages.html import HtmlCleaner
    from ragtrim.stages.order import Reorder
    from ragtrim.stages.relevance import RelevanceFilter

    stages: list[Stage] = [HtmlCleaner(), DuplicateFilter(), RelevanceFilter(scorer=scorer, top_k=None)]
    if keep is not None:
        from ragtrim.stages.retention import RetentionFilter

        stages.append(RetentionFilter(keep=keep, calibration=resolve_scorer(scorer), max_tokens=budget))
        if budget is not None:
            stages.append(TokenBudget(max_tokens=budget))
        stages.append(Reorder(strategy="score"))
        return stages
    if budget is not None:
        stages += [SentenceCompressor(scorer="bm25", max_tokens=budget), TokenBudget(max_tokens=budget)]
    stages.append(Reorder(strategy="score"))
    return stages


def default_pipeline(
    *, budget: int | None = None, tokenizer: str | TokenCounter | None = None, scorer: ScorerChoice = "auto",
    keep: float | None = None,
) -> Pipeline:
    return Pipeline(default_stages(budget=budget, scorer=scorer, keep=keep), tokenizer=tokenizer)


def lossless_pipeline(*, tokenizer: str | TokenCounter | None = None) -> Pipeline:
    """What can go without losing anything a reader needs: HTML cleanup and exact and near-duplicate documents, in
    their order (no ranking, no budget). The gateway's ``[trim] budget = "lossless"``; ``ragtrim audit`` measures
    the same stages when it runs without ``--budget``."""
    from ragtrim.stages.dedup import DuplicateFilter
    from ragtrim.stages.html import HtmlCleaner

    return Pipeline([HtmlCleaner(), DuplicateFilter()], tokenizer=tokenizer)


def trim(
    chunks: Iterable[Any],
    *,
    query: str = "",
    budget: int | None = None,
    tokenizer: str | TokenCounter | None = None,
    pipeline: Pipeline | None = None,
    history: Iterable[Any] | None = None,
    state: Any = None,
    scorer: ScorerChoice = "auto",
    prefill_ms_per_token: float | None = None,
    keep: float | None = None,
) -> TrimResult:
    """Trim retrieved ``chunks`` for ``query`` to at most ``budget`` tokens.

    ``chunks`` may be strings, dicts (``text``/``page_content``, optional ``id``, ``score``, ``metadata``) or
    Chunk objects. ``budget`` is an int >= 0 (or None for no budget): ``counter.count(result.text)`` never exceeds it,
    separators included; ``budget=0`` is valid and keeps nothing (every chunk gets an ``over_budget`` record), the
    same in the LangChain classes. Tokens are counted with tiktoken ``cl100k_base`` unless ``tokenizer`` names another counter
    (e.g. ``"hf:/models/gemma-3/tokenizer.json"``). ``scorer`` ranks chunks: ``auto`` (MiniLM when the
    ``embeddings`` extra is installed, else BM25) or a named scorer (``bm25``, ``embedding``, ``hybrid``, ``fast``:
    ``ragtrim.scoring.registry.SCORER_NAMES``). Pass ``pipeline`` to use
    your own stages.

    ``prefill_ms_per_token``: what one prompt token costs the model that reads the result (its prefill time per
    token, e.g. 0.037 for a 12B model on an H200, several ms for llama.cpp on a CPU). With it, ``scorer="auto"``
    trims only as far as it pays (``ragtrim.recipes``): the best recipe whose expected cost here is below the
    prefill time it saves, down to HTML cleanup and exact duplicates only, when even BM25 would cost more than it
    saves; the budget then holds only when a recipe that enforces it was chosen. The choice and its reason are the
    trace's first report (stage ``"auto"``). The first such call measures each recipe once (``RecipeCosts``).
    ``keep`` (retention mode, a probability in (0, 1)): instead of a blind ratio, keep the fewest best chunks that
    hold the answer with that probability, by the scorer's calibration on the quality matrix's dev columns (for
    ``auto``, ``balanced`` and ``bm25``); ``budget`` is then a cap. The estimate, and whether ranking was unsure, are
    in the trace (the ``retention`` stage's info).
    """
    if prefill_ms_per_token is not None:
        per_token = check_float("prefill_ms_per_token", prefill_ms_per_token, minimum=0.0)
        if keep is not None:
            raise ConfigError("keep= and prefill_ms_per_token= each decide how much to keep (by the answer's "
                              "probability, by cost): pass one of them")
        if pipeline is not None or scorer != "auto":
            raise ConfigError("prefill_ms_per_token chooses the recipe by cost: use it with scorer='auto' and no "
                              f"pipeline (got scorer={scorer!r}{', a pipeline' if pipeline is not None else ''})")
        budget = check_int("budget", budget, minimum=0, allow_none=True)
        return _trim_by_cost(chunks, query=query, budget=budget, tokenizer=tokenizer, history=history, state=state,
                            prefill_ms_per_token=per_token)
    if pipeline is None:
        pipeline = default_pipeline(budget=budget, tokenizer=tokenizer, scorer=scorer, keep=keep)
    elif budget is not None or tokenizer is not None or keep is not None:
        raise ConfigError("pass either pipeline= or budget=/tokenizer=/keep=, not both; put the budget stage in your "
                          "pipeline")
    return pipeline.run(chunks, query=query, history=history, state=state)


def recipe_pipeline(recipe: str, *, budget: int | None, tokenizer: str | TokenCounter | None = None) -> Pipeline:
    """The pipeline of a recipe ``scorer="auto"`` may choose by cost (``ragtrim.recipes.RECIPES``): the default
    pipeline with that scorer, or for ``clean`` HTML cleanup and exact duplicates only (no budget)."""
    from ragtrim.recipes import RECIPES
    from ragtrim.stages.dedup import DuplicateFilter
    from ragtrim.stages.html import HtmlCleaner

    check_choice("recipe", recipe, RECIPES)
    if recipe == "clean":
        return Pipeline([HtmlCleaner(), DuplicateFilter(near=False)], tokenizer=tokenizer)
    return default_pipeline(budget=budget, tokenizer=tokenizer, scorer=recipe)  # type: ignore[arg-type]


def _trim_by_cost(chunks: Iterable[Any], *, query: str, budget: int | None, tokenizer: str | TokenCounter | None,
                  history: Iterable[Any] | None, state: Any, prefill_ms_per_token: float) -> TrimResult:
    """``trim()`` with ``prefill_ms_per_token``: count the input, choose the recipe (``ragtrim.recipes``, the saving
    being ``prefill_ms_per_token`` times the tokens removed), run it, learn its cost, and put the choice first in
    the trace."""
    import dataclasses
    import time

    from ragtrim.inputs import coerce_chunks
    from ragtrim.models import StageReport
    from ragtrim.recipes import AUTO_STAGE, available_recipes, choose_recipe, shared_costs
    from ragtrim.text.tokens import get_counter

    started = time.perf_counter()
    costs = shared_costs()
    items = coerce_chunks(chunks)
    counter = get_counter(tokenizer)
    tokens = sum(counter.count(c.text) for c in items)
    pool = available_recipes()
    if budget is not None and budget < tokens:
        costs.calibrate([r for r in pool if r != "clean"], build=recipe_pipeline, tokenizer=tokenizer)
    choice = choose_recipe(tokens_before=tokens, budget=budget, costs=costs, recipes=pool,
                           saving_ms=lambda before, after: prefill_ms_per_token * (before - after),
                           basis=f"{prefill_ms_per_token:g} ms per prompt token")
    decided = time.perf_counter()
    result = recipe_pipeline(choice.recipe, budget=budget, tokenizer=tokenizer).run(items, query=query,
                                                                                  history=history, state=state)
    if choice.recipe != "clean":
        costs.observe(choice.recipe, tokens, time.perf_counter() - decided)
    report = StageReport(stage=AUTO_STAGE, chunks_in=len(items), chunks_out=len(items), tokens_in=tokens,
                         tokens_out=tokens, removals=(), seconds=decided - started, info=choice.to_dict())
    return dataclasses.replace(result, trace=(report, *result.trace))
