"""What scorers and the stages that use them share: the one best-first order, and the check of a score call's inputs."""

from __future__ import annotations

from collections.abc import Sequence

from ragtrim.errors import InputError


def best_first(scores: Sequence[float | None]) -> list[int]:
    """Indices by descending score; unscored (None) after scored; ties keep input order (stable)."""
    return sorted(range(len(scores)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))


def check_score_inputs(query: str, texts: Sequence[str]) -> None:
    """The ``Scorer.score`` argument check every scorer runs first (InputError for the common mistakes)."""
    if not isinstance(query, str):
        raise InputError(f"query must be str, got {type(query).__name__}")
    if isinstance(texts, str):
        raise InputError("texts must be a sequence of str, got a single str; wrap it in a list")
