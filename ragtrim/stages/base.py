"""The stage contract and registry: a stage takes a TrimContext and returns a StageOutput, never mutating input.

Constructors only store and validate keyword-only parameters under their own names, so ``to_dict`` can read the
config back and ``stage_from_dict`` can rebuild the stage. Heavy resources load lazily in ``warm_up``.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, StageOutput, TrimContext
from ragtrim.tokens import TokenCounter

_REGISTRY: dict[str, type[Stage]] = {}

S = TypeVar("S", bound="type[Stage]")


class Stage(ABC):
    """Base class of pipeline stages. Subclasses set ``name`` and implement ``run``."""

    name: ClassVar[str] = "stage"

    @abstractmethod
    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        """Return a new context plus a record for every chunk dropped or shortened."""

    def warm_up(self) -> None:
        """Load heavy resources (models, indexes). Called once by the pipeline before the first run."""

    def prefetch(self, context: TrimContext, *, counter: TokenCounter) -> None:
        """Optional: start work that ``run`` will need, on the request as it arrives, before any stage runs.

        ``Pipeline.run`` calls every stage's ``prefetch`` in order, then runs the stages. A stage may start a model
        pass in the background (the relevance stage) or fill caches keyed by text (sentence splits, token counts),
        so that the model pass and the CPU stages overlap. Whatever it does must only warm caches: ``run`` must
        give the same result whether or not ``prefetch`` ran (earlier stages may change or drop the chunks)."""

    def get_params(self) -> dict[str, Any]:
        """The constructor's keyword-only parameters and their current values."""
        sig = inspect.signature(type(self).__init__)
        return {
            p.name: getattr(self, p.name)
            for p in sig.parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }

    def to_dict(self) -> dict[str, Any]:
        """``{"type": name, **params}``. A parameter holding an object (a Scorer instance, a callable) is written as
        ``{"unserializable": repr(obj)}``: the config still says what was there, and ``stage_from_dict`` refuses it
        instead of silently building the stage with the default."""
        params = {k: (v if _is_plain(v) else {UNSERIALIZABLE: repr(v)}) for k, v in self.get_params().items()}
        return {"type": self.name, **params}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


UNSERIALIZABLE = "unserializable"
AUTO_KEY = "auto"
"""Written by ``to_dict`` beside a parameter set to ``"auto"``: what it resolved to on this host and why. Informational:
``stage_from_dict`` ignores it, and the parameter stays ``"auto"``, so a config moves between hosts unchanged."""


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def register_stage(cls: S) -> S:
    """Class decorator: make a stage constructible from a dict by its ``name``."""
    name = cls.name
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ConfigError(f"stage name {name!r} is already registered by {_REGISTRY[name].__name__}")
    _REGISTRY[name] = cls
    return cls


def registered_stages() -> dict[str, type[Stage]]:
    _load_builtin_stages()
    return dict(_REGISTRY)


def stage_from_dict(config: Mapping[str, Any]) -> Stage:
    """Build a stage from ``{"type": name, **params}``."""
    if not isinstance(config, Mapping) or "type" not in config:
        shown = f"keys {sorted(map(str, config))[:20]}" if isinstance(config, Mapping) else type(config).__name__
        raise ConfigError(f"a stage config must be a dict with a 'type' key, got {shown}")
    stages = registered_stages()
    kind = config["type"]
    if not isinstance(kind, str):
        raise ConfigError(f"a stage 'type' must be a stage name (str), got {type(kind).__name__}; known: {sorted(stages)}")
    if kind not in stages:
        raise ConfigError(f"unknown stage type {kind!r}; known: {sorted(stages)}")
    params = {k: v for k, v in config.items() if k not in ("type", AUTO_KEY)}
    for key, value in params.items():
        if isinstance(value, Mapping) and set(value) == {UNSERIALIZABLE}:
            raise ConfigError(
                f"stage {kind!r}: parameter {key!r} held an object ({value[UNSERIALIZABLE]}) that a config cannot "
                "recreate; build this stage in code, or use a named value (e.g. scorer='embedding')"
            )
    cls = stages[kind]
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"stage {kind!r}: {exc}") from exc


_BUILTIN_MODULES = (
    "ragtrim.stages.html",
    "ragtrim.stages.dedup",
    "ragtrim.stages.budget",
    "ragtrim.stages.relevance",
    "ragtrim.stages.compress",
    "ragtrim.stages.order",
    "ragtrim.stages.history",
)


def _load_builtin_stages(importer: Callable[[str], Any] | None = None) -> None:
    import importlib

    for module in _BUILTIN_MODULES:
        try:
            (importer or importlib.import_module)(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a stage's own optional import failing must not hide the stage
                raise


def score_order(chunks: Sequence[Chunk]) -> list[int]:
    """Indices best-first; unscored chunks after scored ones; ties by input position."""
    return sorted(range(len(chunks)), key=lambda i: (chunks[i].score is None, -(chunks[i].score or 0.0), i))


def chunk_tokens(chunk: Chunk, counter: TokenCounter) -> int:
    """The chunk's token count: the one it carries, else counted now."""
    return chunk.token_count if chunk.token_count is not None else counter.count(chunk.text)
