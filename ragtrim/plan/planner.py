"""The plan: weights, KV memory and, per workload, concurrency, ``max_model_len``, TTFT and vLLM flags."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from ragtrim.errors import ConfigError
from ragtrim.plan.estimate import VllmKVEstimate, vllm_kv_estimate
from ragtrim.plan.model import GIB, KVDtype, ModelSpec, WeightDtype, weight_bytes
from ragtrim.plan.workload import MaxLenPercentile, Workload


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """Hardware and serving choices. ``non_kv_overhead_gib`` is what vLLM's profiling would reserve besides weights.

    vLLM measures that reserve at start-up (peak activation of a ``max_num_batched_tokens`` dummy batch, the
    sampler's logits, CUDA graphs, the CUDA context and NCCL/cuBLAS workspaces). The default of 4 GiB fits a
    7-27B model on one H100/H200 with default batch limits; read the real value off a vLLM log as
    ``gpu_mem * util - model loading - available KV cache memory``.
    """

    gpu_mem_gib: float
    gpu_memory_utilization: float = 0.9
    weight_dtype: WeightDtype = "bf16"
    weight_group_size: int = 128
    kv_dtype: KVDtype = "bf16"
    non_kv_overhead_gib: float = 4.0
    concurrency: int | None = None
    target_ttft_ms: float | None = None
    prefill_tokens_per_s: float | None = None
    decode_ms_per_token: float | None = None
    users: int | None = None
    block_size: int = 16
    max_num_batched_tokens: int = 8192
    max_len_percentile: MaxLenPercentile = 99
    max_len_headroom: float = 1.1
    round_to_tokens: int = 256
    hybrid_kv_cache: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.gpu_mem_gib, (int, float)) and 0 < self.gpu_mem_gib < math.inf):
            raise ConfigError(
                f"gpu_mem_gib must be a finite number > 0, got {self.gpu_mem_gib!r}; give the GPU memory in GiB"
            )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}; vLLM's default is 0.9"
            )
        if self.weight_dtype not in get_args(WeightDtype):
            raise ConfigError(
                f"weight_dtype must be one of {list(get_args(WeightDtype))}, got {self.weight_dtype!r}"
            )
        if self.kv_dtype not in get_args(KVDtype):
            raise ConfigError(f"kv_dtype must be one of {list(get_args(KVDtype))}, got {self.kv_dtype!r}")
        if self.weight_group_size <= 0:
            raise ConfigError(f"weight_group_size must be > 0, got {self.weight_group_size}")
        if self.non_kv_overhead_gib < 0:
            raise ConfigError(f"non_kv_overhead_gib must be >= 0, got {self.non_kv_overhead_gib}")
        for name in ("concurrency", "users"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be > 0 when given, got {value}")
        for name in ("target_ttft_ms", "prefill_tokens_per_s", "decode_ms_per_token"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"{name} must be > 0 when given, got {value}")
        if self.block_size <= 0:
            raise ConfigError(f"block_size must be > 0, got {self.block_size}")
        if self.max_num_batched_tokens <= 0:
            raise ConfigError(f"max_num_batched_tokens must be > 0, got {self.max_num_batched_tokens}")
        if self.max_len_percentile not in (95, 99):
            raise ConfigError(f"max_len_percentile must be 95 or 99, got {self.max_len_percentile!r}")
        if not self.max_len_headroom >= 1:
            raise ConfigError(
                f"max_len_headroom must be >= 1 (1.1 = 10% headroom), got {self.max_len_headroom}"
            )
        if self.round_to_tokens <= 0 or self.round_to_tokens % self.block_size:
            raise ConfigError(
                f"round_to_tokens must be a positive multiple of block_size {self.block_size}, "
                f"got {self.round_to_tokens}"
            )


@dataclass(frozen=True, kw_only=True)
class WorkloadPlan:
    """One workload's column of the plan."""

    workload: str
    requests: int | None
    input_p50_tokens: int
    input_p95_tokens: int
    input_p99_tokens: int | None
    output_p50_tokens: int
    output_p95_tokens: int
    output_p99_tokens: int | None
    request_p95_tokens: int
    kv_bytes_per_request_p95: int
    max_concurrency_p95: int
    target_concurrency: int | None
    fits_target_concurrency: bool | None
    recommended_max_model_len: int
    max_model_len_basis: str
    workload_exceeds_model_max: bool
    max_concurrency_at_recommended_len: int
    max_concurrency_at_model_max_len: int
    concurrency_lost_at_model_max_len: int
    vllm_max_concurrency_at_recommended_len: float
    vllm_max_concurrency_at_model_max_len: float
    max_input_tokens: int
    max_output_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    ttft_p95_single_ms: float | None
    ttft_p95_burst_ms: float | None
    ttft_target_met: bool | None
    max_requests_per_user_per_min: float | None
    vllm_flags: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The capacity plan: model and memory numbers, then one ``WorkloadPlan`` per workload."""

    model_name: str
    architecture: str
    num_layers: int
    num_full_attention_layers: int
    num_sliding_window_layers: int
    sliding_window_tokens: int | None
    model_max_len: int
    param_count: int
    vision_param_count: int
    weight_dtype: str
    weights_bytes: int
    weights_gib: float
    kv_dtype: str
    kv_bytes_per_token: int
    kv_bytes_per_token_full_attention: int
    gpu_mem_gib: float
    gpu_memory_utilization: float
    non_kv_overhead_gib: float
    kv_memory_gib: float
    kv_capacity_tokens: int
    block_size: int
    max_num_batched_tokens: int
    vllm_kv_cache_tokens: int
    vllm_num_blocks: int
    workloads: tuple[WorkloadPlan, ...]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["workloads"] = [dict(w, vllm_flags=list(w["vllm_flags"])) for w in d["workloads"]]
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        data = dict(d)
        data["workloads"] = tuple(
            WorkloadPlan(**{**w, "vllm_flags": tuple(w["vllm_flags"])}) for w in data["workloads"]
        )
        data["notes"] = tuple(data.get("notes", ()))
        return cls(**data)


def _round_up(value: float, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def _vllm_estimate(model: ModelSpec, req: PlanRequest, kv_bytes: int, max_model_len: int) -> VllmKVEstimate:
    """vLLM's own KV estimate for ``max_model_len`` under the request's serving choices."""
    return vllm_kv_estimate(model, kv_bytes, kv_dtype=req.kv_dtype, max_model_len=max_model_len,
                            block_size=req.block_size, max_num_batched_tokens=req.max_num_batched_tokens,
                            hybrid_kv_cache=req.hybrid_kv_cache)


def plan(model: ModelSpec, request: PlanRequest, workloads: Workload | Sequence[Workload]) -> Plan:
    """Work out memory, KV capacity and serving limits for each workload. Pure; raises ConfigError if nothing fits."""
    items = (workloads,) if isinstance(workloads, Workload) else tuple(workloads)
    if not items:
        raise ConfigError("plan needs at least one workload")
    notes = list(model.notes)
    wbytes = weight_bytes(model, request.weight_dtype, group_size=request.weight_group_size)
    weights_gib = wbytes / GIB
    budget_gib = request.gpu_mem_gib * request.gpu_memory_utilization
    if weights_gib >= budget_gib:
        raise ConfigError(
            f"weights need {weights_gib:.2f} GiB ({request.weight_dtype}) but gpu_mem_gib * gpu_memory_utilization "
            f"= {budget_gib:.2f} GiB; use a smaller weight_dtype (fp8, int4), a larger GPU or tensor parallelism"
        )
    # Whole bytes, so that hand-worked test values come out exact.
    budget_bytes = round(budget_gib * GIB)
    kv_bytes = budget_bytes - wbytes - round(request.non_kv_overhead_gib * GIB)
    kv_gib = kv_bytes / GIB
    if kv_bytes <= 0:
        raise ConfigError(
            f"no memory left for the KV cache: {budget_gib:.2f} GiB budget - {weights_gib:.2f} GiB weights - "
            f"{request.non_kv_overhead_gib:.2f} GiB non_kv_overhead_gib = {kv_gib:.2f} GiB; raise "
            f"gpu_memory_utilization, lower non_kv_overhead_gib or use a smaller weight_dtype"
        )
    per_layer = model.kv_bytes_per_token_per_layer(request.kv_dtype)
    per_token = per_layer * model.num_hidden_layers
    model_max = model.max_position_embeddings
    v_model_max = _vllm_estimate(model, request, kv_bytes, model_max)
    if model.kv_bytes_for_tokens(model_max, request.kv_dtype) > kv_bytes:
        notes.append(
            f"one request of the model maximum ({model_max:,} tokens) does not fit in the KV cache; vLLM refuses "
            f"to start with --max-model-len {model_max}"
        )
    wplans = tuple(_plan_workload(model, request, w, kv_bytes, v_model_max.max_concurrency) for w in items)
    return Plan(
        model_name=model.name,
        architecture=model.architecture,
        num_layers=model.num_hidden_layers,
        num_full_attention_layers=model.num_full_layers,
        num_sliding_window_layers=model.num_sliding_layers,
        sliding_window_tokens=model.sliding_window,
        model_max_len=model_max,
        param_count=model.param_count().total,
        vision_param_count=model.vision_params,
        weight_dtype=request.weight_dtype,
        weights_bytes=wbytes,
        weights_gib=round(weights_gib, 3),
        kv_dtype=request.kv_dtype,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_full_attention=per_layer * model.num_full_layers,
        gpu_mem_gib=request.gpu_mem_gib,
        gpu_memory_utilization=request.gpu_memory_utilization,
        non_kv_overhead_gib=request.non_kv_overhead_gib,
        kv_memory_gib=round(kv_gib, 3),
        kv_capacity_tokens=kv_bytes // per_token,
        block_size=request.block_size,
        max_num_batched_tokens=request.max_num_batched_tokens,
        vllm_kv_cache_tokens=v_model_max.kv_cache_tokens,
        vllm_num_blocks=v_model_max.num_blocks,
        workloads=wplans,
        notes=tuple(notes),
    )


def _plan_workload(
    model: ModelSpec, req: PlanRequest, w: Workload, kv_bytes: int, vllm_conc_model_max: float
) -> WorkloadPlan:
    kv_dtype = req.kv_dtype
    model_max = model.max_position_embeddings
    per_request = model.kv_bytes_for_tokens(w.request_p95_tokens, kv_dtype)
    conc_p95 = kv_bytes // per_request

    need, basis = w.total_tokens_at(req.max_len_percentile)
    wanted = _round_up(need * req.max_len_headroom, req.round_to_tokens)
    exceeds = wanted > model_max
    rec_len = min(wanted, model_max)
    basis = f"{basis} = {need} x {req.max_len_headroom:g}, rounded up to a multiple of {req.round_to_tokens}"
    if exceeds:
        basis += f", capped at the model maximum {model_max}"

    conc_rec = kv_bytes // model.kv_bytes_for_tokens(rec_len, kv_dtype)
    conc_max = kv_bytes // model.kv_bytes_for_tokens(model_max, kv_dtype)
    v_rec = _vllm_estimate(model, req, kv_bytes, rec_len)

    out_need = (
        w.output_p99_tokens if req.max_len_percentile == 99 and w.output_p99_tokens else w.output_p95_tokens
    )
    max_output = min(_round_up(max(out_need, 1) * req.max_len_headroom, 16), rec_len - 1)
    max_input = rec_len - max_output
    max_num_seqs = max(1, min(conc_p95, 1024))
    batched = max(req.max_num_batched_tokens, _round_up(w.input_p95_tokens, req.round_to_tokens))

    ttft_single = ttft_burst = None
    ttft_met = None
    if req.prefill_tokens_per_s:
        ttft_single = round(w.input_p95_tokens / req.prefill_tokens_per_s * 1000, 1)
        burst_n = req.concurrency or max_num_seqs
        ttft_burst = round(burst_n * w.input_p95_tokens / req.prefill_tokens_per_s * 1000, 1)
        if req.target_ttft_ms:
            ttft_met = ttft_single <= req.target_ttft_ms
    rate = None
    if req.users and req.decode_ms_per_token:
        # Little's law: sustainable arrivals = slots / request duration, shared by the users.
        duration_s = w.output_p95_tokens * req.decode_ms_per_token / 1000 + (ttft_single or 0) / 1000
        slots = min(req.concurrency or max_num_seqs, max_num_seqs)
        rate = round(slots / max(duration_s, 1e-6) * 60 / req.users, 2)

    flags = (
        f"--max-model-len {rec_len}",
        f"--kv-cache-dtype {'fp8' if kv_dtype == 'fp8' else 'auto'}",
        f"--gpu-memory-utilization {req.gpu_memory_utilization:g}",
        f"--max-num-seqs {max_num_seqs}",
        f"--max-num-batched-tokens {batched}",
    ) + (("--quantization fp8",) if req.weight_dtype == "fp8" else ())
    return WorkloadPlan(
        workload=w.name,
        requests=w.requests,
        input_p50_tokens=w.input_p50_tokens,
        input_p95_tokens=w.input_p95_tokens,
        input_p99_tokens=w.input_p99_tokens,
        output_p50_tokens=w.output_p50_tokens,
        output_p95_tokens=w.output_p95_tokens,
        output_p99_tokens=w.output_p99_tokens,
        request_p95_tokens=w.request_p95_tokens,
        kv_bytes_per_request_p95=per_request,
        max_concurrency_p95=conc_p95,
        target_concurrency=req.concurrency,
        fits_target_concurrency=None if req.concurrency is None else conc_p95 >= req.concurrency,
        recommended_max_model_len=rec_len,
        max_model_len_basis=basis,
        workload_exceeds_model_max=exceeds,
        max_concurrency_at_recommended_len=conc_rec,
        max_concurrency_at_model_max_len=conc_max,
        concurrency_lost_at_model_max_len=conc_rec - conc_max,
        vllm_max_concurrency_at_recommended_len=round(v_rec.max_concurrency, 2),
        vllm_max_concurrency_at_model_max_len=round(vllm_conc_model_max, 2),
        max_input_tokens=max_input,
        max_output_tokens=max_output,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched,
        ttft_p95_single_ms=ttft_single,
        ttft_p95_burst_ms=ttft_burst,
        ttft_target_met=ttft_met,
        max_requests_per_user_per_min=rate,
        vllm_flags=flags,
    )
