"""vLLM-compatible KV accounting: the block counts, "GPU KV cache size" and "Maximum concurrency" that vLLM's V1
engine would log for a KV memory size, and the planner's capacity from a measured KV memory.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

from ragtrim.errors import ConfigError
from ragtrim.plan.model import GIB, KVDtype, ModelSpec
from ragtrim.plan.workload import Workload


@dataclass(frozen=True, kw_only=True)
class VllmKVEstimate:
    """What vLLM's V1 engine would log for this KV memory (``kv_cache_utils._report_kv_cache_config``)."""

    num_blocks: int
    num_groups: int
    layers_per_group: int
    page_size_bytes: int
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float
    blocks_per_request: int


SlidingConcurrency = Literal["full_length", "window_plus_batch"]


def vllm_kv_estimate(
    model: ModelSpec,
    kv_memory_bytes: int,
    *,
    kv_dtype: KVDtype,
    max_model_len: int,
    block_size: int = 16,
    max_num_batched_tokens: int = 8192,
    hybrid_kv_cache: bool = True,
    sliding_concurrency: SlidingConcurrency = "full_length",
) -> VllmKVEstimate:
    """Mirror vLLM's block accounting (kv_cache_utils.py, V1 engine, one GPU, no context parallelism).

    - page = block_size * 2 * kv_heads * head_dim * dtype bytes (one layer, one block).
    - Uniform models: one group of all layers; num_blocks = memory // page // layers.
    - Hybrid (full + sliding): layers grouped so every group has the same size (the smaller type's count, or the
      larger one's if within 1.5x); num_blocks = memory // page // group_size; the pool is shared by all groups.
    - "GPU KV cache size" = num_blocks // num_groups * block_size: every token counted in every group, so for
      Gemma 3 it equals memory / (all layers' bytes per token), as if no layer slid.
    - "Maximum concurrency" = num_blocks / blocks one max_model_len request may need: cdiv(len, block) per full
      group, and per sliding group cdiv(len, block) + 1 (``sliding_concurrency="full_length"``, what vLLM 0.26
      logged on an H200 for Gemma 3 270M and 12B at max_model_len 4096 and 16384 with max_num_batched_tokens 8192:
      its concurrency line fell 4x from 4096 to 16384, as if sliding layers held the whole request) or
      cdiv(min(window - 1 + max_num_batched_tokens, len), block) + 1 (``"window_plus_batch"``, vLLM main's
      ``SlidingWindowSpec.max_memory_usage_bytes`` as read in its source; it predicted 1.6x too many there).
    """
    if sliding_concurrency not in ("full_length", "window_plus_batch"):
        raise ConfigError(
            f"sliding_concurrency must be 'full_length' or 'window_plus_batch', got {sliding_concurrency!r}"
        )
    if block_size <= 0:
        raise ConfigError(f"block_size must be > 0, got {block_size}")
    if max_model_len <= 0:
        raise ConfigError(f"max_model_len must be > 0, got {max_model_len}")
    page = block_size * model.kv_bytes_per_token_per_layer(kv_dtype)
    full, sliding = model.num_full_layers, model.num_sliding_layers
    window = model.sliding_window or 0
    if not hybrid_kv_cache and full and sliding:
        full, sliding = full + sliding, 0  # vLLM then treats sliding layers as full attention for KV
    sliding_tokens = (
        max_model_len if sliding_concurrency == "full_length"
        else min(window - 1 + max_num_batched_tokens, max_model_len)
    )
    sliding_blocks = math.ceil(sliding_tokens / block_size) + 1
    full_blocks = math.ceil(max_model_len / block_size)
    if full and sliding:
        small, large = min(full, sliding), max(full, sliding)
        group = large if large < small * 1.5 else small
        full_groups, sliding_groups = math.ceil(full / group), math.ceil(sliding / group)
    else:
        group = full + sliding
        full_groups, sliding_groups = (1, 0) if full else (0, 1)
    num_groups = full_groups + sliding_groups
    num_blocks = max(int(kv_memory_bytes // page // group), 0)
    per_request = full_groups * full_blocks + sliding_groups * sliding_blocks
    return VllmKVEstimate(
        num_blocks=num_blocks,
        num_groups=num_groups,
        layers_per_group=group,
        page_size_bytes=page,
        kv_cache_tokens=num_blocks // num_groups * block_size,
        max_model_len=max_model_len,
        max_concurrency=num_blocks / per_request,
        blocks_per_request=per_request,
    )


@dataclass(frozen=True, kw_only=True)
class KVCapacity:
    """Capacity from a given KV memory, in the planner's terms and in vLLM's."""

    kv_memory_gib: float
    kv_bytes_per_token: int
    kv_capacity_tokens: int
    max_model_len: int
    max_concurrency_at_max_model_len: int
    vllm_kv_cache_tokens: int
    vllm_max_concurrency: float
    vllm_num_blocks: int
    max_concurrency_p95: int | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def planner_from_available_kv_memory(
    kv_gib: float,
    model: ModelSpec,
    *,
    kv_dtype: KVDtype,
    max_model_len: int,
    block_size: int = 16,
    max_num_batched_tokens: int = 8192,
    hybrid_kv_cache: bool = True,
    workload: Workload | None = None,
) -> KVCapacity:
    """Token capacity and concurrency from a KV memory figure such as vLLM's "Available KV cache memory"."""
    if not kv_gib > 0:
        raise ConfigError(f"kv_gib must be > 0, got {kv_gib}")
    kv_bytes = round(kv_gib * GIB)
    per_token = model.kv_bytes_per_token_per_layer(kv_dtype) * model.num_hidden_layers
    v = vllm_kv_estimate(
        model,
        kv_bytes,
        kv_dtype=kv_dtype,
        max_model_len=max_model_len,
        block_size=block_size,
        max_num_batched_tokens=max_num_batched_tokens,
        hybrid_kv_cache=hybrid_kv_cache,
    )
    return KVCapacity(
        kv_memory_gib=kv_gib,
        kv_bytes_per_token=per_token,
        kv_capacity_tokens=kv_bytes // per_token,
        max_model_len=max_model_len,
        max_concurrency_at_max_model_len=kv_bytes // model.kv_bytes_for_tokens(max_model_len, kv_dtype),
        vllm_kv_cache_tokens=v.kv_cache_tokens,
        vllm_max_concurrency=v.max_concurrency,
        vllm_num_blocks=v.num_blocks,
        max_concurrency_p95=(
            None
            if workload is None
            else kv_bytes // model.kv_bytes_for_tokens(workload.request_p95_tokens, kv_dtype)
        ),
    )
