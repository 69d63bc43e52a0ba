"""How long the cyclic garbage collector has stopped this process: collections and seconds, by generation.

A collection stops every thread of the process while it runs, so a request in flight waits for it whatever it was
doing. ``install()`` adds a ``gc.callbacks`` hook that times each collection (a clock read at its start and end);
``paused_s()`` is the total so far, which a server reads when a request starts and ends to charge it the pauses that
fell inside it. The hook is process-wide and counted like ``ragtrim._util.gcfreeze``: each ``install()`` is matched
by one ``uninstall()``, and the last one removes it.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from ragtrim._util.shared_hold import SharedHold

GENERATIONS = 3

_hold = SharedHold()
_started: float | None = None
_seconds = [0.0] * GENERATIONS
_collections = [0] * GENERATIONS
_longest = [0.0] * GENERATIONS


def _callback(phase: str, info: dict[str, Any]) -> None:
    # Called with the interpreter lock held, by the thread whose allocation set the collection off: no two at once.
    global _started
    if phase == "start":
        _started = time.perf_counter()
    elif _started is not None:
        took = time.perf_counter() - _started
        _started = None
        g = min(int(info.get("generation", GENERATIONS - 1)), GENERATIONS - 1)
        _seconds[g] += took
        _collections[g] += 1
        _longest[g] = max(_longest[g], took)


def _add() -> None:
    if _callback not in gc.callbacks:
        gc.callbacks.append(_callback)


def _remove() -> None:
    if _callback in gc.callbacks:
        gc.callbacks.remove(_callback)


def install() -> None:
    """Start timing collections (the first holder adds the hook; later ones share it)."""
    _hold.hold(_add)


def uninstall() -> None:
    """Give up one holder's hook; the last one removes it (the totals stay)."""
    _hold.release(_remove)


def paused_s() -> float:
    """Seconds every collection timed so far has stopped the process (all generations)."""
    return sum(_seconds)


def totals() -> list[tuple[int, int, float, float]]:
    """``(generation, collections, seconds, longest seconds)`` for each generation, timed so far."""
    return [(g, _collections[g], _seconds[g], _longest[g]) for g in range(GENERATIONS)]
