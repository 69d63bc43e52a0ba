"""Ray for ragtrim's batch jobs: importing it (or saying which extra to install), joining a cluster or starting one
on this machine for the job, the options every map stage gets, and errors from a worker raised again as the
ragtrim error they were."""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragtrim._util.redact import get_logger
from ragtrim.engines.options import RayOptions
from ragtrim.errors import MissingDependencyError, RagtrimError

HASH_SEED = "20241"
"""PYTHONHASHSEED of every worker: the audit keys texts by Python's ``hash``, which must agree across processes."""
AGENT_TIMEOUT_MS = 300_000
"""How long a Ray instance started here waits for its node agents to start (they import for seconds to minutes on a
loaded machine)."""
logger = get_logger("ragtrim")


def import_ray() -> Any:
    """The ``ray`` module with Ray Data loaded (MissingDependencyError naming the ``ray`` extra when absent)."""
    try:
        import ray
        import ray.data  # Ray Data's engine: imported here, so that its absence is found first
    except ImportError as exc:
        raise MissingDependencyError("ray", "ray", "--engine ray (Ray Data)") from exc
    return ray


@contextmanager
def ray_cluster(options: RayOptions) -> Iterator[Any]:
    """Ray, connected: to ``ray.init`` already done by the caller, else to ``options.resolved_address()``, else to
    a Ray instance started here (``options.workers`` CPUs, no dashboard, its files under the system's temporary
    folder) and shut down on exit."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    address = options.resolved_address()
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address is None:
        kwargs["num_cpus"] = options.workers if options.workers is not None else os.cpu_count() or 1
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
    if address is None:  # Ray's node agents start slowly on a busy machine, and the node gives up on them in time
        os.environ.setdefault("RAY_agent_register_timeout_ms", str(AGENT_TIMEOUT_MS))
    ray.init(address=address, **kwargs)
    try:
        yield ray
    finally:
        ray.shutdown()


def quiet_data_context(ray: Any, *, ordered: bool = True) -> Any:
    """Ray Data's context for ragtrim's jobs: results in input order (``ordered``), no progress bars of its own (the
    command draws one), and Ray Data's per-job log lines left out."""
    # before the context: it warns that bars are off (Ray's logger, with the redacting filter as ragtrim's have)
    get_logger("ray.data").setLevel(logging.ERROR)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = ordered
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    return ctx


def worker_count(ray: Any, options: RayOptions) -> int:
    """``options.workers``, else as many as the cluster's CPUs hold (at least one)."""
    if options.workers is not None:
        return options.workers
    cpus = float(ray.cluster_resources().get("CPU", 1))
    return max(1, int(cpus // options.cpus_per_worker))


def runtime_env() -> dict[str, Any]:
    """The runtime environment of every worker: the same string hashes in every process."""
    return {"env_vars": {"PYTHONHASHSEED": HASH_SEED}}


def pack_error(exc: RagtrimError) -> bytes:
    """A worker's ragtrim error as bytes for the driver: its class, message and attributes (Ray's wrapping keeps
    only the text of an exception's cause, and not every error's ``__init__`` can be called again from its args)."""
    return pickle.dumps((type(exc), str(exc), dict(vars(exc))))


def unpack_error(raw: bytes) -> RagtrimError:
    cls, message, attrs = pickle.loads(raw)
    exc: RagtrimError = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(attrs)
    return exc


def ragtrim_error(exc: BaseException) -> BaseException:
    """The ragtrim error inside an exception a worker raised (Ray wraps it, maybe twice), else ``exc``."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, RagtrimError):
            return e
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return exc
