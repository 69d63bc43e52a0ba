"""The distillation of the shipped MiniLM: the corpus keeps held-out answers out, the shipped int8 model's weights
read back under their Hugging Face names, and a short training run writes a student that loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragtrim_bench.relevance.columns import Request
from ragtrim_bench.tuning import distill


def _request(split: str, question: str, passages: tuple[str, ...], gold: int) -> Request:
    return Request(column="nq-title", split=split, id=question, question=question, answers=("x",),  # type: ignore[arg-type]
                   passages=passages, gold_index=gold)


def test_corpus_leaves_out_every_heldout_gold_passage() -> None:
    dev = [_request("dev", "q1", ("a", "b", "c"), 0), _request("dev", "q2", ("c", "h", "d"), 2)]
    heldout = [_request("heldout", "q3", ("h", "a"), 0)]  # its gold "h" is a distractor of q2
    texts, groups, questions = distill.corpus_groups(dev, heldout)
    assert "h" not in texts and "q3" not in texts
    assert [[texts[i] for i in g] for g in groups] == [["q1", "a", "b", "c"], ["q2", "c", "d"]]
    assert questions == ["q1", "q2"]


@pytest.fixture(scope="module")
def dequantized() -> dict[str, np.ndarray]:
    pytest.importorskip("onnx", reason="reading the shipped model's weights needs onnx (the torch extra)")
    return distill.dequantized_weights(distill.SHIPPED)


@pytest.mark.model
def test_dequantized_weights_give_the_shipped_models_vectors(dequantized: dict[str, np.ndarray]) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ort = pytest.importorskip("onnxruntime")
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model

    config = json.loads((Path(resolve_model(DEFAULT_EMBEDDING_MODEL)) / "config.json").read_text())
    model = transformers.BertModel(transformers.BertConfig.from_dict(config), add_pooling_layer=False).eval()
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in dequantized.items()},
                                                strict=False)
    assert not missing and not unexpected
    session = ort.InferenceSession(str(distill.SHIPPED), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for n in (5, 40, 126):
        ids = np.concatenate([[distill.CLS], rng.integers(1000, 29000, n), [distill.SEP]]).astype(np.int64)[None]
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        shipped = session.run(None, feed)[0][0]
        with torch.no_grad():
            hidden = model(**{k: torch.from_numpy(v) for k, v in feed.items()}).last_hidden_state[0].mean(0)
        ours = torch.nn.functional.normalize(hidden, dim=-1).numpy()
        assert float(ours @ shipped) > 0.98  # int8 activations in the shipped model, float here


def test_student_weights_renumber_the_layers_kept() -> None:
    teacher = {f"encoder.layer.{i}.output.dense.bias": np.full(2, float(i)) for i in range(6)}
    teacher["embeddings.LayerNorm.bias"] = np.zeros(2)
    student = distill.student_weights(teacher, [0, 2, 5])
    assert sorted(student) == ["embeddings.LayerNorm.bias", *(f"encoder.layer.{i}.output.dense.bias" for i in range(3))]
    assert [student[f"encoder.layer.{i}.output.dense.bias"][0] for i in range(3)] == [0.0, 2.0, 5.0]


@pytest.mark.model
def test_a_short_training_run_writes_a_student_that_assembles(dequantized: dict[str, np.ndarray],
                                                              tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    from ragtrim.errors import MissingDependencyError
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model

    try:
        src = Path(resolve_model(DEFAULT_EMBEDDING_MODEL))
    except MissingDependencyError as exc:
        pytest.skip(f"the bundled MiniLM is not installed: {exc}")
    rng = np.random.default_rng(0)
    lengths = rng.integers(8, 200, 12)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    groups = np.array([[0, 1, 2, 3], [4, 5, 6, -1], [7, 8, 9, 10], [11, 1, 2, 3]], dtype=np.int32)
    np.savez(corpus / "corpus.npz", ids=rng.integers(1000, 29000, int(lengths.sum())).astype(np.uint16),
             lengths=lengths, groups=groups, long=np.array([True, False, False, True]),
             columns=np.array([5, 0, 0, 5], dtype=np.int8))
    (corpus / "config.json").write_text((src / "config.json").read_text())
    result = distill.train(corpus, [0, 5], tmp_path / "student", steps=2, batch_groups=2, lr=1e-4, pair_weight=10.0,
                           list_weight=1.0, seed=0, workers=1, adapter_path=distill.ADAPTER, windows=2,
                           column_weights={"cuad": 2.0})
    assert [c["step"] for c in result["curve"]] == [0, 1]
    layers = safetensors_numpy.load_file(str(tmp_path / "student" / "layers.safetensors"))
    assert {k.split(".")[2] for k in layers} == {"0", "1"}
    folder = distill.assemble(tmp_path / "student", tmp_path / "folder")
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == 2
    weights = safetensors_numpy.load_file(str(folder / "model.safetensors"))
    bundled = safetensors_numpy.load_file(str(src / "model.safetensors"))
    assert np.array_equal(weights["embeddings.word_embeddings.weight"], bundled["embeddings.word_embeddings.weight"])
    assert np.array_equal(weights["encoder.layer.1.output.dense.bias"],
                          layers["encoder.layer.1.output.dense.bias"].astype(np.float32))


def test_a_distilled_row_without_its_model_names_the_commands_that_make_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrim.errors import ConfigError
    from ragtrim_bench.tuning.cpu_recipes import distilled_model

    monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="tuning distill corpus.*relevance adapter train --model"):
        distilled_model("distilled-l3")


def test_column_weights_make_their_requests_likelier_and_reject_nonsense() -> None:
    import argparse

    data = {"columns": np.array([distill.COLUMNS.index("cuad"), distill.COLUMNS.index("kv"),
                                 distill.COLUMNS.index("kv")])}
    assert distill._group_odds(data, {}) is None  # every request alike: the draws of a run without weights
    assert distill._group_odds(data, {"cuad": 2.0}).tolist() == [0.5, 0.25, 0.25]
    with pytest.raises(ValueError, match="column weights"):
        distill._group_odds(data, {"nq": 2.0})
    assert distill.column_weights("cuad=3, tatqa=2") == {"cuad": 3.0, "tatqa": 2.0}
    with pytest.raises(argparse.ArgumentTypeError, match="column=weight"):
        distill.column_weights("cuad")
