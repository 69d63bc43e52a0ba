"""Capacity planner: GPU memory, KV cache, ``max_model_len`` and concurrency from a model config and a workload.

Reads a Hugging Face ``config.json``, counts parameters and KV bytes per token (sliding-window layers capped at
their window), and says how many requests of a workload's p95 shape fit, untrimmed and trimmed side by side.

Modules: ``model`` (``ModelSpec``, dtypes, weight and KV bytes), ``workload`` (token-length percentiles),
``estimate`` (vLLM's KV block accounting), ``logs`` (vLLM's KV log lines), ``planner`` (``plan``), ``report``
(the table) and ``cli`` (``ragtrim plan``). Every public name is importable from ``ragtrim.plan``.
"""

from __future__ import annotations

from ragtrim._util.stats import percentile
from ragtrim.plan.cli import add_cli, main, run_cli
from ragtrim.plan.estimate import (
    KVCapacity,
    SlidingConcurrency,
    VllmKVEstimate,
    planner_from_available_kv_memory,
    vllm_kv_estimate,
)
from ragtrim.plan.logs import parse_vllm_kv_log
from ragtrim.plan.model import (
    FULL_ATTENTION,
    GIB,
    SLIDING_ATTENTION,
    TORCH_DTYPE_NAMES,
    FloatDtype,
    KVDtype,
    ModelSpec,
    ParamCount,
    WeightDtype,
    weight_bytes,
)
from ragtrim.plan.planner import Plan, PlanRequest, WorkloadPlan, plan
from ragtrim.plan.report import format_plan_table
from ragtrim.plan.workload import MaxLenPercentile, Workload

__all__ = [
    "FULL_ATTENTION",
    "GIB",
    "SLIDING_ATTENTION",
    "TORCH_DTYPE_NAMES",
    "FloatDtype",
    "KVCapacity",
    "KVDtype",
    "MaxLenPercentile",
    "ModelSpec",
    "ParamCount",
    "Plan",
    "PlanRequest",
    "SlidingConcurrency",
    "VllmKVEstimate",
    "WeightDtype",
    "Workload",
    "WorkloadPlan",
    "add_cli",
    "format_plan_table",
    "main",
    "parse_vllm_kv_log",
    "percentile",
    "plan",
    "planner_from_available_kv_memory",
    "run_cli",
    "vllm_kv_estimate",
    "weight_bytes",
]
