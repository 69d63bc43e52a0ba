"""The layer-dropped MiniLM the tuning rows measure: the bundled weights of the layers kept, renumbered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.errors import MissingDependencyError
from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model
from ragtrim_bench.tuning.cpu_recipes import layer_model

safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="the layer rows need safetensors")


@pytest.mark.model  # the bundled MiniLM's weights come with the torch extra
def test_layer_model_keeps_the_layers_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        src = Path(resolve_model(DEFAULT_EMBEDDING_MODEL))
    except MissingDependencyError as exc:  # the bundled model comes with the torch extra
        pytest.skip(f"the bundled MiniLM is not installed: {exc}")
    monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(tmp_path))
    out = Path(layer_model((0, 2, 5)))
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 3
    full = safetensors_numpy.load_file(str(src / "model.safetensors"))
    kept = safetensors_numpy.load_file(str(out / "model.safetensors"))
    name = "encoder.layer.{}.attention.self.query.weight"
    assert not any(k.startswith("encoder.layer.3.") for k in kept)
    for new, old in enumerate((0, 2, 5)):
        assert (kept[name.format(new)] == full[name.format(old)]).all()
    assert (kept["embeddings.word_embeddings.weight"] == full["embeddings.word_embeddings.weight"]).all()
    assert layer_model((0, 2, 5)) == str(out)  # made once
