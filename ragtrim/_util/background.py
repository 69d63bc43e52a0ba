"""ragtrim's background threads: model passes that overlap the pipeline's CPU work (``Pipeline(prefetch=True)``),
the model calls of one pass that run at once (``run_parallel``), and the vector store's writes
(``ragtrim.vectors.store``). All are re-created in a forked child.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ragtrim._util.forks import fork_safe_lock

T = TypeVar("T")

_STATE_LOCK = fork_safe_lock()
_BACKGROUND: ThreadPoolExecutor | None = None
_IO: ThreadPoolExecutor | None = None


def background() -> ThreadPoolExecutor:
    """ragtrim's one background thread (made on first use): model passes that overlap the pipeline's CPU work."""
    global _BACKGROUND
    with _STATE_LOCK:
        if _BACKGROUND is None:
            _BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragtrim-prefetch")
        return _BACKGROUND


def submit_io(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run ``fn(*args)`` on ragtrim's I/O thread (made on first use): writes that must not hold up a request nor
    queue behind, or ahead of, a model pass on the prefetch thread."""
    global _IO
    with _STATE_LOCK:
        if _IO is None:
            _IO = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragtrim-io")
        executor = _IO
    return executor.submit(fn, *args)


_COUNT: ThreadPoolExecutor | None = None


def count_workers() -> int:
    """Threads that count tokens beside the caller's (one per core, at most 4)."""
    return max(1, min(4, os.cpu_count() or 1))


def submit_count(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run ``fn(*args)`` on ragtrim's counting threads (made on first use): native counting that releases the GIL,
    started before the pipeline's stages and collected when they need it; never queued behind a model pass. Until
    it is done the switch interval is ``SWITCH_INTERVAL_S`` (when the host's is longer): the counting thread needs
    the GIL to start and to hand its counts back, and the caller's thread, busy with the stages' Python work, would
    keep it for a whole default interval each time, so the counting would wait for the stages instead of overlapping
    them."""
    global _COUNT
    with _STATE_LOCK:
        if _COUNT is None:
            _COUNT = ThreadPoolExecutor(max_workers=count_workers(), thread_name_prefix="ragtrim-count")
        executor = _COUNT
    _short_interval_begin()
    try:
        future = executor.submit(fn, *args)
    except BaseException:
        _short_interval_end()  # never submitted (the interpreter is shutting down): nothing will end it
        raise
    future.add_done_callback(_short_interval_end)
    return future


_MODEL: ThreadPoolExecutor | None = None
MODEL_HELPERS = 7
"""Threads that run a pass's model calls beside the thread that asked (made as needed, up to this many)."""


def run_parallel(fn: Callable[[T], Any], items: list[T], workers: int) -> list[Any]:
    """``[fn(x) for x in items]`` with up to ``workers`` calls at once: the calling thread and up to ``workers - 1``
    of ragtrim's model threads take the next item until none is left. ``fn`` is native work that releases the GIL
    (one ONNX Runtime call on one thread), so the calls run on separate cores. Results keep the items' order; the
    first error is raised. A helper that starts after the items ran out does nothing, and one that has not started
    is cancelled, so two passes sharing the threads never wait on each other."""
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    global _MODEL
    with _STATE_LOCK:
        if _MODEL is None:
            _MODEL = ThreadPoolExecutor(max_workers=MODEL_HELPERS, thread_name_prefix="ragtrim-model")
        pool = _MODEL
    results: list[Any] = [None] * len(items)
    errors: list[BaseException] = []
    lock = threading.Lock()
    next_item = [0]

    def drain() -> None:
        while True:
            with lock:
                i = next_item[0]
                if i >= len(items) or errors:
                    return
                next_item[0] += 1
            try:
                results[i] = fn(items[i])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                with lock:
                    errors.append(exc)
                return

    helpers = [pool.submit(drain) for _ in range(min(workers, MODEL_HELPERS + 1, len(items)) - 1)]
    drain()
    for helper in helpers:
        if not helper.cancel():
            helper.result()
    if errors:
        raise errors[0]
    return results


_IN_FLIGHT = [0]  # background tasks submitted and not yet done
_IN_FLIGHT_LOCK = fork_safe_lock()


SWITCH_INTERVAL_S = 0.0005
"""The interpreter's thread switch interval while a model pass or a count is in flight (its default is 5 ms): the
pass runs native code that releases the GIL, and each time it comes back for the GIL (after the tokenizer, to
launch the model, to collect the vectors) it waited up to a whole interval for the caller's thread, which is busy
with the CPU stages, so on a GPU host the pass took several times its own length (``ragtrim-bench pipeline
stage_cost --switch-interval-s 0.005`` measures it with the default interval). Restored when nothing is in
flight."""
_SAVED_INTERVAL: list[float] = []
_SHORT = [0]  # tasks in flight that want the short switch interval (model passes and counts)


def _short_interval_begin() -> None:
    with _IN_FLIGHT_LOCK:
        _SHORT[0] += 1
        if _SHORT[0] == 1 and not _SAVED_INTERVAL and sys.getswitchinterval() > SWITCH_INTERVAL_S:
            _SAVED_INTERVAL.append(sys.getswitchinterval())
            sys.setswitchinterval(SWITCH_INTERVAL_S)


def _short_interval_end(_: object = None) -> None:
    with _IN_FLIGHT_LOCK:
        _SHORT[0] -= 1
        if _SHORT[0] == 0 and _SAVED_INTERVAL:
            sys.setswitchinterval(_SAVED_INTERVAL.pop())


def submit_background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run ``fn(*args)`` on ragtrim's background thread; ``background_busy()`` is True until it is done.

    When the thread was idle, the caller waits (at most 20 ms) until ``fn`` has started: ``fn`` is meant to enter
    native code that releases the GIL (a model pass), and a caller that went straight on with Python work would
    keep the GIL for the interpreter's switch interval before the background thread could even begin. While any
    task is in flight the switch interval is ``SWITCH_INTERVAL_S`` (when the host's is longer)."""
    with _IN_FLIGHT_LOCK:
        idle = _IN_FLIGHT[0] == 0
        _IN_FLIGHT[0] += 1
    _short_interval_begin()
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
    _short_interval_end()


def background_busy() -> bool:
    """True while a task (a model pass) runs on the background thread."""
    return _IN_FLIGHT[0] > 0


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: the parent's executors would queue work that no thread
    ever runs (gunicorn's preload, multiprocessing's fork start method and Celery's prefork pool fork after the
    parent trimmed). Start from nothing: the executors are made again on first use (the locks are
    ``fork_safe_lock``s). The parent's futures never complete here: their owners forget them (see
    ``CachedEmbedder``)."""
    global _BACKGROUND, _IO, _COUNT, _MODEL
    _BACKGROUND = None
    _IO = None
    _COUNT = None
    _MODEL = None
    _IN_FLIGHT[0] = 0
    _SHORT[0] = 0
    if _SAVED_INTERVAL:
        sys.setswitchinterval(_SAVED_INTERVAL.pop())


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
