"""A scorer that reads a view of each text: the part of it, or the order of its parts, that the inner scorer should
see for the query (``WindowScorer``: the stretch from the best sentence; ``TableRowsScorer``: a table's header and
the rows the question names). The view depends on the query and the text alone, so a prefetch reads the same views
as the scoring call, and the inner scorer's caches and vector store hold the views."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ragtrim._util.validate import Constraints
from ragtrim.components import Component, component
from ragtrim.scoring.base import Scorer, check_score_inputs, prefetch_scores, warm_up_scorers
from ragtrim.scoring.registry import get_scorer, scorer_param


@component
class ViewScorer(Component):
    """Score each text with ``scorer`` on ``views(query, texts)``; a subclass says what the view is."""

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {"scorer": [scorer_param()]}

    scorer: Scorer | str = "embedding"

    def views(self, query: str, texts: Sequence[str]) -> list[str]:
        """What the inner scorer reads of each text."""
        raise NotImplementedError

    def parts(self) -> tuple[Scorer, ...]:
        return (get_scorer(self.scorer),)

    def scripts_read(self) -> frozenset[str] | None:
        read = getattr(get_scorer(self.scorer), "scripts_read", None)
        return read() if callable(read) else None

    def warm_up(self) -> None:
        warm_up_scorers(self.parts())

    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        if isinstance(query, str) and texts:
            prefetch_scores(self.parts(), query, self.views(query, texts))

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        check_score_inputs(query, texts)
        if not texts:
            return []
        return list(get_scorer(self.scorer).score(query, self.views(query, texts)))
