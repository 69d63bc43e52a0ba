"""A batch-invariant int8 MiniLM for ONNX Runtime: every number a text's vector depends on comes from that text alone,
so texts can share a model call (one call for a request instead of one per text) and still get the vectors they get
alone. Built from the fp32 export by rewriting its graph; needs ``onnx`` and numpy, no torch.

What changes against ONNX Runtime's dynamic quantization (``model.int8.onnx``), and why:

* Activations are quantized with one scale per token row (``amax / 127`` of that row, zero point 128), not one per
  call: a per-call scale made each text's vector depend on the others in its call. Integer accumulation is exact,
  so the order a kernel sums in cannot matter either.
* Weights are int8 with one scale per output channel (symmetric); the word-embedding table with one per token.
* Mean pooling is a matrix product of the mask row and the hidden states, and the L2 norm a dot product, each per
  text: ONNX Runtime's ``ReduceSum`` over the token axis summed in a different order when the call held more rows
  (the one operation of the fp32 graph whose result depended on the batch).
* The attention mask is added as one bias per text instead of a ``Where`` over every (head, token, token). The NaN
  check after each softmax is already gone from the export (``ragtrim.scoring.onnx_export.drop_nan_guards``: a row
  always keeps its first piece, so no softmax row is empty).

Texts of different lengths still need their own calls (padding changes the attention softmax's summation length);
``padded_batches(..., grouping="exact_length")`` groups equal lengths. Closer to fp32 than the dynamic export: cosine
0.998 to the fp32 vectors against 0.956 (benchmarks/results/relevance/batch_invariance.json).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim.errors import ConfigError, MissingDependencyError

BUILD_VERSION = 1
"""Bumped when the rewrite changes: the file name holds it, so a cache never serves an older build."""
ROW_FILE = f"model.int8row-v{BUILD_VERSION}.onnx"
_EMBEDDING_TABLE_MIN = 1_000_000
"""A ``Gather`` from a constant table of at least this many entries is the word-embedding table: stored as int8."""


class _Graph:
    """The rewrite's state: the nodes and constants it emits, with names prefixed so that none collides."""

    def __init__(self, onnx: Any, model: Any) -> None:
        self.onnx = onnx
        self.model = model
        self.helper = onnx.helper
        self.numpy_helper = onnx.numpy_helper
        self.nodes: list[Any] = []
        self.constants: list[Any] = []
        self.initializers = {i.name: i for i in model.graph.initializer}
        self.dropped: set[str] = set()
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"rowq/{self._count}/{hint}"

    def const(self, value: np.ndarray, hint: str) -> str:
        name = self.name(hint)
        self.constants.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: Sequence[str], hint: str, *, output: str | None = None,
             domain: str | None = None, **attrs: Any) -> str:
        out = output if output is not None else self.name(hint)
        self.nodes.append(self.helper.make_node(op, list(inputs), [out], domain=domain, **attrs))
        return out

    def weight(self, name: str) -> np.ndarray | None:
        init = self.initializers.get(name)
        return None if init is None else np.asarray(self.numpy_helper.to_array(init))


def _quantized_rows(g: _Graph, x: str, width: int, cache: dict[str, tuple[str, str, str]]) -> tuple[str, str, str]:
    """``x`` (..., width) as uint8 rows: ``(rows x width quantized, rows x 1 scale, x's leading shape)``."""
    if x in cache:
        return cache[x]
    flat = g.node("Reshape", [x, g.const(np.array([-1, width], np.int64), "flat_shape")], "x2d")
    hi = g.node("ReduceMax", [flat], "max", axes=[1], keepdims=0)
    lo = g.node("ReduceMin", [flat], "min", axes=[1], keepdims=0)
    amax = g.node("Max", [hi, g.node("Neg", [lo], "neg_min")], "amax")
    scale = g.node("Max", [g.node("Div", [amax, g.const(np.array(127.0, np.float32), "q127")], "scale0"),
                           g.const(np.array(np.finfo(np.float32).tiny, np.float32), "tiny")], "scale")
    zero = g.node("Expand", [g.const(np.array(128, np.uint8), "zp128"), g.node("Shape", [scale], "rows")], "zp")
    quantized = g.node("QuantizeLinear", [flat, scale, zero], "xq", axis=0)
    column = g.node("Unsqueeze", [scale, g.const(np.array([1], np.int64), "axis1")], "scale_col")
    lead = g.node("Slice", [g.node("Shape", [x], "xshape"), g.const(np.array([0], np.int64), "s0"),
                            g.const(np.array([-1], np.int64), "sm1")], "lead")
    cache[x] = (quantized, column, lead)
    return cache[x]


