"""ragtrim_bench.models.gguf_write: Q4_K and Q6_K quantizers that reproduce llama.cpp's blocks, and a GGUF written in
another GGUF's layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragtrim.errors import InputError

gguf = pytest.importorskip("gguf", reason="gguf is not installed (the benchmarks' gemma extra)")

from ragtrim_bench.models.gguf_write import quantize_q4_k, quantize_q6_k, write_like

Q = gguf.GGMLQuantizationType


def _rel_rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(b ** 2)))


@pytest.mark.model  # reading the packaged GGUF's 262k-token vocabulary takes 10 CPU-seconds
def test_the_packaged_ggufs_blocks_come_back() -> None:
    """Requantizing what llama.cpp's Q4_K_M file dequantizes to gives its Q4_K blocks byte for byte, and its Q6_K
    blocks within rounding (llama.cpp broke some ties otherwise)."""
    from ragtrim_bench.models.gemma import find_gguf

    try:
        path = find_gguf()
    except InputError:
        pytest.skip("the Gemma 3 270M GGUF package is not installed")
    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    q4 = tensors["blk.0.attn_output.weight"]
    assert q4.tensor_type == Q.Q4_K
    assert np.array_equal(quantize_q4_k(gguf.dequantize(q4.data, Q.Q4_K)), q4.data)
    q6 = tensors["blk.0.ffn_down.weight"]
    assert q6.tensor_type == Q.Q6_K
    values = gguf.dequantize(q6.data, Q.Q6_K)
    again = quantize_q6_k(values)
    assert again.shape == q6.data.shape and np.mean(again == q6.data) > 0.95
    assert _rel_rmse(gguf.dequantize(again, Q.Q6_K), values) < 1e-3


def test_error_on_gaussian_weights() -> None:
    x = np.random.default_rng(0).standard_normal((16, 512)).astype(np.float32)
    assert 0.06 < _rel_rmse(gguf.dequantize(quantize_q4_k(x), Q.Q4_K), x) < 0.08  # about 4.5 bits a value
    assert 0.015 < _rel_rmse(gguf.dequantize(quantize_q6_k(x), Q.Q6_K), x) < 0.02
    zeros = np.zeros((1, 256), dtype=np.float32)
    assert not gguf.dequantize(quantize_q4_k(zeros), Q.Q4_K).any()
    assert not gguf.dequantize(quantize_q6_k(zeros), Q.Q6_K).any()


def test_write_like_keeps_the_layout(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    template = tmp_path / "t.gguf"
    w = gguf.GGUFWriter(str(template), arch="gemma3")
    w.add_string("general.name", "template")
    w.add_uint32("gemma3.block_count", 1)
    w.add_array("tokenizer.ggml.tokens", ["<pad>", "a", "b"])
    originals = {"q4": (rng.standard_normal((2, 256)), Q.Q4_K), "q6": (rng.standard_normal((2, 256)), Q.Q6_K),
                 "q5": (rng.standard_normal((2, 64)), Q.Q5_0), "q8": (rng.standard_normal((2, 64)), Q.Q8_0),
                 "norm": (rng.standard_normal(64), Q.F32)}
    for name, (values, qtype) in originals.items():
        data = values.astype(np.float32) if qtype == Q.F32 else gguf.quantize(values.astype(np.float32), qtype) \
            if qtype in (Q.Q5_0, Q.Q8_0) else (quantize_q4_k if qtype == Q.Q4_K else quantize_q6_k)(values)
        w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    new = {name: rng.standard_normal(v.shape).astype(np.float32) for name, (v, _) in originals.items()}
    out = write_like(template, lambda name: new[name], tmp_path / "out.gguf", metadata={"general.name": "tuned"})
    r = gguf.GGUFReader(str(out))
    assert r.fields["general.name"].contents() == "tuned"
    assert r.fields["gemma3.block_count"].contents() == 1
    assert r.fields["tokenizer.ggml.tokens"].contents() == ["<pad>", "a", "b"]
    for t in r.tensors:
        assert t.tensor_type == originals[t.name][1]
        back = gguf.dequantize(t.data, t.tensor_type)
        assert back.shape == new[t.name].shape
        assert _rel_rmse(back, new[t.name]) < (0.08 if t.tensor_type in (Q.Q4_K, Q.Q5_0) else 0.02)
    with pytest.raises(InputError, match="tensor q4: weights of shape"):
        write_like(template, lambda name: np.zeros((3, 3)), tmp_path / "bad.gguf")
