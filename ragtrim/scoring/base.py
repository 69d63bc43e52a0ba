"""The scorer protocol and what every scorer and the stages that use them share: the one best-first order, the
check of a score call's inputs, and the optional warm-up and prefetch hooks. No numpy here: ``import ragtrim`` loads
this module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragtrim.errors import InputError


@runtime_checkable
class Scorer(Protocol):
    """Scores texts against a query; a higher score means more relevant. Scores are comparable within one call."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


def best_first(scores: Sequence[float | None]) -> list[int]:
    """Indices by descending score; unscored (None) after scored; ties keep input order (stable)."""
    return sorted(range(len(scores)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))


def check_score_inputs(query: str, texts: Sequence[str]) -> None:
    """The ``Scorer.score`` argument check every scorer runs first (InputError for the common mistakes)."""
    if not isinstance(query, str):
        raise InputError(f"query must be str, got {type(query).__name__}")
    if isinstance(texts, str):
        raise InputError("texts must be a sequence of str, got a single str; wrap it in a list")


def prefetch_scores(scorers: Sequence[Scorer], query: str, texts: Sequence[str]) -> None:
    """Let those ``scorers`` that have a ``prefetch`` start on ``query`` and ``texts`` in the background (see
    ``ragtrim.scoring.embedding.CachedEmbedder.prefetch``); the others are left alone."""
    for scorer in scorers:
        start = getattr(scorer, "prefetch", None)
        if callable(start):
            start(query, texts)


def warm_up_scorers(scorers: Sequence[Scorer]) -> None:
    """Load the models of those ``scorers`` that have a ``warm_up`` (composite scorers call it for their parts)."""
    for scorer in scorers:
        warm = getattr(scorer, "warm_up", None)
        if callable(warm):
            warm()