def _matmul(g: _Graph, node: Any, weight: np.ndarray, cache: dict[str, tuple[str, str, str]]) -> None:
    """``x @ weight`` as int8 x int8 with exact int32 sums, scaled per output channel and per row."""
    width, channels = weight.shape
    scales = np.abs(weight).max(axis=0) / 127.0
    scales = np.where(scales > 0, scales, 1.0).astype(np.float32)
    q = np.clip(np.round(weight / scales), -127, 127).astype(np.int8)
    x, row_scale, lead = _quantized_rows(g, node.input[0], width, cache)
    acc = g.node("MatMulIntegerToFloat", [x, g.const(q, "wq"), g.const(np.array(1.0, np.float32), "one"),
                                          g.const(scales, "ws"), g.const(np.array(128, np.uint8), "zp128")],
                 "acc", domain="com.microsoft")
    y = g.node("Mul", [acc, row_scale], "y2d")
    shape = g.node("Concat", [lead, g.const(np.array([channels], np.int64), "channels")], "yshape", axis=0)
    g.node("Reshape", [y, shape], "y", output=node.output[0])
    g.dropped.add(node.input[1])


def _gather(g: _Graph, node: Any, table: np.ndarray) -> None:
    """A large embedding table as int8 rows with one scale each, dequantized after the lookup."""
    scales = np.abs(table).max(axis=1) / 127.0
    scales = np.where(scales > 0, scales, 1.0).astype(np.float32)
    q = np.clip(np.round(table / scales[:, None]), -127, 127).astype(np.int8)
    rows = g.node("Gather", [g.const(q, "table_q"), node.input[1]], "rows_q")
    picked = g.node("Gather", [g.const(scales[:, None], "table_scale"), node.input[1]], "rows_scale")
    g.node("Mul", [g.node("Cast", [rows], "rows_f", to=g.onnx.TensorProto.FLOAT), picked], "rows",
           output=node.output[0])
    g.dropped.add(node.input[0])


def _pooling_tail(g: _Graph, hidden: str, mask: str, output: str) -> None:
    """Mean of the unmasked hidden states and L2 normalization, each a per-text matrix product."""
    tp = g.onnx.TensorProto
    maskf = g.node("Cast", [mask], "maskf", to=tp.FLOAT)
    row = g.node("Unsqueeze", [maskf, g.const(np.array([1], np.int64), "axis1")], "mask_row")
    summed = g.node("Squeeze", [g.node("MatMul", [row, hidden], "masked_sum"),
                                g.const(np.array([1], np.int64), "axis1")], "summed")
    count = g.node("ReduceSum", [maskf, g.const(np.array([1], np.int64), "axis1")], "count", keepdims=1)
    mean = g.node("Div", [summed, g.node("Max", [count, g.const(np.array(1e-9, np.float32), "eps")], "count1")],
                  "mean")
    left = g.node("Unsqueeze", [mean, g.const(np.array([1], np.int64), "axis1")], "mean_row")
    right = g.node("Unsqueeze", [mean, g.const(np.array([2], np.int64), "axis2")], "mean_col")
    square = g.node("Squeeze", [g.node("MatMul", [left, right], "dot"), g.const(np.array([1], np.int64), "axis1")],
                    "square")
    norm = g.node("Max", [g.node("Sqrt", [square], "norm0"), g.const(np.array(1e-12, np.float32), "eps12")], "norm")
    g.node("Div", [mean, norm], "embedding", output=output)


def _attention_bias(g: _Graph, nodes: Sequence[Any], mask: str) -> tuple[dict[str, str], set[int]]:
    """Where the export adds ``Where(mask, 0, -inf)`` before each softmax: one additive bias per text instead (the
    export has no NaN guard after the softmax: ``ragtrim.scoring.onnx_export.drop_nan_guards``). Returns renamed
    tensors and the nodes to drop (none when the pattern is not found: the graph is then left as exported)."""
    produced = {o: n for n in nodes for o in n.output}
    renamed: dict[str, str] = {}
    drop: set[int] = set()
    bias: str | None = None
    for n in nodes:
        if n.op_type != "Softmax":
            continue
        add = produced.get(n.input[0])
        where = next((produced.get(i) for i in add.input if produced.get(i) is not None
                      and produced[i].op_type == "Where"), None) if add is not None and add.op_type == "Add" else None
        if add is None or where is None or not _is_mask_where(g, where, produced):
            return {}, set()
        if bias is None:
            tp = g.onnx.TensorProto
            keep = g.node("Cast", [mask], "mask_f", to=tp.FLOAT)
            shaped = g.node("Unsqueeze", [keep, g.const(np.array([1, 2], np.int64), "axes12")], "mask_b11t")
            big = np.array(np.finfo(np.float32).min, np.float32)
            bias = g.node("Mul", [g.node("Sub", [g.const(np.array(1.0, np.float32), "one"), shaped], "masked"),
                                  g.const(big, "minus_big")], "attention_bias")
        renamed[where.output[0]] = bias
        drop.add(id(where))
    return renamed, drop


def _constant(g: _Graph, name: str, produced: dict[str, Any]) -> np.ndarray | None:
    node = produced.get(name)
    if node is None or node.op_type != "Constant" or not node.attribute:
        return None
    return np.asarray(g.numpy_helper.to_array(node.attribute[0].t))


