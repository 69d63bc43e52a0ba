"""How long the cyclic garbage collector has stopped this process: collections and seconds, by generation.

A collection stops every thread of the process while it runs, so a request in flight waits for it whatever it was
doing. ``install()`` adds a ``gc.callbacks`` hook that times each collection (a clock read at its start and end);
``paused_s()`` is the total so far, which a server reads when a request starts and ends to charge it the pauses that
fell inside it. The hook is process-wide and counted like ``ragtrim._util.gcfreeze``: each ``install()`` is matched
by one ``uninstall()``, and the last one removes it.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

GENERATIONS = 3

_lock = threading.Lock()
_holders = 0
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


def install() -> None:
    """Start timing collections (the first holder adds the hook; later ones share it)."""
    global _holders
    with _lock:
        if _holders == 0 and _callback not in gc.callbacks:
            gc.callbacks.append(_callback)
        _holders += 1


def uninstall() -> None:
    """Give up one holder's hook; the last one removes it (the totals stay)."""
    global _holders
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0 and _callback in gc.callbacks:
            gc.callbacks.remove(_callback)


def paused_s() -> float:
    """Seconds every collection timed so far has stopped the process (all generations)."""
    return sum(_seconds)


def totals() -> list[tuple[int, int, float, float]]:
    """``(generation, collections, seconds, longest seconds)`` for each generation, timed so far."""
    return [(g, _collections[g], _seconds[g], _longest[g]) for g in range(GENERATIONS)]
