"""One Ray instance (2 CPUs, free ports) for every Ray engine test: starting Ray is most of their time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[Any]:
    pytest.importorskip("ray")
    from tests.engines.helpers import local_ray

    with local_ray(2) as ray:
        yield ray
