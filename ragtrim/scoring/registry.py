"""The named scorers: the one list of names a stage's ``scorer`` parameter, ``trim(scorer=...)``, the CLI's
``--scorer`` and the gateway's ``trim.scorer`` accept, and ``get_scorer``, which shares one scorer per name.

Each name's factory is registered where its scorer lives (``@named_scorer("bm25")``); ``ragtrim._catalog`` (generated
from the source) says which module that is, so this module imports none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Literal, TypeVar, get_args

from ragtrim import _catalog
from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.protocols import conforms
from ragtrim.components import Plugin
from ragtrim.errors import ConfigError
from ragtrim.scoring.base import Scorer

ScorerName = Literal["bm25", "embedding", "hybrid", "balanced", "balanced-qa", "fast"]
"""The named scorers, for type checkers."""
SCORER_NAMES: tuple[str, ...] = get_args(ScorerName)
"""The one list of scorer names, in the order messages and docs give them. ``bm25`` is Okapi BM25; ``embedding``
cosine similarity of MiniLM embeddings; ``hybrid`` BM25 + MiniLM, min-max mixed with weights 0.15 / 0.85 (tuned on NQ
dev questions); ``balanced`` the default recipe (a trained map on MiniLM's vector of a long query,
``ragtrim.scoring.adapter``) and ``balanced-qa`` the same with the map on every query; ``fast`` BM25 + MiniLM over each passage's first word pieces on the cheapest
backend of the host (``ragtrim.scoring.auto``)."""
STAGE_SCORER_NAMES: tuple[str, ...] = ("auto", "given")
"""Names the relevance stage resolves itself: ``"auto"`` (decided per host by ``ragtrim.scoring.auto.choose``) and
``"given"`` (each chunk's own ``score``, e.g. the retriever's similarity: no scoring work at all)."""

F = TypeVar("F", bound=Callable[[], Scorer])
_FACTORIES: dict[str, Callable[[], Scorer]] = {}
_SHARED: dict[str, Scorer] = {}
_SHARED_LOCK = fork_safe_lock(reentrant=True)


def named_scorer(name: str) -> Callable[[F], F]:
    """Decorator: ``factory`` builds the scorer that ``get_scorer(name)`` shares; ``name`` is one of
    ``SCORER_NAMES``."""
    if name not in SCORER_NAMES:
        raise ConfigError(f"named scorer {name!r} is not one of {list(SCORER_NAMES)}; add it to ScorerName")

    def add(factory: F) -> F:
        _FACTORIES[name] = factory
        return factory

    return add


def _factory(name: str) -> Callable[[], Scorer]:
    if name not in _FACTORIES:
        importlib.import_module(_catalog.NAMED_SCORERS[name])
    return _FACTORIES[name]


def scorer_param(*, allow_auto: bool = False) -> Plugin:
    """The constraint of a ``scorer`` parameter: a named scorer (``STAGE_SCORER_NAMES`` too where a stage resolves
    them), a ``Scorer`` object, or in a config a scorer's ``to_dict()``. Checked at construction; no model is
    loaded."""
    names = (*STAGE_SCORER_NAMES, *SCORER_NAMES) if allow_auto else SCORER_NAMES
    return Plugin("scorer", Scorer, names=names, describe="an object with name and score(query, texts)")


def shared_scorers() -> list[Scorer]:
    """The named scorers built so far in this process (``get_scorer`` shares one per name)."""
    with _SHARED_LOCK:
        return list(_SHARED.values())


def get_scorer(spec: Scorer | str) -> Scorer:
    """A scorer from a name (``SCORER_NAMES``: ``bm25``, ``embedding``, ``hybrid``, ``fast``) or the scorer itself.

    Named scorers are shared per process, so every stage that says ``"embedding"`` uses one model and one cache.
    """
    if isinstance(spec, str):
        with _SHARED_LOCK:
            if spec not in _SHARED:
                if spec not in SCORER_NAMES:
                    raise ConfigError(f"unknown scorer {spec!r}; use one of {list(SCORER_NAMES)} or pass a Scorer "
                                      "object")
                _SHARED[spec] = _factory(spec)()
            return _SHARED[spec]
    if conforms(spec, Scorer):
        return spec
    raise ConfigError(f"scorer must be one of {list(SCORER_NAMES)} or a Scorer object, got {spec!r}")
