"""Keep a long-running server's start-up objects out of the cyclic garbage collector's full collections.

A process that has loaded its models holds hundreds of thousands of long-lived objects (importing torch and
transformers adds most of them). CPython's full collection walks every one of them, and it runs when the
objects that survived younger collections reach a quarter of the long-lived ones: in a server whose per-text caches
fill with each request's passages, every few hundred requests, each time stopping every thread for as long as the
walk takes, which lands on whichever requests are running (``ragtrim-bench serve gc_pauses`` measures it).
``gc.freeze()`` moves every object alive at that moment into a permanent generation that no collection visits;
objects made later are collected as before.

The freeze is process-wide, so it is counted: each ``freeze_start_up()`` is matched by one ``release()``, and the
frozen objects go back to the collector when the last holder releases them (several gateways in one process, as in
tests, share one freeze).
"""

from __future__ import annotations

import gc

from ragtrim._util.shared_hold import SharedHold

_hold = SharedHold()


def _freeze() -> None:
    gc.collect()
    gc.freeze()


def freeze_start_up() -> int:
    """Collect what is already garbage, then freeze every object still alive (the first holder only; later ones
    share that freeze). Returns how many objects are frozen now."""
    _hold.hold(_freeze)
    return gc.get_freeze_count()


def release() -> None:
    """Give up one holder's freeze; the last one hands the frozen objects back to the collector (``gc.unfreeze``)."""
    _hold.release(gc.unfreeze)


def holders() -> int:
    """How many holders share the freeze now (0: nothing frozen by ragtrim)."""
    return _hold.holders
