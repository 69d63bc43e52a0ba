"""Declared parameter constraints and the checks built on them: each error names the parameter, the bad value, the
rule and the fix ("top_k must be >= 1, got 0").

A component declares ``_parameter_constraints = {"top_k": [Interval(int, 1, None), None], ...}`` (scikit-learn's
scheme): a value is valid when any listed constraint accepts it, ``None`` in the list admits None.
``ragtrim.components.Component`` checks them once, at construction. ``check_int`` and friends are the same rules
for code that validates a single argument (``trim(budget=...)``).
"""

from __future__ import annotations

import math
import numbers
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ragtrim.errors import ConfigError

Constraints = Sequence["Constraint | None"]


class Constraint(ABC):
    """One rule for a parameter value.

    ``claims(value)``: the value is of the kind the rule is about (an int for ``Interval(int, ...)``), so a broken
    rule gets the rule's own message ("must be >= 1") rather than the list of accepted kinds.
    """

    @abstractmethod
    def claims(self, value: Any) -> bool: ...

    def problem(self, name: str, value: Any) -> str | None:
        """The error message when a claimed ``value`` breaks the rule, else None."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """What the rule accepts, as a noun phrase ("an int >= 1")."""

    def rule(self) -> str:
        """What the rule asks, after "must" ("be an int >= 1")."""
        return f"be {self.describe()}"

    def type_error(self, name: str, value: Any) -> str:
        """The message for a value of the wrong kind when this is the only rule."""
        return f"{name} must {self.rule()}, got {value!r}"

    def from_config(self, value: Any) -> Any:
        """The value a config holds turned back into the parameter (nested components are built here)."""
        return value

    @abstractmethod
    def invalid_example(self) -> Any:
        """A value this rule refuses (the registry test constructs every component with one per parameter)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not _is_bool(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def _is_bool(value: Any) -> bool:
    # numpy's bool_ is not a subclass of bool; it is no number here either.
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def plain_number(value: Any) -> Any:
    """A numpy (or other ``numbers``) scalar as the Python int or float it stands for; anything else unchanged.

    ``np.int64(5)`` -> ``5``, ``np.float32(0.9)`` -> ``0.8999999761581421``: what a caller who computed a budget or a
    score with numpy passes, kept as plain Python so configs serialise and arithmetic stays exact.
    """
    if type(value) in (int, float) or _is_bool(value):
        return value
    if isinstance(value, numbers.Integral):
        return operator.index(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


class Interval(Constraint):
    """An int (``Interval(int, ...)``) or a number (``Interval(float, ...)``, ints accepted, NaN refused) within
    bounds; ``None`` for an open side. ``closed`` says which bounds are included."""

    def __init__(self, kind: type[int | float], left: float | None, right: float | None, *,
                 closed: str = "both") -> None:
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed must be 'both', 'left', 'right' or 'neither', got {closed!r}")
        self.kind = kind
        self.left = left
        self.right = right
        self.closed = closed

    def claims(self, value: Any) -> bool:
        if self.kind is int:
            return _is_int(value)
        return _is_number(value)

    def problem(self, name: str, value: Any) -> str | None:
        if self.kind is float:
            try:
                if math.isnan(value):
                    return f"{name} must be a number, got {value!r}"
            except OverflowError:  # an int beyond float's range (10**400)
                return f"{name} must be a number within float's range (about 1.8e308), got an int of " \
                    f"{len(str(abs(value))) if abs(value).bit_length() < 14000 else 'more than 4,000'} digits"
        if self.left is not None:
            if self.closed in ("both", "left") and value < self.left:
                return f"{name} must be >= {self.left}, got {value}"
            if self.closed in ("right", "neither") and value <= self.left:
                return f"{name} must be > {self.left}, got {value}"
        if self.right is not None:
            if self.closed in ("both", "right") and value > self.right:
                return f"{name} must be <= {self.right}, got {value}"
            if self.closed in ("left", "neither") and value >= self.right:
                return f"{name} must be < {self.right}, got {value}"
        return None

    def describe(self) -> str:
        bounds = []
        if self.left is not None:
            bounds.append(f"{'>=' if self.closed in ('both', 'left') else '>'} {self.left}")
        if self.right is not None:
            bounds.append(f"{'<=' if self.closed in ('both', 'right') else '<'} {self.right}")
        return ("an int" if self.kind is int else "a number") + (" " + " and ".join(bounds) if bounds else "")

    def type_error(self, name: str, value: Any) -> str:
        if self.kind is int:
            return f"{name} must be an int, got {value!r} ({type(value).__name__})"
        return f"{name} must be a number, got {value!r}"

    def invalid_example(self) -> Any:
        if self.left is not None:
            return self.kind(self.left - 1)
        if self.right is not None:
            return self.kind(self.right + 1)
        return "not a number"


class Options(Constraint):
    """One of a fixed set of values (usually the strings of a ``Literal``)."""

    def __init__(self, values: Collection[Any]) -> None:
        self.values = tuple(values)

    def claims(self, value: Any) -> bool:
        return True

    def problem(self, name: str, value: Any) -> str | None:
        return None if value in self.values else self.type_error(name, value)

    def describe(self) -> str:
        return f"one of {sorted(self.values)}"

    def invalid_example(self) -> Any:
        return "__not_an_option__"


class Boolean(Constraint):
    def claims(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "True or False"

    def invalid_example(self) -> Any:
        return "yes"


class Text(Constraint):
    """A str; non-empty unless ``allow_empty``. ``describe`` says what the text is ("a model name or local path")."""

    def __init__(self, describe: str = "a non-empty str", *, allow_empty: bool = False) -> None:
        self._describe = describe
        self.allow_empty = allow_empty

    def claims(self, value: Any) -> bool:
        return isinstance(value, str)

    def problem(self, name: str, value: Any) -> str | None:
        return None if (value or self.allow_empty) else self.type_error(name, value)

    def describe(self) -> str:
        return self._describe

    def invalid_example(self) -> Any:
        return 5 if self.allow_empty else ""


class InstanceOf(Constraint):
    """An instance of ``types`` (a runtime-checkable Protocol works too)."""

    def __init__(self, types: type | tuple[type, ...], describe: str) -> None:
        self.types = types
        self._describe = describe

    def claims(self, value: Any) -> bool:
        return isinstance(value, self.types)

    def describe(self) -> str:
        return self._describe

    def invalid_example(self) -> Any:
        return object()


class Satisfies(Constraint):
    """Any value for which ``predicate`` holds (for rules no other constraint expresses)."""

    def __init__(self, predicate: Callable[[Any], bool], describe: str, *, invalid: Any) -> None:
        self.predicate = predicate
        self._describe = describe
        self._invalid = invalid

    def claims(self, value: Any) -> bool:
        return True

    def problem(self, name: str, value: Any) -> str | None:
        return None if self.predicate(value) else self.type_error(name, value)

    def describe(self) -> str:
        return self._describe

    def invalid_example(self) -> Any:
        return self._invalid


class ListOf(Constraint):
    """A list or tuple (not a str) whose items each satisfy ``item``; messages name the item (``weights[1]``)."""

    def __init__(self, item: Constraint, describe: str, *, nonempty: bool = False) -> None:
        self.item = item
        self._describe = describe
        self.nonempty = nonempty

    def claims(self, value: Any) -> bool:
        return isinstance(value, Sequence) and not isinstance(value, (str, bytes))

    def problem(self, name: str, value: Any) -> str | None:
        if self.nonempty and len(value) == 0:
            return self.type_error(name, value)
        for i, v in enumerate(value):
            error = problem_of(f"{name}[{i}]", v, (self.item,))
            if error is not None:
                return error
        return None

    def describe(self) -> str:
        return self._describe

    def from_config(self, value: Any) -> Any:
        if self.claims(value):
            return [self.item.from_config(v) for v in value]
        return value

    def invalid_example(self) -> Any:
        return [] if self.nonempty else [self.item.invalid_example()]


class MappingOf(Constraint):
    """A dict with str keys whose values each satisfy ``value``; messages name the key (``scores['a']``)."""

    def __init__(self, value: Constraint, describe: str) -> None:
        self.value = value
        self._describe = describe

    def claims(self, value: Any) -> bool:
        return isinstance(value, Mapping)

    def problem(self, name: str, value: Any) -> str | None:
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{name} keys must be texts (str), got {k!r}"
            error = problem_of(f"{name}[{k!r}]", v, (self.value,))
            if error is not None:
                return error
        return None

    def describe(self) -> str:
        return self._describe

    def invalid_example(self) -> Any:
        return {"text": self.value.invalid_example()}


def problem_of(name: str, value: Any, constraints: Constraints) -> str | None:
    """The error message for ``value`` under ``constraints`` (any one may accept it), or None when it is valid."""
    if value is None and None in constraints:
        return None
    rules = [c for c in constraints if c is not None]
    broken: list[str] = []
    for c in rules:
        if c.claims(value):
            error = c.problem(name, value)
            if error is None:
                return None
            broken.append(error)
    if broken:
        return broken[0]
    if len(rules) == 1:
        return rules[0].type_error(name, value)
    accepted = " or ".join(c.describe() for c in rules) + (" or None" if None in constraints else "")
    return f"{name} must be {accepted}, got {value!r}"


def validate_params(constraints: Mapping[str, Constraints], params: Mapping[str, Any]) -> None:
    """Raise ConfigError for the first parameter whose value no declared constraint accepts."""
    for name, allowed in constraints.items():
        if name in params:
            error = problem_of(name, params[name], allowed)
            if error is not None:
                raise ConfigError(error)


# -- single-argument checks (the same rules and messages) -----------------------------------------------------------
def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None,
              allow_none: bool = False) -> Any:
    """Check ``value``; return it as a plain Python int (a numpy integer is accepted) or None."""
    _check(name, value, Interval(int, minimum, maximum), allow_none)
    return plain_number(value)


def check_float(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                min_exclusive: bool = False, allow_none: bool = False) -> Any:
    """Check ``value``; return it as a plain Python number (a numpy scalar is accepted) or None."""
    _check(name, value, Interval(float, minimum, maximum, closed="right" if min_exclusive else "both"), allow_none)
    return plain_number(value)


def check_choice(name: str, value: Any, choices: Collection[str]) -> None:
    _check(name, value, Options(choices), False)


def check_bool(name: str, value: Any) -> None:
    _check(name, value, Boolean(), False)


def _check(name: str, value: Any, constraint: Constraint, allow_none: bool) -> None:
    error = problem_of(name, value, (constraint, None) if allow_none else (constraint,))
    if error is not None:
        raise ConfigError(error)