def _is_mask_where(g: _Graph, where: Any, produced: dict[str, Any]) -> bool:
    """``Where(attend, 0, -inf)``: the export's attention mask (0 where a key is attended, -inf where it is not)."""
    keep, masked = (_constant(g, where.input[k], produced) for k in (1, 2))
    return (keep is not None and masked is not None and keep.size == 1 and masked.size == 1
            and float(keep.reshape(())) == 0.0 and float(masked.reshape(())) < -1e30)


def _skip_layer_norms(g: _Graph) -> None:
    """``LayerNorm(Add(Add(bias, y), skip))`` as one ``SkipLayerNormalization(y, skip, gamma, beta, bias)`` (ONNX
    Runtime fuses this itself only when the dense layer is a plain ``MatMul``)."""
    produced = {o: n for n in g.nodes for o in n.output}
    uses: dict[str, int] = {}
    for n in g.nodes:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    out: list[Any] = []
    for n in g.nodes:
        outer = produced.get(n.input[0]) if n.op_type == "LayerNormalization" and len(n.input) == 3 else None
        fused = None
        if outer is not None and outer.op_type == "Add" and uses.get(outer.output[0]) == 1:
            for k in (0, 1):
                inner = produced.get(outer.input[k])
                if inner is None or inner.op_type != "Add" or uses.get(inner.output[0]) != 1:
                    continue
                biases = [j for j in (0, 1) if (b := g.weight(inner.input[j])) is not None and b.ndim == 1]
                if len(biases) == 1:
                    bias, y = inner.input[biases[0]], inner.input[1 - biases[0]]
                    eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-12)
                    fused = g.helper.make_node("SkipLayerNormalization",
                                               [y, outer.input[1 - k], n.input[1], n.input[2], bias],
                                               [n.output[0]], domain="com.microsoft", epsilon=eps)
                    break
        out.append(fused if fused is not None else n)
    g.nodes = out


def live_nodes(nodes: Sequence[Any], outputs: Sequence[str]) -> list[Any]:
    """``nodes`` (in graph order) without those whose outputs nothing on the way to ``outputs`` uses."""
    needed = set(outputs)
    live: list[Any] = []
    for n in reversed(nodes):
        if any(o in needed for o in n.output):
            live.append(n)
            needed.update(i for i in n.input if i)
    return live[::-1]


def rewrite(model: Any, onnx: Any) -> Any:
    """The rewritten graph of ``model`` (an ``onnx.ModelProto`` of ``ragtrim.scoring.onnx_backend.export_onnx``)."""
    g = _Graph(onnx, model)
    graph = model.graph
    nodes = list(graph.node)
    outputs = [o.name for o in graph.output]
    inputs = [i.name for i in graph.input]
    if outputs != ["embedding"] or "attention_mask" not in inputs:
        raise ConfigError("the ONNX export does not look like ragtrim's MiniLM export (inputs input_ids, "
                          "attention_mask, token_type_ids; output embedding); run `ragtrim prepare --force`")
    norms = [k for k, n in enumerate(nodes) if n.op_type == "LayerNormalization"]
    if not norms:
        raise ConfigError("the ONNX export has no LayerNormalization node; run `ragtrim prepare --force`")
    hidden = nodes[norms[-1]].output[0]
    renamed, drop = _attention_bias(g, nodes[: norms[-1] + 1], "attention_mask")
    cache: dict[str, tuple[str, str, str]] = {}
    for n in nodes[: norms[-1] + 1]:
        if id(n) in drop:
            continue
        for k, name in enumerate(n.input):
            if name in renamed:
                n.input[k] = renamed[name]
        weight = g.weight(n.input[1]) if n.op_type == "MatMul" else None
        table = g.weight(n.input[0]) if n.op_type == "Gather" else None
        if weight is not None and weight.ndim == 2:
            _matmul(g, n, weight.astype(np.float32), cache)
        elif table is not None and table.ndim == 2 and table.size >= _EMBEDDING_TABLE_MIN:
            _gather(g, n, table.astype(np.float32))
        else:
            g.nodes.append(n)
    _pooling_tail(g, hidden, "attention_mask", "embedding")
    _skip_layer_norms(g)
    live = live_nodes(g.nodes, outputs)  # the mask construction the bias replaced goes
    used = {i for n in live for i in n.input}
    del graph.node[:]
    graph.node.extend(live)
    kept = [i for i in [*graph.initializer, *g.constants] if i.name not in g.dropped and i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.value_info[:]
    if not any(op.domain == "com.microsoft" for op in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return model


def build_row_quantized(source: Path, target: Path) -> Path:
    """Write the row-quantized model made from the fp32 export ``source`` to ``target`` (through a temporary file
    and a rename, so a concurrent reader never sees half a model)."""
    try:
        import onnx
    except ImportError as exc:
        raise MissingDependencyError("onnx", "torch", "building the batch-invariant int8 MiniLM") from exc
    model = rewrite(onnx.load(str(source)), onnx)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".rowq-", suffix=".onnx")
    os.close(fd)
    try:
        onnx.save(model, tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary file, not mkstemp's owner-only mode
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
