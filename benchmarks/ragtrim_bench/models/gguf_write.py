"""Writing a Gemma 3 GGUF from Hugging Face weights in the layout of another GGUF: the same metadata (tokenizer,
architecture) and the same quantization type per tensor. So a fine-tuned 270M reader becomes a Q4_K_M file like the
packaged one (Q4_K, Q6_K, Q5_0, Q8_0 and F32 tensors), for vLLM's GGUF loader.

``gguf`` (0.19) quantizes Q5_0 and Q8_0 itself; Q4_K and Q6_K are quantized here in numpy, following llama.cpp's
reference quantizers (``quantize_row_q4_K_ref`` with ``make_qkx2_quants``, ``quantize_row_q6_K_ref`` with
``make_qx_quants``, without importance weights): the same block layout and the same search for scales and minimums.
Requantizing a tensor the packaged GGUF dequantizes gives back its values (tests/bench/models/test_gguf_write.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim.errors import InputError

QK_K = 256
_CHUNK = 1 << 14  # super-blocks per vectorised step: bounds the temporary arrays to a few hundred MB


def _f16_bytes(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).reshape(-1, 1).view(np.uint8)


def _qkx2(x: np.ndarray, nmax: int = 15, rmin: float = -1.0, rdelta: float = 0.1, nstep: int = 20
          ) -> tuple[np.ndarray, np.ndarray]:
    """llama.cpp's ``make_qkx2_quants`` over rows of ``x`` (sub-blocks): ``(scale, min)`` per row with
    ``x ~ scale * L + min``, ``L`` in [0, nmax], ``min <= 0``; weights ``mean(x^2)^0.5 + |x|``."""
    w = np.sqrt(np.mean(x * x, axis=1, keepdims=True)) + np.abs(x)
    lo = np.minimum(x.min(axis=1, keepdims=True), 0.0)
    hi = x.max(axis=1, keepdims=True)
    span = hi - lo
    flat = span[:, 0] <= 0
    span = np.where(span > 0, span, 1.0)
    sum_w = w.sum(axis=1, keepdims=True)
    sum_x = (w * x).sum(axis=1, keepdims=True)
    iscale = nmax / span
    scale = 1.0 / iscale
    mn = lo
    levels = np.clip(np.rint(iscale * (x - lo)), 0, nmax)
    best = (w * (scale * levels + mn - x) ** 2).sum(axis=1, keepdims=True)
    for step in range(nstep + 1):
        iscale = (rmin + rdelta * step + nmax) / span
        levels = np.clip(np.rint(iscale * (x - lo)), 0, nmax)
        sum_l = (w * levels).sum(axis=1, keepdims=True)
        sum_l2 = (w * levels * levels).sum(axis=1, keepdims=True)
        sum_xl = (w * levels * x).sum(axis=1, keepdims=True)
        det = sum_w * sum_l2 - sum_l * sum_l
        ok = det > 0
        safe = np.where(ok, det, 1.0)
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / safe
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / safe
        positive = this_min > 0
        this_scale = np.where(positive, sum_xl / np.where(sum_l2 > 0, sum_l2, 1.0), this_scale)
        this_min = np.where(positive, 0.0, this_min)
        err = (w * (this_scale * levels + this_min - x) ** 2).sum(axis=1, keepdims=True)
        better = ok & (err < best)
        best = np.where(better, err, best)
        scale = np.where(better, this_scale, scale)
        mn = np.where(better, this_min, mn)
    scale = np.where(flat[:, None], 0.0, scale)
    mn = np.where(flat[:, None], lo, mn)
    return scale[:, 0], -mn[:, 0]


def quantize_q4_k(rows: np.ndarray) -> np.ndarray:
    """Q4_K blocks (144 bytes per 256 values) of a float array whose last axis is a multiple of 256."""
    x = np.asarray(rows, dtype=np.float32).reshape(-1, QK_K)
    out = [_q4_k_chunk(x[i:i + _CHUNK]) for i in range(0, len(x), _CHUNK)]
    return np.concatenate(out).reshape(*rows.shape[:-1], -1)


def _q4_k_chunk(x: np.ndarray) -> np.ndarray:
    n = len(x)
    sub = x.reshape(n * 8, 32).astype(np.float64)
    scales, mins = _qkx2(sub)
    scales, mins = scales.reshape(n, 8), mins.reshape(n, 8)
    max_scale, max_min = scales.max(axis=1), mins.max(axis=1)
    inv_scale = np.where(max_scale > 0, 63.0 / np.where(max_scale > 0, max_scale, 1), 0.0)
    inv_min = np.where(max_min > 0, 63.0 / np.where(max_min > 0, max_min, 1), 0.0)
    ls = np.minimum(63, np.rint(inv_scale[:, None] * scales)).astype(np.uint8)
    lm = np.minimum(63, np.rint(inv_min[:, None] * mins)).astype(np.uint8)
    d = (max_scale / 63.0).astype(np.float16)
    dmin = (max_min / 63.0).astype(np.float16)
    packed = np.zeros((n, 12), dtype=np.uint8)
    packed[:, 0:4] = ls[:, 0:4]
    packed[:, 4:8] = lm[:, 0:4]
    packed[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    packed[:, 0:4] |= (ls[:, 4:8] >> 4) << 6
    packed[:, 4:8] |= (lm[:, 4:8] >> 4) << 6
    step = d.astype(np.float32)[:, None] * ls  # what the decoder multiplies by, from the stored fp16 values
    shift = dmin.astype(np.float32)[:, None] * lm
    safe = np.where(step > 0, step, 1.0)
    levels = np.where(step[:, :, None] > 0,
                      np.clip(np.rint((x.reshape(n, 8, 32) + shift[:, :, None]) / safe[:, :, None]), 0, 15), 0)
    levels = levels.astype(np.uint8).reshape(n, 4, 2, 32)
    qs = (levels[:, :, 0, :] | (levels[:, :, 1, :] << 4)).reshape(n, 128)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), packed, qs], axis=1)


def _qx(x: np.ndarray, nmax: int = 32) -> np.ndarray:
    """llama.cpp's ``make_qx_quants`` (rmse_type 1: weights x^2) over rows: the signed scale per row."""
    idx = np.abs(x).argmax(axis=1)
    peak = x[np.arange(len(x)), idx][:, None]
    amax = np.abs(peak)
    tiny = amax[:, 0] < 1e-15
    peak = np.where(amax > 0, peak, 1.0)
    w = x * x

    def fit(iscale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        levels = np.clip(np.rint(iscale * x), -nmax, nmax - 1)
        return (w * x * levels).sum(axis=1, keepdims=True), (w * levels * levels).sum(axis=1, keepdims=True)

    sumlx, suml2 = fit(-nmax / peak)
    scale = np.where(suml2 > 0, sumlx / np.where(suml2 > 0, suml2, 1.0), 0.0)
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        sumlx, suml2 = fit(-(nmax + 0.1 * step) / peak)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        new_scale = sumlx / np.where(suml2 > 0, suml2, 1.0)
        scale = np.where(better, new_scale, scale)
        best = np.where(better, new_scale * sumlx, best)
    return np.where(tiny[:, None], 0.0, scale)[:, 0]


def quantize_q6_k(rows: np.ndarray) -> np.ndarray:
    """Q6_K blocks (210 bytes per 256 values) of a float array whose last axis is a multiple of 256."""
    x = np.asarray(rows, dtype=np.float32).reshape(-1, QK_K)
    out = [_q6_k_chunk(x[i:i + _CHUNK]) for i in range(0, len(x), _CHUNK)]
    return np.concatenate(out).reshape(*rows.shape[:-1], -1)


def _q6_k_chunk(x: np.ndarray) -> np.ndarray:
    n = len(x)
    scales = _qx(x.reshape(n * 16, 16).astype(np.float64)).reshape(n, 16)
    pick = np.abs(scales).argmax(axis=1)
    max_scale = scales[np.arange(n), pick]
    zero = np.abs(max_scale) < 1e-15
    iscale = np.where(zero, 0.0, -128.0 / np.where(zero, 1.0, max_scale))
    d = np.where(zero, 0.0, 1.0 / np.where(iscale != 0, iscale, 1.0)).astype(np.float16)
    sc = np.minimum(127, np.rint(iscale[:, None] * scales)).astype(np.int8)
    step = d.astype(np.float32)[:, None] * sc.astype(np.float32)
    safe = np.where(step != 0, step, 1.0)
    levels = np.where(step[:, :, None] != 0,
                      np.clip(np.rint(x.reshape(n, 16, 16) / safe[:, :, None]), -32, 31), 0) + 32
    q = levels.astype(np.uint8).reshape(n, 2, 4, 32)  # [half, quarter, position]
    ql = np.concatenate([q[:, :, 0, :] & 0xF | ((q[:, :, 2, :] & 0xF) << 4),
                         q[:, :, 1, :] & 0xF | ((q[:, :, 3, :] & 0xF) << 4)], axis=2).reshape(n, 128)
    qh = ((q[:, :, 0, :] >> 4) | ((q[:, :, 1, :] >> 4) << 2) | ((q[:, :, 2, :] >> 4) << 4)
          | ((q[:, :, 3, :] >> 4) << 6)).reshape(n, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), _f16_bytes(d)], axis=1)


