"""Loaders for the evaluation data in ``../shared/data`` (never copied into the repository).

The location comes from ``RAGTRIM_DATA``, defaulting to ``../shared/data`` relative to the working directory (the
repository root, in this project's layout).
"""

from __future__ import annotations

import os
from pathlib import Path

from ragtrim.errors import InputError

DEFAULT_DATA_DIR = Path("..") / "shared" / "data"


def data_dir() -> Path:
    """Where the shared evaluation data lives: ``$RAGTRIM_DATA``, else ``../shared/data`` from the working directory."""
    env = os.environ.get("RAGTRIM_DATA")
    return Path(env) if env else DEFAULT_DATA_DIR


def dataset_path(name: str) -> Path:
    """The folder of one dataset; raises InputError naming the variable to set when it is absent."""
    path = data_dir() / name
    if not path.is_dir():
        raise InputError(
            f"dataset folder {str(path)!r} not found; set RAGTRIM_DATA to the folder that holds {name!r}"
        )
    return path
