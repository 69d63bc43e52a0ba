"""Where ragtrim keeps files it derives on this machine (the passage-vector store, prepared tokenizers, exports)."""

from __future__ import annotations

import os
from pathlib import Path

from ragtrim.errors import ConfigError


def cache_dir() -> Path:
    """Where ragtrim keeps files it derives on this machine (the passage-vector store, prepared tokenizers, ONNX
    exports of models named explicitly): ``$RAGTRIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragtrim``, else
    ``~/.cache/ragtrim``. Never site-packages and never the source tree. ConfigError when there is no home directory
    to put it in (no ``$HOME`` and no user entry, as for an arbitrary container user)."""
    explicit = os.environ.get("RAGTRIM_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no $HOME and no passwd entry for this user
            raise ConfigError("ragtrim has no cache folder: the home directory cannot be determined ($HOME is not "
                              "set and this user has no entry); set RAGTRIM_CACHE_DIR to a writable folder") from None
    return Path(base) / "ragtrim"
