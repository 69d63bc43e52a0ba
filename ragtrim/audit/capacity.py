"""The audit's GPU numbers: the log's workload, untrimmed and trimmed, through the capacity planner (``ragtrim.plan``):
recommended ``--max-model-len``, KV tokens per request and the concurrency that trimming frees on one GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.audit.breakdown import Histogram
from ragtrim.audit.savings import SampleRecord


@dataclass(frozen=True, kw_only=True)
class PlannerConfig:
    """A model's ``config.json`` and the GPU: what ``ragtrim plan`` takes."""

    model_config: Path
    gpu_mem_gib: float
    gpu_memory_utilization: float = 0.9
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    non_kv_overhead_gib: float = 4.0
    max_len_percentile: int = 99

    def build(self) -> tuple[Any, Any]:
        from ragtrim.plan.model import ModelSpec
        from ragtrim.plan.planner import PlanRequest

        model = ModelSpec.from_config_file(self.model_config)
        request = PlanRequest(gpu_mem_gib=self.gpu_mem_gib, gpu_memory_utilization=self.gpu_memory_utilization,
                              weight_dtype=self.weight_dtype, kv_dtype=self.kv_dtype,  # type: ignore[arg-type]
                              non_kv_overhead_gib=self.non_kv_overhead_gib,
                              max_len_percentile=self.max_len_percentile)  # type: ignore[arg-type]
        return model, request

    def kv_cache_tokens(self) -> int:
        """vLLM's KV cache size in tokens for this model and GPU (the prefix cache's room)."""
        from ragtrim.plan.planner import plan
        from ragtrim.plan.workload import Workload

        model, request = self.build()
        probe = Workload.from_percentiles(name="probe", input_p50_tokens=1, input_p95_tokens=1, output_p95_tokens=1)
        return int(plan(model, request, probe).vllm_kv_cache_tokens)


def _ceil(x: float) -> int:
    return math.ceil(x - 1e-9)


def log_workload(prompt: Histogram, output: Histogram, total: Histogram) -> Any:
    """The whole log as a planner workload, from exact histograms."""
    from ragtrim.plan.workload import Workload

    return Workload(name="log", requests=prompt.n,
                    input_p50_tokens=_ceil(prompt.percentile(50)), input_p95_tokens=_ceil(prompt.percentile(95)),
                    input_p99_tokens=_ceil(prompt.percentile(99)), output_p50_tokens=_ceil(output.percentile(50)),
                    output_p95_tokens=_ceil(output.percentile(95)), output_p99_tokens=_ceil(output.percentile(99)),
                    total_p95_tokens=_ceil(total.percentile(95)), total_p99_tokens=_ceil(total.percentile(99)))


_KEEP = ("workload", "requests", "input_p50_tokens", "input_p95_tokens", "input_p99_tokens", "request_p95_tokens",
         "kv_bytes_per_request_p95", "max_concurrency_p95", "recommended_max_model_len", "max_model_len_basis",
         "max_concurrency_at_recommended_len", "max_concurrency_at_model_max_len",
         "vllm_max_concurrency_at_recommended_len", "vllm_flags", "max_model_len_statement")


def plan_section(cfg: PlannerConfig, prompt: Histogram, output: Histogram, total: Histogram,
                 records: Sequence[SampleRecord]) -> dict[str, Any]:
    """Plan the log, the sample untrimmed and the sample trimmed; freed = trimmed - untrimmed on the sample."""
    from ragtrim.plan.planner import plan
    from ragtrim.plan.workload import Workload

    model, request = cfg.build()
    workloads = [log_workload(prompt, output, total)]
    if records:
        workloads.append(Workload.from_requests([(r.prompt_before, r.output_tokens) for r in records],
                                                name="sample untrimmed"))
        workloads.append(Workload.from_requests([(r.prompt_after, r.output_tokens) for r in records],
                                                name="sample trimmed"))
    p = plan(model, request, workloads)
    d = p.to_dict()
    columns = [{k: w[k] for k in _KEEP} for w in d["workloads"]]
    out: dict[str, Any] = {
        "model": p.model_name, "model_config": str(cfg.model_config), "model_max_len": p.model_max_len,
        "gpu_mem_gib": p.gpu_mem_gib,
        "gpu_memory_utilization": p.gpu_memory_utilization, "kv_dtype": p.kv_dtype, "weight_dtype": p.weight_dtype,
        "kv_capacity_tokens": p.kv_capacity_tokens, "vllm_kv_cache_tokens": p.vllm_kv_cache_tokens,
        "kv_bytes_per_token": p.kv_bytes_per_token, "workloads": columns, "notes": list(p.notes),
    }
    if len(columns) == 3:
        before, after = columns[1], columns[2]
        mib = 1024**2
        out["freed"] = {
            "max_model_len_before": before["recommended_max_model_len"],
            "max_model_len_after": after["recommended_max_model_len"],
            "tokens_per_p95_request_before": before["request_p95_tokens"],
            "tokens_per_p95_request_after": after["request_p95_tokens"],
            "kv_tokens_freed_per_p95_request": before["request_p95_tokens"] - after["request_p95_tokens"],
            "kv_mib_per_p95_request_before": round(before["kv_bytes_per_request_p95"] / mib, 2),
            "kv_mib_per_p95_request_after": round(after["kv_bytes_per_request_p95"] / mib, 2),
            "concurrency_p95_before": before["max_concurrency_p95"],
            "concurrency_p95_after": after["max_concurrency_p95"],
            "concurrency_p95_freed": after["max_concurrency_p95"] - before["max_concurrency_p95"],
            "basis": "the sampled requests untrimmed vs trimmed, at p95 prompt + p95 output tokens; sliding-window "
                     "layers hold at most their window",
        }
    return out
