"""Where ragtrim keeps files it derives on this machine (model exports, prepared tokenizers)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where ragtrim keeps derived model files: ``$RAGTRIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragtrim``, else
    ``~/.cache/ragtrim``. Never site-packages and never the source tree."""
    explicit = os.environ.get("RAGTRIM_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ragtrim"
