"""Loaders for the evaluation data in ``../shared/data`` (never copied into the repository).

The location comes from ``RAGTRIM_DATA``, defaulting to ``../shared/data`` beside the repository root.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragtrim.errors import InputError

_REPO_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """Where the shared evaluation data lives (``$RAGTRIM_DATA`` or ``<repo>/../shared/data``)."""
    env = os.environ.get("RAGTRIM_DATA")
    return Path(env) if env else (_REPO_ROOT.parent / "shared" / "data")


def dataset_path(name: str) -> Path:
    """The folder of one dataset; raises InputError naming the variable to set when it is absent."""
    path = data_dir() / name
    if not path.is_dir():
        raise InputError(
            f"dataset folder {str(path)!r} not found; set RAGTRIM_DATA to the folder that holds {name!r}"
        )
    return path
