"""What the Ray engine tests share: a Ray instance of their own (2 CPUs, free ports), the processes of its workers,
and an embedder whose recipe differs between this process and the workers (as a host that rounds differently)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragtrim.testing import FakeEmbedder
from ragtrim_bench.common.procs import descendants


@contextmanager
def local_ray(cpus: int = 2) -> Iterator[Any]:
    """A Ray instance started by this process (``ray.init``: every port is a free one, none of Ray's defaults such as
    6379) with ``cpus`` CPUs, its files in a short temporary folder (Unix socket paths are limited to 107 bytes),
    shut down and removed on exit."""
    import ray

    from ragtrim.engines.ray_cluster import AGENT_TIMEOUT_MS

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_agent_register_timeout_ms", str(AGENT_TIMEOUT_MS))  # a loaded machine starts them slowly
    temp = tempfile.mkdtemp(prefix="rt-ray-", dir="/tmp")
    context = ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False,
                       _temp_dir=temp)
    try:
        assert not context.address_info["gcs_address"].endswith(":6379")
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def kill_busy_worker(actor: str) -> str | None:
    """Kill (SIGKILL) one process of this test's Ray that is running a batch on an ``actor`` actor; its title, or
    None when none was busy."""
    for pid, title in descendants().items():
        if f"({actor}))." in title:
            os.kill(pid, signal.SIGKILL)
            return title
    return None


DRIVER_ENV = "RAGTRIM_TEST_DRIVER_PID"
os.environ.setdefault(DRIVER_ENV, str(os.getpid()))  # set in the test process; its Ray workers inherit it


class DriverOnlyEmbedder(FakeEmbedder):
    """A fake model whose recipe names the process it runs in: the workers' differs from the test process's, as on
    a host whose kernels round differently."""

    def _recipe(self) -> str | None:
        return f"fake/{'driver' if str(os.getpid()) == os.environ.get(DRIVER_ENV) else 'worker'}"
