"""``trim()``: one call with sensible defaults, and the default pipeline it uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from ragtrim._util.validate import check_choice, check_int
from ragtrim.errors import ConfigError
from ragtrim.models import TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import Stage
from ragtrim.text.tokens import TokenCounter

ScorerChoice = Literal["auto", "given", "bm25", "embedding", "hybrid", "balanced", "fast"]
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

    ``keep`` (retention mode, a probability in (0, 1)): instead of a blind ratio, keep the fewest best chunks that
    hold the answer with that probability, by the scorer's calibration on the quality matrix's dev columns (for
    ``auto``, ``balanced`` and ``bm25``); ``budget`` is then a cap. The estimate, and whether ranking was unsure, are
    in the trace (the ``retention`` stage's info).
    """
    if pipeline is None:
        pipeline = default_pipeline(budget=budget, tokenizer=tokenizer, scorer=scorer, keep=keep)
    elif budget is not None or tokenizer is not None or keep is not None:
        raise ConfigError("pass either pipeline= or budget=/tokenizer=/keep=, not both; put the budget stage in your "
                          "pipeline")
    return pipeline.run(chunks, query=query, history=history, state=state)
