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


def test_the_rescoring_rows_put_a_cascade_under_the_balanced_mix() -> None:
    """The distilled (or shorter-lead) MiniLM ranks, the bundled one over 128 pieces rescores the best few, the rest
    keep the first stage's scores; around it the default's mix and table view. Built without loading a model."""
    from ragtrim.scoring.adapter import BUNDLED_ADAPTER, LONG_QUERY_WORDS
    from ragtrim.scoring.auto import balanced_scorer
    from ragtrim.scoring.cascade import CascadeScorer
    from ragtrim.testing import FakeEmbedder
    from ragtrim_bench.tuning.cpu_recipes import _minilm, _rescoring_scorer

    first = FakeEmbedder()
    scorer = _rescoring_scorer(first, 4)
    default = balanced_scorer("onnxruntime-int8-cpu")
    bm25, view = scorer.second.scorers
    assert bm25.name == default.second.scorers[0].name and scorer.second.weights == default.second.weights
    cascade = view.scorer
    assert isinstance(cascade, CascadeScorer) and (cascade.first, cascade.candidates, cascade.rest) == (first, 4,
                                                                                                         "first")
    assert cascade.second.name == default.second.scorers[1].scorer.name  # the default's MiniLM, adapter included
    lead = _minilm(None, 64)
    assert (lead.max_seq_length, lead.query_adapter, lead.query_adapter_min_length) == (64, BUNDLED_ADAPTER,
                                                                                        LONG_QUERY_WORDS)


def test_the_fused_row_is_the_default_with_every_fusion_on() -> None:
    """The control for the fusions ragtrim leaves out: the default's scorer, part for part, whose MiniLM sessions
    leave nothing out; and the fewer-pieces rows differ from the default in the pieces MiniLM reads only."""
    from ragtrim.scoring.auto import balanced_scorer
    from ragtrim.scoring.onnx_backend import UNFUSED, OnnxEmbeddingScorer
    from ragtrim_bench.tuning.cpu_recipes import fused_layer_norm_scorer

    def minilm(scorer: object) -> OnnxEmbeddingScorer:
        found = scorer.second.scorers[1].scorer  # type: ignore[attr-defined]
        assert isinstance(found, OnnxEmbeddingScorer)
        return found

    default, fused = balanced_scorer("onnxruntime-int8-cpu", threads=2), fused_layer_norm_scorer()
    assert minilm(fused).unfused == () and minilm(default).unfused == UNFUSED != ()
    assert minilm(fused).get_params() == minilm(default).get_params()
    without = {k: v for k, v in default.to_dict().items() if k != "second"}
    assert {k: v for k, v in fused.to_dict().items() if k != "second"} == without
    assert fused.second.weights == default.second.weights and fused.second.sure_weights == default.second.sure_weights
    shorter = balanced_scorer("onnxruntime-int8-cpu", threads=2, pieces=120)
    assert minilm(shorter).get_params() == {**minilm(default).get_params(), "max_seq_length": 120}
