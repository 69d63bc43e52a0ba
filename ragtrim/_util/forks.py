"""Locks that a forked child finds free.

A forked child has only the thread that forked. A lock another thread held at that moment stays held in the child,
and the child's first use of it waits forever: gunicorn's preload, multiprocessing's fork start method and Celery's
prefork pool all fork processes that have trimmed, and ragtrim's prefetch and I/O threads may be mid-work then.
``fork_safe_lock`` makes a lock that every forked child gets back unlocked (as CPython does for its own locks:
logging's, concurrent.futures'). Use it for any lock another thread may hold while this one forks; state the lock
guarded stays as the other thread left it, so guard only state that is valid between any two statements (caches),
or reset the state too, as ``ragtrim._util.background`` and ``ragtrim.vectors`` do.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

_LOCKS: weakref.WeakSet[Any] = weakref.WeakSet()


def fork_safe_lock(*, reentrant: bool = False) -> Any:
    """A ``threading.Lock`` (``RLock`` with ``reentrant``) that is unlocked in every forked child."""
    lock = threading.RLock() if reentrant else threading.Lock()
    _LOCKS.add(lock)
    return lock


def _after_fork_in_child() -> None:
    for lock in list(_LOCKS):
        lock._at_fork_reinit()  # CPython's own reset (3.9+), as threading and logging use


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
