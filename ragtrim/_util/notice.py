"""One line on stderr for what a user should know the first time it happens (a model exported or loaded for seconds,
a file created in the cache folder), whether or not the application configured logging. ``RAGTRIM_QUIET=1``
silences them; each also goes to the ``ragtrim`` logger at INFO."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator

from ragtrim._util.redact import get_logger, redact

QUIET_ENV = "RAGTRIM_QUIET"
logger = get_logger("ragtrim")


def quiet() -> bool:
    return os.environ.get(QUIET_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def notice(message: str) -> None:
    """Print ``ragtrim: <message>`` on stderr (unless quiet) and log it."""
    line = redact(message)
    logger.info("%s", line)
    if not quiet():
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stderr never fails a trim
            print(f"ragtrim: {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def announced(what: str) -> Iterator[None]:
    """``notice`` that ``what`` starts (say where and why there), and when it is done, how long it took."""
    notice(f"{what} ...")
    started = time.perf_counter()
    yield
    notice(f"done in {time.perf_counter() - started:.1f} s")
