"""Shared fixtures: the whitespace counter makes token numbers easy to work out by hand."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ragtrim_bench.datasets import data_dir

if TYPE_CHECKING:
    from tests.serve.conftest import RedisServer

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


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the session (the gateway's rate store and the Redis vector store tests)."""
    import shutil

    from tests.serve.conftest import start_redis

    server = start_redis()
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)
