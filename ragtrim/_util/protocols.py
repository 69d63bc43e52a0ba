"""``isinstance`` against a runtime-checkable protocol, remembered per class.

``isinstance(obj, P)`` for a ``typing.runtime_checkable`` protocol looks each of P's members up on ``obj``: several
microseconds a call, and a trim resolves its scorers and its counter tens of times. A class that has every member
itself (not only on its instances) conforms with every instance, so it is checked once per process."""

from __future__ import annotations

from functools import cache
from typing import Any

_CONFORMING: dict[type, set[type]] = {}


@cache
def _members(protocol: type) -> tuple[str, ...]:
    """The protocol's public members: what it defines and what it annotates."""
    names = {n for n in vars(protocol) if not n.startswith("_")}
    names.update(n for n in getattr(protocol, "__annotations__", {}) if not n.startswith("_"))
    return tuple(sorted(names))


def conforms(obj: Any, protocol: type) -> bool:
    """``isinstance(obj, protocol)``, for a runtime-checkable ``protocol``; a class found to have every member of
    ``protocol`` is remembered, and its instances pass without the lookup."""
    cls = type(obj)
    known = _CONFORMING.setdefault(protocol, set())
    if cls in known:
        return True
    if not isinstance(obj, protocol):
        return False
    if all(hasattr(cls, m) for m in _members(protocol)):
        known.add(cls)
    return True
