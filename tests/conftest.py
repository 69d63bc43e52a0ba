"""Shared fixtures: the whitespace counter makes token numbers easy to work out by hand."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, is_hypothesis_test, settings

from ragtrim_bench.datasets import data_dir

if TYPE_CHECKING:
    from tests.serve.conftest import RedisServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Tests never write to the user's vector store (~/.cache/ragtrim/vectors.sqlite3); those of the store give their own
# file or URL.
os.environ.setdefault("RAGTRIM_VECTOR_STORE", "off")

# Property tests: `make test` (and CI) runs the fixed profile, the same cases on every run and machine, so a run
# that passed passes again; `make test-property` runs the explore profile, new cases each run (a failure prints
# the seed and the case to reproduce it).
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every Hypothesis test ``property`` (``make test-property`` selects them)."""
    for item in items:
        if is_hypothesis_test(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.property)


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