def quantizer(qtype: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The quantizer of a ``gguf.GGMLQuantizationType``: ours for Q4_K and Q6_K, gguf's for the others."""
    import gguf

    if qtype == gguf.GGMLQuantizationType.Q4_K:
        return quantize_q4_k
    if qtype == gguf.GGMLQuantizationType.Q6_K:
        return quantize_q6_k
    if qtype == gguf.GGMLQuantizationType.F32:
        return lambda a: np.asarray(a, dtype=np.float32)
    if qtype == gguf.GGMLQuantizationType.F16:
        return lambda a: np.asarray(a, dtype=np.float16)
    return lambda a: np.asarray(gguf.quantize(np.asarray(a, dtype=np.float32), qtype))


def write_like(template: str | Path, weights: Callable[[str], np.ndarray], out: str | Path, *,
               metadata: Mapping[str, str] | None = None) -> Path:
    """Write ``out``: ``template``'s metadata (string keys in ``metadata`` replaced or added) and its tensors in its
    order, types and shapes, each from ``weights(gguf_tensor_name)`` (float values, shaped as the template's
    dequantized tensor) quantized to the template's type."""
    import gguf

    reader = gguf.GGUFReader(str(template))
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(out), arch=arch)
    extra = dict(metadata or {})
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name in extra:
            writer.add_string(field.name, extra.pop(field.name))
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    for key, value in extra.items():
        writer.add_string(key, value)
    blocks = []
    for tensor in reader.tensors:
        expected = gguf.dequantize(tensor.data, tensor.tensor_type).shape
        values = np.asarray(weights(tensor.name), dtype=np.float32)
        if values.shape != expected:
            raise InputError(f"tensor {tensor.name}: weights of shape {values.shape}, the template's is {expected}")
        data = quantizer(tensor.tensor_type)(values)
        if data.shape != tensor.data.shape or data.dtype != tensor.data.dtype:
            raise InputError(f"tensor {tensor.name}: quantized to {data.shape} {data.dtype}, the template holds "
                             f"{tensor.data.shape} {tensor.data.dtype}")
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, tensor.tensor_type)
        blocks.append(data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in blocks:
        writer.write_tensor_data(data)
    writer.close()
    return Path(out)
