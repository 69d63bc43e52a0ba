"""``conforms``: isinstance against a runtime-checkable protocol, remembered per class only where the class itself
has every member."""

from __future__ import annotations

from collections.abc import Sequence

from ragtrim._util.protocols import _CONFORMING, conforms
from ragtrim.scoring.base import Scorer


class ClassScorer:
    name = "class"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [0.0] * len(texts)


class InstanceScorer:
    """A scorer only through what each instance is given."""

    def __init__(self) -> None:
        self.name = "instance"
        self.score = lambda query, texts: [0.0] * len(texts)


def test_a_conforming_class_is_remembered() -> None:
    assert conforms(ClassScorer(), Scorer)
    assert ClassScorer in _CONFORMING[Scorer]
    assert conforms(ClassScorer(), Scorer)
    assert not conforms(object(), Scorer) and not conforms("bm25", Scorer)


def test_members_on_instances_are_checked_every_time() -> None:
    assert conforms(InstanceScorer(), Scorer)
    assert InstanceScorer not in _CONFORMING[Scorer]
    assert not conforms(InstanceScorer.__new__(InstanceScorer), Scorer)  # an instance that was never given them
