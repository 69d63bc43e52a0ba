"""The stage contract and registry: a stage takes a TrimContext and returns a StageOutput, never mutating input.

Stages are components (``ragtrim.components``): keyword-only parameters declared as dataclass fields with their
constraints, so ``to_dict`` can read the config back and ``stage_from_dict`` can rebuild the stage. Heavy resources
load lazily in ``warm_up``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from ragtrim.components import Component, from_config, register, registered
from ragtrim.models import Chunk, StageOutput, TrimContext
from ragtrim.scoring.base import best_first
from ragtrim.text.tokens import TokenCounter

__all__ = ["Stage", "chunk_tokens", "register_stage", "registered_stages", "score_order", "stage_from_dict"]

S = TypeVar("S", bound="type[Stage]")


class Stage(Component, ABC):
    """Base class of pipeline stages. Subclasses set ``name`` and implement ``run``; their parameters are the fields
    of a ``@component`` dataclass (a hand-written ``__init__`` works too: ``get_params`` then reads its keyword-only
    parameters back from attributes of the same names)."""

    name: ClassVar[str] = "stage"
    warm_up_on_first_run: ClassVar[bool] = True
    """False for a stage that loads its heavy resources itself, on the first request that needs them (the relevance
    stage: only when there is something to rank), so that ``Pipeline.run`` does not call ``warm_up`` for it;
    ``Pipeline.warm_up()`` still does."""
    reads_token_counts: ClassVar[bool] = True
    """False for a stage that reads no ``Chunk.token_count`` (the pipeline fills exact counts into its removal
    records itself): as the first stage it then runs while the input is still being counted on worker threads
    (``ragtrim.text.counting``), and its chunks may arrive with ``token_count`` None."""

    @abstractmethod
    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        """Return a new context plus a record for every chunk dropped or shortened."""

    def warm_up(self) -> None:
        """Load heavy resources (models, indexes). Called once by the pipeline before its first run (unless
        ``warm_up_on_first_run`` is False) and by ``Pipeline.warm_up()``."""

    def prefetch(self, context: TrimContext, *, counter: TokenCounter) -> None:
        """Optional: start work that ``run`` will need, on the request as it arrives, before any stage runs.

        ``Pipeline.run`` calls every stage's ``prefetch`` in order, then runs the stages. A stage may start a model
        pass in the background (the relevance stage) or fill caches keyed by text (sentence splits, token counts),
        so that the model pass and the CPU stages overlap. Whatever it does must only warm caches: ``run`` must
        give the same result whether or not ``prefetch`` ran (earlier stages may change or drop the chunks)."""

    @classmethod
    def type_name(cls) -> str:
        return cls.name

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> Stage:
        return stage_from_dict(config)


def register_stage(cls: S) -> S:
    """Class decorator: make a stage constructible from a dict by its ``name``."""
    return register("stage", cls.name)(cls)


def registered_stages() -> dict[str, type[Stage]]:
    return {name: cls for name, cls in registered("stage").items() if issubclass(cls, Stage)}


def stage_from_dict(config: Mapping[str, Any]) -> Stage:
    """Build a stage from ``{"type": name, **params}``."""
    stage: Stage = from_config("stage", config)
    return stage


def score_order(chunks: Sequence[Chunk]) -> list[int]:
    """Indices best-first; unscored chunks after scored ones; ties by input position."""
    return best_first([c.score for c in chunks])


def chunk_tokens(chunk: Chunk, counter: TokenCounter) -> int:
    """The chunk's token count: the one it carries, else counted now."""
    return chunk.token_count if chunk.token_count is not None else counter.count(chunk.text)
