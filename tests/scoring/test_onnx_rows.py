"""The batch-invariant int8 MiniLM: the rewrite of the fp32 export (the real export: model tests)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ragtrim.errors import ConfigError

onnx = pytest.importorskip("onnx", reason="the embeddings extra brings onnx")


def test_a_graph_that_is_not_the_export_is_refused() -> None:
    from onnx import TensorProto, helper

    from ragtrim.scoring.onnx_rows import rewrite

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    with pytest.raises(ConfigError, match="does not look like ragtrim's MiniLM export"):
        rewrite(helper.make_model(graph), onnx)


@pytest.mark.model
class TestBuiltFromTheExport:
    @pytest.fixture(scope="class")
    def built(self, tmp_path_factory: pytest.TempPathFactory) -> Path:
        from ragtrim.scoring.onnx_backend import export_onnx
        from ragtrim.scoring.onnx_rows import build_row_quantized

        folder = export_onnx()
        target = tmp_path_factory.mktemp("rows") / "model.onnx"
        return build_row_quantized(folder / "model.onnx", target)

    def test_every_weight_product_is_int8_with_row_scales(self, built: Path) -> None:
        ops = Counter(n.op_type for n in onnx.load(str(built)).graph.node)
        assert ops["MatMulIntegerToFloat"] == 36 and ops["QuantizeLinear"] == 24  # Q/K/V share one quantization
        assert ops["DynamicQuantizeLinear"] == ops["Where"] == ops["IsNaN"] == 0
        assert ops["SkipLayerNormalization"] == 12
        assert not list(built.parent.glob(".rowq-*")), "temporary file left behind"

    def test_the_build_is_deterministic(self, built: Path, tmp_path: Path) -> None:
        from ragtrim.scoring.onnx_backend import export_dir
        from ragtrim.scoring.onnx_rows import build_row_quantized

        again = build_row_quantized(export_dir() / "model.onnx", tmp_path / "again.onnx")
        assert again.read_bytes() == built.read_bytes()

    def test_vectors_do_not_depend_on_the_batch(self, built: Path) -> None:
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(str(built), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        ids = rng.integers(1000, 20000, size=(9, 40)).astype(np.int64)
        ids[:, 0] = 101

        def run(rows: np.ndarray) -> np.ndarray:
            return np.asarray(session.run(None, {"input_ids": rows, "attention_mask": np.ones_like(rows),
                                                 "token_type_ids": np.zeros_like(rows)})[0])

        together = run(ids)
        alone = np.vstack([run(ids[i:i + 1]) for i in range(len(ids))])
        assert together.tobytes() == alone.tobytes()
        assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
