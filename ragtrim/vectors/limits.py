"""The bounds of a passage-vector store's size and the check of a store constructor's ``max_bytes``, apart from
``ragtrim.vectors.store`` (whose ``store_size_bytes`` checks a size a user gives) so that the stores themselves can
use them without an import cycle."""

from __future__ import annotations

from ragtrim.errors import ConfigError

MIN_STORE_MB = 1
"""The smallest bound a store works with: about 480 MiniLM vectors; below it eviction would leave too few to help."""
MAX_STORE_MB = 2**20
"""The largest bound taken (1 TiB): a bound is a number of MiB a disk or a Redis can hold, not "unbounded"."""


def check_max_bytes(max_bytes: object) -> int:
    """``max_bytes`` of a store's constructor: an int from ``MIN_STORE_MB`` to ``MAX_STORE_MB`` MiB, in bytes."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or \
            not MIN_STORE_MB * 2**20 <= max_bytes <= MAX_STORE_MB * 2**20:
        raise ConfigError(f"max_bytes must be an int from {MIN_STORE_MB * 2**20} ({MIN_STORE_MB} MiB) to "
                          f"{MAX_STORE_MB * 2**20} (1 TiB) bytes, got {max_bytes!r}")
    return max_bytes
