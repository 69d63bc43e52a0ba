"""One plugin and serialisation scheme for stages, scorers, token counters and summarizers.

A component is a keyword-only dataclass (``@component``) that subclasses ``Component``, declares its parameters'
``_parameter_constraints`` (checked once, at construction) and is registered under a type name
(``@register("scorer", "bm25")``). ``to_dict()`` writes ``{"type": name, **params}``, nested components as their own
dicts; ``from_dict`` / ``from_config(kind, config)`` rebuilds them (Haystack's ``default_to_dict`` /
``default_from_dict``, scikit-learn's ``get_params``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Self, TypeVar, dataclass_transform

from ragtrim import _catalog
from ragtrim._util.redact import MASK, redact, redact_url
from ragtrim._util.validate import Constraint, Constraints, plain_number, validate_params
from ragtrim.errors import ConfigError

Kind = Literal["stage", "scorer", "counter", "summarizer"]
KINDS: tuple[Kind, ...] = ("stage", "scorer", "counter", "summarizer")

UNSERIALIZABLE = "unserializable"
"""``to_dict`` writes ``{"unserializable": repr(obj)}`` for a parameter holding an object that is not a registered
component (a user's own scorer class, a callable): the config still says what was there, and ``from_dict`` refuses
it instead of silently building the default."""
REDACTED = "redacted"
"""``to_dict`` writes ``{"redacted": why}`` for a secret (an API key): it is never written, and never read back."""

_REGISTRY: dict[Kind, dict[str, type[Component]]] = {kind: {} for kind in KINDS}
_NAME_OF: dict[type, tuple[Kind, str]] = {}
_CONSTRAINTS: dict[type, dict[str, Constraints]] = {}

T = TypeVar("T")
C = TypeVar("C", bound="type[Component]")


@dataclass_transform(kw_only_default=True, eq_default=False, field_specifiers=(dataclasses.field,))
def component(cls: type[T]) -> type[T]:
    """Make ``cls`` a component dataclass: keyword-only parameters (the fields), compared by identity, shown by
    ``Component.__repr__``. Private state is a ``field(init=False, ...)`` and is not a parameter."""
    return dataclasses.dataclass(kw_only=True, eq=False, repr=False)(cls)


class Component:
    """Base class of everything pluggable: parameters declared as dataclass fields with constraints, validated once
    when the object is built, read back by ``get_params`` and written by ``to_dict``.

    ``_parameter_constraints`` maps each parameter to its constraints (``ragtrim._util.validate``); a subclass declares
    its own parameters only (those of its bases are merged in). Rules that tie parameters together go in
    ``_check_params``.
    """

    _parameter_constraints: ClassVar[Mapping[str, Constraints]] = {}
    _secret_params: ClassVar[frozenset[str]] = frozenset()
    """Parameters never shown: ``repr`` prints ``***`` and ``to_dict`` writes ``{"redacted": ...}``."""
    _not_from_config: ClassVar[str] = ""
    """Why ``from_dict`` refuses this class (empty: it does not). A config is data: a component that would send text
    over the network is written by ``to_dict`` but only ever built in code."""

    def __post_init__(self) -> None:
        constraints = self.parameter_constraints()
        for name in constraints:  # numpy scalars become the Python numbers they stand for, then are checked
            value = getattr(self, name, None)
            plain = plain_number(value)
            if plain is not value:
                object.__setattr__(self, name, plain)
        validate_params(constraints, {name: getattr(self, name) for name in constraints})
        self._check_params()

    def _check_params(self) -> None:
        """Rules across parameters (``max_tokens`` or ``target_ratio``, not both); raise ConfigError."""

    @classmethod
    def parameter_constraints(cls) -> dict[str, Constraints]:
        """The declared constraints of this class and its bases, by parameter."""
        merged = _CONSTRAINTS.get(cls)
        if merged is None:
            merged = {}
            for klass in reversed(cls.__mro__):
                merged.update(klass.__dict__.get("_parameter_constraints", {}))
            _CONSTRAINTS[cls] = merged
        return dict(merged)

    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters and their current values (the dataclass fields; for a hand-written
        ``__init__``, its keyword-only parameters read back from attributes of the same names)."""
        if dataclasses.is_dataclass(self):
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        sig = inspect.signature(type(self).__init__)
        return {p.name: getattr(self, p.name) for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY}

    @classmethod
    def type_name(cls) -> str:
        """The name this class is registered under (the ``"type"`` of its config)."""
        registered = _NAME_OF.get(cls)
        if registered is None:
            raise ConfigError(f"{cls.__name__} is not registered, so it has no config form; register it with "
                              "ragtrim.components.register(kind, name)")
        return registered[1]

    def to_dict(self) -> dict[str, Any]:
        """``{"type": type_name, **params}``; nested components as their own dicts, tuples as lists, paths as str."""
        params = {k: (to_config(v) if k not in self._secret_params or v is None else {REDACTED: "a secret"})
                  for k, v in self.get_params().items()}
        return {"type": self.type_name(), **params}

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> Self:
        """Rebuild a component of this class (or a registered subclass) from ``to_dict()`` output."""
        registered = _NAME_OF.get(cls)
        if registered is None:
            raise ConfigError(f"{cls.__name__} is not registered, so it cannot be built from a config")
        built = from_config(registered[0], config)
        if not isinstance(built, cls):
            raise ConfigError(f"{registered[0]} type {config.get('type')!r} is not a {cls.__name__}")
        return built

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={'***' if k in self._secret_params and v is not None else redact(repr(v))}"
                         for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def register(kind: Kind, name: str) -> Callable[[C], C]:
    """Class decorator: make a component class constructible from ``{"type": name, ...}`` where a ``kind`` goes."""

    def add(cls: C) -> C:
        table = _REGISTRY[kind]
        if name in table and table[name] is not cls:
            raise ConfigError(f"{kind} type {name!r} is already registered by {table[name].__name__}")
        table[name] = cls
        _NAME_OF[cls] = (kind, name)
        return cls

    return add


def registered(kind: Kind) -> dict[str, type[Component]]:
    """Every registered component type of ``kind``, ragtrim's own loaded first."""
    load_builtins(kind)
    return dict(_REGISTRY[kind])


def load_builtins(kind: Kind) -> None:
    """Import the modules that register ragtrim's own ``kind`` components (``ragtrim._catalog`` lists them)."""
    for module in sorted(set(_catalog.COMPONENTS.get(kind, {}).values())):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a module's own optional import failing must not hide its components
                raise


def to_config(value: Any) -> Any:
    """A parameter value as config data: plain values as they are, components as their dicts, tuples as lists,
    paths as str; anything else as ``{"unserializable": repr(value)}``."""
    if isinstance(value, str) and "://" in value:
        # A URL may carry a password (a Redis vector store's): a config is written to files and logs, so it gets
        # the URL masked, and ``from_dict`` refuses the masked form rather than connect with "***".
        return redact_url(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Component) and type(value) in _NAME_OF:
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [to_config(v) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: to_config(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return {UNSERIALIZABLE: redact(repr(value))}


AUTO_KEY = "auto"
"""Written by ``to_dict`` beside a parameter set to ``"auto"``: what it resolved to on this host and why. Informational:
``from_dict`` ignores it, and the parameter stays ``"auto"``, so a config moves between hosts unchanged."""


def from_config(kind: Kind, config: Any) -> Any:
    """Build a ``kind`` component from ``{"type": name, **params}``; nested component dicts are built by the
    parameter's constraints. Every problem is a ConfigError."""
    if isinstance(config, Mapping) and set(config) in ({UNSERIALIZABLE}, {REDACTED}):
        raise ConfigError(f"a {kind} here {_unwritten(config)}")
    if not isinstance(config, Mapping) or "type" not in config:
        shown = f"keys {sorted(map(str, config))[:20]}" if isinstance(config, Mapping) else type(config).__name__
        raise ConfigError(f"a {kind} config must be a dict with a 'type' key, got {shown}")
    types = registered(kind)
    name = config["type"]
    if not isinstance(name, str):
        raise ConfigError(f"a {kind} 'type' must be a {kind} name (str), got {type(name).__name__}; "
                          f"known: {sorted(types)}")
    if name not in types:
        raise ConfigError(f"unknown {kind} type {name!r}; known: {sorted(types)}")
    cls = types[name]
    if cls._not_from_config:
        raise ConfigError(f"{kind} {name!r} is never built from a config ({cls._not_from_config}); build it in code")
    constraints = cls.parameter_constraints()
    params: dict[str, Any] = {}
    for key, value in config.items():
        if key == "type" or (key == AUTO_KEY and key not in constraints):
            continue
        _refuse_unwritten(kind, name, key, value)
        params[key] = _from_config_value(value, constraints.get(key, ()))
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"{kind} {name!r}: {exc}") from exc


def _refuse_unwritten(kind: str, name: str, key: str, value: Any) -> None:
    if isinstance(value, Mapping) and set(value) in ({UNSERIALIZABLE}, {REDACTED}):
        raise ConfigError(f"{kind} {name!r}: parameter {key!r} {_unwritten(value)}")
    if isinstance(value, str) and "://" in value and f":{MASK}@" in value:
        raise ConfigError(f"{kind} {name!r}: parameter {key!r} is a URL whose password was masked when the config "
                          f"was written ({value}); put the real URL back, or build the {kind} in code")


def _unwritten(marker: Mapping[str, Any]) -> str:
    if UNSERIALIZABLE in marker:
        return (f"held an object ({marker[UNSERIALIZABLE]}) that a config cannot recreate; build it in code, register "
                "its class (ragtrim.components.register), or use a named value (e.g. scorer='embedding')")
    return f"was not written to the config ({marker[REDACTED]}); build it in code"


def _from_config_value(value: Any, constraints: Constraints) -> Any:
    for c in constraints:
        if isinstance(c, Constraint):
            built = c.from_config(value)
            if built is not value:
                return built
    return value


class Plugin(Constraint):
    """A component of ``kind``: a registered name (``names``, e.g. the named scorers), an object implementing
    ``protocol``, or in a config its ``{"type": ...}`` dict."""

    def __init__(self, kind: Kind, protocol: type, *, names: Sequence[str] = (), describe: str,
                 rule: str | None = None) -> None:
        self.kind = kind
        self.protocol = protocol
        self.names = tuple(names)
        self._describe = describe
        self._rule = rule

    def claims(self, value: Any) -> bool:
        return (bool(self.names) and isinstance(value, str)) or isinstance(value, self.protocol)

    def problem(self, name: str, value: Any) -> str | None:
        if isinstance(value, str) and value not in self.names:
            return f"{name} must be one of {sorted(self.names)}, got {value!r}"
        return None

    def describe(self) -> str:
        return f"one of {sorted(self.names)} or {self._describe}" if self.names else self._describe

    def rule(self) -> str:
        return self._rule or f"be {self.describe()}"

    def from_config(self, value: Any) -> Any:
        if isinstance(value, Mapping):
            return from_config(self.kind, value)
        return value

    def invalid_example(self) -> Any:
        return "__no_such_name__" if self.names else object()
