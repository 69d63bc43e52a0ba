"""The engine options of ``ragtrim audit`` and ``ragtrim index``: which engine, and how to run on Ray (no Ray
imported here)."""


from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ragtrim.errors import ConfigError

Engine = Literal["local", "ray"]
ENGINES: tuple[str, ...] = get_args(Engine)
ADDRESS_ENV = "RAY_ADDRESS"


@dataclass(frozen=True, kw_only=True)
class RayOptions:
    """How to run on Ray. ``address``: a running cluster (``ray://host:10001`` or ``host:6379``; default
    ``$RAY_ADDRESS``), else a Ray instance started on this machine for the job and stopped after it, with
    ``workers`` CPUs. ``workers``: how many shards (audit) or batches (index) run at once (default: every CPU of the
    cluster). ``cpus_per_worker``: CPUs each worker holds (an embedder with 4 ONNX threads: 4)."""

    address: str | None = None
    workers: int | None = None
    cpus_per_worker: float = 1.0

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise ConfigError(f"workers must be an integer >= 1 (or None: every CPU), got {self.workers!r}")
        if not self.cpus_per_worker > 0:
            raise ConfigError(f"cpus_per_worker must be > 0, got {self.cpus_per_worker!r}")

    def resolved_address(self) -> str | None:
        return self.address or os.environ.get(ADDRESS_ENV) or None


def add_engine_args(parser: Any, what: str) -> Any:
    """``--engine`` and the Ray engine's options (``ragtrim audit`` and ``ragtrim index``; the guide: ``ragtrim docs
    scale``)."""
    e = parser.add_argument_group("engine (full guide: ragtrim docs scale)")
    e.add_argument("--engine", choices=list(ENGINES), default="local",
                   help="local: this process (default); ray: the workers of a Ray cluster (pip install "
                        "'ragtrim[ray]')")
    e.add_argument("--ray-address", default=None,
                   help="--engine ray: the cluster to join (default: $RAY_ADDRESS, else a Ray instance started on this "
                        "machine for the job)")
    e.add_argument("--workers", type=int, default=None, help=f"--engine ray: {what} processed at once (default: "
                                                            "every CPU of the cluster)")
    return e
