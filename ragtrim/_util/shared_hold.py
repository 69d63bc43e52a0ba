"""A process-wide setting shared by several holders (gateways in one process, as in tests): the first holder turns
it on, the last one to let go turns it off."""

from __future__ import annotations

import threading
from collections.abc import Callable


class SharedHold:
    """``hold(on)`` runs ``on`` for the first holder only; ``release(off)`` runs ``off`` when the last holder lets
    go. A release without a holder changes nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0

    def hold(self, on: Callable[[], None]) -> None:
        with self._lock:
            if self._holders == 0:
                on()
            self._holders += 1

    def release(self, off: Callable[[], None]) -> None:
        with self._lock:
            if self._holders == 0:
                return
            self._holders -= 1
            if self._holders == 0:
                off()

    @property
    def holders(self) -> int:
        return self._holders
