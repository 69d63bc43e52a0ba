"""Shared fixtures: the whitespace counter makes token numbers easy to work out by hand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragtrim_bench.datasets import data_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Tests never write to the user's vector store (~/.cache/ragtrim/vectors.sqlite3); those of the store give their own
# file or URL.
os.environ.setdefault("RAGTRIM_VECTOR_STORE", "off")


@pytest.fixture
def shared_data() -> Path:
    path = data_dir()
    if not path.is_dir():
        pytest.skip(f"shared evaluation data not found at {path} (set RAGTRIM_DATA)")
    return path
