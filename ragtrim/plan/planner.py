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
    max_model_len: int | None = None
    tensor_parallel_size: int = 1

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
        if self.max_model_len is not None and (
            isinstance(self.max_model_len, bool) or not isinstance(self.max_model_len, int) or self.max_model_len < 1
        ):
            raise ConfigError(f"max_model_len must be a whole number of tokens >= 1, got {self.max_model_len!r}")
        if (isinstance(self.tensor_parallel_size, bool) or not isinstance(self.tensor_parallel_size, int)
                or self.tensor_parallel_size < 1):
            raise ConfigError(
                f"tensor_parallel_size must be a whole number of GPUs >= 1, got {self.tensor_parallel_size!r}"
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
    max_model_len_given: bool = False
    max_model_len_statement: str = ""
    replicas_needed: int | None = None
    gpus_needed: int | None = None


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
    tensor_parallel_size: int = 1
    weights_gib_per_gpu: float = 0.0
    kv_bytes_per_token_per_gpu: int = 0
    how_computed: tuple[str, ...] = field(default=())
    model_source: str = ""
    """The config file the model was read from."""

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["workloads"] = [dict(w, vllm_flags=list(w["vllm_flags"])) for w in d["workloads"]]
        d["notes"] = list(self.notes)
        d["how_computed"] = list(self.how_computed)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        data = dict(d)
        data["workloads"] = tuple(
            WorkloadPlan(**{**w, "vllm_flags": tuple(w["vllm_flags"])}) for w in data["workloads"]
        )
        data["notes"] = tuple(data.get("notes", ()))
        data["how_computed"] = tuple(data.get("how_computed", ()))
        return cls(**data)


def _round_up(value: float, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def shard_for_tensor_parallel(model: ModelSpec, tp: int) -> ModelSpec:
    """The slice of ``model`` one GPU holds at tensor parallelism ``tp``: its query heads and KV heads split over
    the GPUs, as vLLM splits them (KV heads are replicated when there are fewer than GPUs). Raises ConfigError for
    a ``tp`` vLLM would refuse."""
    if tp == 1:
        return model
    heads, kv = model.num_attention_heads, model.num_key_value_heads
    if heads % tp:
        raise ConfigError(
            f"tensor_parallel_size {tp} must divide the {heads} attention heads of {model.name!r}; "
            f"choose one of {_valid_tp(model)}"
        )
    if kv % tp and tp % kv:
        raise ConfigError(
            f"tensor_parallel_size {tp} and the {kv} KV heads of {model.name!r} must divide one another; "
            f"choose one of {_valid_tp(model)}"
        )
    return dataclasses.replace(model, num_attention_heads=heads // tp, num_key_value_heads=max(1, kv // tp))


def _valid_tp(model: ModelSpec, upto: int = 16) -> list[int]:
    heads, kv = model.num_attention_heads, model.num_key_value_heads
    return [t for t in range(1, upto + 1) if heads % t == 0 and (kv % t == 0 or t % kv == 0)]


def _vllm_estimate(shard: ModelSpec, req: PlanRequest, kv_bytes: int, max_model_len: int) -> VllmKVEstimate:
    """vLLM's own KV estimate for ``max_model_len`` under the request's serving choices (one GPU's shard)."""
    return vllm_kv_estimate(shard, kv_bytes, kv_dtype=req.kv_dtype, max_model_len=max_model_len,
                            block_size=req.block_size, max_num_batched_tokens=req.max_num_batched_tokens,
                            hybrid_kv_cache=req.hybrid_kv_cache)


def plan(model: ModelSpec, request: PlanRequest, workloads: Workload | Sequence[Workload]) -> Plan:
    """Work out memory, KV capacity and serving limits for each workload. Pure; raises ConfigError if nothing fits.

    With ``tensor_parallel_size`` t, one replica is t GPUs: each holds 1/t of the weights and of the KV heads, so
    every memory figure below is per GPU and every concurrency figure per replica."""
    items = (workloads,) if isinstance(workloads, Workload) else tuple(workloads)
    if not items:
        raise ConfigError("plan needs at least one workload")
    notes = list(model.notes)
    tp = request.tensor_parallel_size
    shard = shard_for_tensor_parallel(model, tp)
    wbytes = weight_bytes(model, request.weight_dtype, group_size=request.weight_group_size)
    wbytes_gpu = math.ceil(wbytes / tp)
    weights_gib = wbytes / GIB
    budget_gib = request.gpu_mem_gib * request.gpu_memory_utilization
    # Whole bytes, so that hand-worked test values come out exact.
    budget_bytes = round(budget_gib * GIB)
    overhead_bytes = round(request.non_kv_overhead_gib * GIB)
    if wbytes_gpu >= budget_bytes:
        raise ConfigError(
            f"weights need {weights_gib:.2f} GiB ({request.weight_dtype})"
            + (f", {wbytes_gpu / GIB:.2f} GiB per GPU at tensor parallelism {tp}," if tp > 1 else "")
            + f" but gpu_mem_gib * gpu_memory_utilization = {budget_gib:.2f} GiB; use a smaller weight_dtype "
            f"(fp8, int4), a larger GPU or {_tp_hint(model, wbytes, budget_bytes - overhead_bytes, tp)}"
        )
    kv_bytes = budget_bytes - wbytes_gpu - overhead_bytes
    kv_gib = kv_bytes / GIB
    if kv_bytes <= 0:
        raise ConfigError(
            f"no memory left for the KV cache: {budget_gib:.2f} GiB budget - {wbytes_gpu / GIB:.2f} GiB weights - "
            f"{request.non_kv_overhead_gib:.2f} GiB non_kv_overhead_gib = {kv_gib:.2f} GiB; raise "
            f"gpu_memory_utilization, lower non_kv_overhead_gib, use a smaller weight_dtype or "
            f"{_tp_hint(model, wbytes, budget_bytes - overhead_bytes, tp)}"
        )
    per_layer = shard.kv_bytes_per_token_per_layer(request.kv_dtype)
    per_token = per_layer * model.num_hidden_layers
    model_max = model.max_position_embeddings
    given = request.max_model_len
    if given is not None:
        if given > model_max:
            raise ConfigError(
                f"max_model_len {given:,} is above {model.name!r}'s maximum of {model_max:,} tokens "
                f"(max_position_embeddings); vLLM refuses it. Use at most {model_max}"
            )
        need_one = shard.kv_bytes_for_tokens(given, request.kv_dtype)
        if need_one > kv_bytes:
            raise ConfigError(
                f"max_model_len {given:,} does not fit: one request of that length needs "
                f"{need_one / GIB:.2f} GiB of KV cache per GPU but {kv_gib:.2f} GiB is left after the weights; vLLM "
                f"refuses to start. Lower max_model_len to at most {_longest_fitting(shard, request, kv_bytes):,}, "
                f"use an fp8 KV cache or more GPUs"
            )
    v_model_max = _vllm_estimate(shard, request, kv_bytes, model_max)
    if shard.kv_bytes_for_tokens(model_max, request.kv_dtype) > kv_bytes or v_model_max.max_concurrency < 1:
        notes.append(
            f"vLLM's 'max concurrency' at the model maximum ({model_max:,} tokens, vLLM's default --max-model-len) "
            f"is {v_model_max.max_concurrency:,.2f}x, below 1: one request of that length does not fit in the KV "
            "cache, and vLLM refuses to start unless --max-model-len is lower (this plan's vLLM flags set it)"
        )
    wplans = tuple(_plan_workload(model, shard, request, w, kv_bytes, v_model_max.max_concurrency) for w in items)
    for w in wplans:
        if w.vllm_max_concurrency_at_recommended_len < 1:
            notes.append(
                f"{w.workload}: vLLM's 'max concurrency' at --max-model-len {w.recommended_max_model_len:,} is "
                f"{w.vllm_max_concurrency_at_recommended_len:,.2f}x, below 1: vLLM may refuse to start at that "
                f"length; lower --max-model-len, use an fp8 KV cache or more GPUs"
            )
    p = Plan(
        model_name=model.name,
        model_source=model.source,
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
        kv_bytes_per_token=model.kv_bytes_per_token_per_layer(request.kv_dtype) * model.num_hidden_layers,
        kv_bytes_per_token_full_attention=model.kv_bytes_per_token_per_layer(request.kv_dtype)
        * model.num_full_layers,
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
        tensor_parallel_size=tp,
        weights_gib_per_gpu=round(wbytes_gpu / GIB, 3),
        kv_bytes_per_token_per_gpu=per_token,
    )
    return dataclasses.replace(p, how_computed=_how_computed(model, shard, request, p))


def _tp_hint(model: ModelSpec, wbytes: int, room_bytes: int, tp: int) -> str:
    """The smallest tensor parallelism whose weight share leaves room for a KV cache, as advice."""
    for t in _valid_tp(model):
        if t > tp and math.ceil(wbytes / t) < room_bytes:
            return f"tensor parallelism (--tensor-parallel-size {t} fits the weights)"
    return "more GPUs per replica (tensor parallelism)"


def _longest_fitting(shard: ModelSpec, req: PlanRequest, kv_bytes: int) -> int:
    """The longest request (a multiple of the block size) whose KV fits in ``kv_bytes``."""
    lo, hi = 0, shard.max_position_embeddings
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if shard.kv_bytes_for_tokens(mid, req.kv_dtype) <= kv_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo // req.block_size * req.block_size


def _plan_workload(
    model: ModelSpec, shard: ModelSpec, req: PlanRequest, w: Workload, kv_bytes: int, vllm_conc_model_max: float
) -> WorkloadPlan:
    kv_dtype = req.kv_dtype
    model_max = model.max_position_embeddings
    per_request = shard.kv_bytes_for_tokens(w.request_p95_tokens, kv_dtype)
    conc_p95 = kv_bytes // per_request

    need, need_basis = w.total_tokens_at(req.max_len_percentile)
    wanted = _round_up(need * req.max_len_headroom, req.round_to_tokens)
    exceeds = wanted > model_max
    recommended = min(wanted, model_max)
    basis = f"{need_basis} = {need} x {req.max_len_headroom:g}, rounded up to a multiple of {req.round_to_tokens}"
    if exceeds:
        basis += f", capped at the model maximum {model_max}"
    given = req.max_model_len is not None
    rec_len = req.max_model_len if req.max_model_len is not None else recommended
    if given:
        basis = f"given (--max-model-len {rec_len}); the recommended value would be {recommended} ({basis})"

    conc_rec = kv_bytes // shard.kv_bytes_for_tokens(rec_len, kv_dtype)
    conc_max = kv_bytes // shard.kv_bytes_for_tokens(model_max, kv_dtype)
    v_rec = _vllm_estimate(shard, req, kv_bytes, rec_len)
    statement = _len_statement(w, req, rec_len, conc_rec, conc_p95, need, need_basis, given,
                               recommended, kv_bytes // shard.kv_bytes_for_tokens(recommended, kv_dtype), model_max,
                               conc_max)

    out_need = (
        w.output_p99_tokens if req.max_len_percentile == 99 and w.output_p99_tokens else w.output_p95_tokens
    )
    max_output = min(_round_up(max(out_need, 1) * req.max_len_headroom, 16), max(rec_len - 1, 1))
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

    replicas = gpus = None
    if req.concurrency is not None and conc_p95 > 0:
        replicas = math.ceil(req.concurrency / conc_p95)
        gpus = replicas * req.tensor_parallel_size

    flags = (
        f"--max-model-len {rec_len}",
        f"--kv-cache-dtype {'fp8' if kv_dtype == 'fp8' else 'auto'}",
        f"--gpu-memory-utilization {req.gpu_memory_utilization:g}",
        f"--max-num-seqs {max_num_seqs}",
        f"--max-num-batched-tokens {batched}",
    ) + (("--quantization fp8",) if req.weight_dtype == "fp8" else ()) + (
        (f"--tensor-parallel-size {req.tensor_parallel_size}",) if req.tensor_parallel_size > 1 else ())
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
        max_model_len_given=given,
        max_model_len_statement=statement,
        replicas_needed=replicas,
        gpus_needed=gpus,
    )


def _len_statement(w: Workload, req: PlanRequest, length: int, conc_len: int, conc_p95: int, need: int,
                   need_basis: str, given: bool, recommended: int, conc_recommended: int, model_max: int,
                   conc_model_max: int) -> str:
    """What ``--max-model-len length`` costs and buys, in plain words."""
    per = "replica" if req.tensor_parallel_size > 1 else "GPU"
    text = (f"--max-model-len {length:,} guarantees {conc_len:,} requests of the full {length:,} tokens at once per "
            f"{per}; this workload's p95 request ({w.request_p95_tokens:,} tokens: input p95 "
            f"{w.input_p95_tokens:,} + output p95 {w.output_p95_tokens:,}) fits {conc_p95:,} at once.")
    pct = req.max_len_percentile
    if length < w.request_p95_tokens:
        text += (f" It is shorter than the p95 request, so more than 5 % of requests (those whose prompt plus "
                 f"max_tokens exceed {length:,}) would be refused.")
    elif length < need:
        text += (f" It is below the workload's p{pct} of input+output ({need:,}, {need_basis}), so up to "
                 f"{100 - pct} % of requests could be refused.")
    if given and length != recommended:
        text += (f" The recommended value for this workload, {recommended:,}, guarantees {conc_recommended:,} "
                 f"at once.")
    if length < model_max:
        text += f" At the model maximum ({model_max:,}) the guarantee would be {conc_model_max:,}."
    return text


def _how_computed(model: ModelSpec, shard: ModelSpec, req: PlanRequest, p: Plan) -> tuple[str, ...]:
    """The arithmetic behind the plan, one line per step, with this plan's numbers."""
    tp = req.tensor_parallel_size
    per_layer = shard.kv_bytes_per_token_per_layer(req.kv_dtype)
    kv_dtype_bytes = per_layer // (2 * shard.num_key_value_heads * shard.head_dim)
    if req.weight_dtype in ("bf16", "fp16", "fp32"):
        wline = (f"weights: {p.param_count:,} parameters x {_WEIGHT_BYTES_TEXT[req.weight_dtype]} "
                 f"({req.weight_dtype}) = {p.weights_gib:.2f} GiB")
    else:
        wline = (f"weights: {p.param_count:,} parameters, the decoder's linear layers in {req.weight_dtype} "
                 f"(with their scales), embeddings, norms and vision tower in bf16 = {p.weights_gib:.2f} GiB")
    if tp > 1:
        wline += f"; split over {tp} GPUs (tensor parallelism): {p.weights_gib_per_gpu:.2f} GiB per GPU"
    heads = f"{shard.num_key_value_heads} KV heads" + (f" per GPU (of {model.num_key_value_heads})" if tp > 1 else "")
    kv = (f"KV per token and layer: 2 (K and V) x {heads} x head_dim {shard.head_dim} x "
          f"{kv_dtype_bytes} B ({req.kv_dtype}) = {per_layer:,} B")
    if model.num_sliding_layers:
        kv2 = (f"a request of T tokens holds {per_layer:,} B x ({model.num_full_layers} full-attention layers x T + "
               f"{model.num_sliding_layers} sliding-window layers x min(T, {model.sliding_window:,})): the sliding "
               f"layers keep only their last {model.sliding_window:,} tokens")
    else:
        kv2 = f"a request of T tokens holds {per_layer:,} B x {model.num_hidden_layers} layers x T"
    budget = req.gpu_mem_gib * req.gpu_memory_utilization
    mem = (f"memory per GPU: {req.gpu_mem_gib:g} GiB x {req.gpu_memory_utilization:g} (--gpu-util) = {budget:.2f} "
           f"GiB - weights {p.weights_gib_per_gpu:.2f} GiB - non-KV reserve {req.non_kv_overhead_gib:g} GiB "
           f"(activations, CUDA graphs, CUDA context: --non-kv-overhead-gib) = {p.kv_memory_gib:.2f} GiB for the "
           f"KV cache")
    conc = ("concurrency at p95 = floor(KV memory / KV bytes of one request of input p95 + output p95 tokens); "
            "vLLM admits more short requests and fewer long ones: this is the steady-state count at that shape")
    if req.max_model_len is not None:
        mml = (f"--max-model-len: {req.max_model_len:,} as given; guaranteed concurrency = floor(KV memory / "
               f"KV bytes of one request of that length)")
    else:
        mml = (f"--max-model-len: the workload's p{req.max_len_percentile} of input+output x headroom "
               f"{req.max_len_headroom:g} (--headroom), rounded up to a multiple of {req.round_to_tokens}, at most "
               f"the model's {model.max_position_embeddings:,}")
    lines = [wline, kv, kv2, mem, conc, mml]
    if req.concurrency is not None:
        lines.append(f"GPUs: replicas = ceil({req.concurrency:,} concurrent requests / concurrency at p95 of one "
                     f"replica); GPUs = replicas x {tp} (--tensor-parallel-size)")
    return tuple(lines)


_WEIGHT_BYTES_TEXT = {"bf16": "2 B", "fp16": "2 B", "fp32": "4 B"}
