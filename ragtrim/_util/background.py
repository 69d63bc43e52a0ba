"""ragtrim's one background thread: model passes that overlap the pipeline's CPU work (``Pipeline(prefetch=True)``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_STATE_LOCK = threading.Lock()
_BACKGROUND: ThreadPoolExecutor | None = None


def background() -> ThreadPoolExecutor:
    """ragtrim's one background thread (made on first use): model passes that overlap the pipeline's CPU work."""
    global _BACKGROUND
    with _STATE_LOCK:
        if _BACKGROUND is None:
            _BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragtrim-prefetch")
        return _BACKGROUND


_IN_FLIGHT = [0]  # background tasks submitted and not yet done
_IN_FLIGHT_LOCK = threading.Lock()


def submit_background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run ``fn(*args)`` on ragtrim's background thread; ``background_busy()`` is True until it is done.

    When the thread was idle, the caller waits (at most 20 ms) until ``fn`` has started: ``fn`` is meant to enter
    native code that releases the GIL (a model pass), and a caller that went straight on with Python work would
    keep the GIL for the interpreter's switch interval (5 ms) before the background thread could even begin."""
    with _IN_FLIGHT_LOCK:
        idle = _IN_FLIGHT[0] == 0
        _IN_FLIGHT[0] += 1
    started = threading.Event()

    def task() -> T:
        started.set()
        return fn(*args)

    future = background().submit(task)
    future.add_done_callback(_task_done)
    if idle:
        started.wait(0.02)
    return future


def _task_done(_: Future[Any]) -> None:
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT[0] -= 1


def background_busy() -> bool:
    """True while a model pass runs on the background thread: the caller's thread then has time to spare, and a
    stage's prefetch may fill caches that ``run`` would otherwise fill only for what it needs (sentence counts)."""
    return _IN_FLIGHT[0] > 0
