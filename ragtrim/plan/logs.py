"""Read vLLM's KV capacity lines (KV cache size, maximum concurrency, available KV memory) out of engine logs."""

from __future__ import annotations

import re

_KV_SIZE_RE = re.compile(r"GPU KV cache size:\s*([\d,]+)\s*tokens")
_CONCURRENCY_RE = re.compile(r"Maximum concurrency for\s*([\d,]+)\s*tokens per request:\s*([\d.]+)\s*x")
_AVAILABLE_RE = re.compile(r"Available KV cache memory:\s*([\d.]+)\s*GiB")
_LOADING_RE = re.compile(r"Model loading took\s*([\d.]+)\s*GiB")


def parse_vllm_kv_log(text: str) -> dict[str, float | int]:
    """Pull vLLM's KV capacity lines out of engine logs.

    Keys (present only when found; the last occurrence wins): ``kv_cache_tokens``, ``max_concurrency_len_tokens``,
    ``max_concurrency``, ``available_kv_cache_gib``, ``model_loading_gib``.
    """
    out: dict[str, float | int] = {}
    for m in _KV_SIZE_RE.finditer(text):
        out["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    for m in _CONCURRENCY_RE.finditer(text):
        out["max_concurrency_len_tokens"] = int(m.group(1).replace(",", ""))
        out["max_concurrency"] = float(m.group(2))
    for m in _AVAILABLE_RE.finditer(text):
        out["available_kv_cache_gib"] = float(m.group(1))
    for m in _LOADING_RE.finditer(text):
        out["model_loading_gib"] = float(m.group(1))
    return out
