"""The query adapter: the bundled file loads with core dependencies, maps a query vector to a unit vector, and
changes an embedder's scores only through the query."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.adapter import (
    BUNDLED_ADAPTER,
    BUNDLED_FILE,
    LONG_QUERY_WORDS,
    adapt_query,
    adapter_file,
    adapter_suffix,
    adapts,
    load_adapter,
)
from ragtrim.scoring.auto import balanced_scorer, fast_scorer
from ragtrim.scoring.registry import get_scorer
from ragtrim.testing import FakeEmbedder
from ragtrim.vectors.index import embedders_of


def _write(path: Path, delta: np.ndarray) -> str:
    with path.open("wb") as fh:
        np.savez(fh, delta=delta)
    return str(path)


class TestBundled:
    def test_loads_as_a_finite_square_map_for_minilm(self) -> None:
        full = load_adapter(BUNDLED_ADAPTER)
        assert adapter_file(BUNDLED_ADAPTER) == BUNDLED_FILE
        assert full.shape == (384, 384)
        assert np.isfinite(full).all()
        assert not full.flags.writeable
        # trained with a pull toward the identity: close to it, but not it
        assert 0 < np.linalg.norm(full - np.eye(384)) < 50

    def test_records_what_made_it(self) -> None:
        with np.load(BUNDLED_FILE, allow_pickle=False) as data:
            about = str(data["about"])
        assert "ragtrim-bench relevance adapter train" in about
        assert "dev split" in about

    def test_its_note_names_its_bytes_and_licences(self) -> None:
        note = json.loads(BUNDLED_FILE.with_suffix(".source.json").read_text(encoding="utf-8"))
        assert note["sha256"] == hashlib.sha256(BUNDLED_FILE.read_bytes()).hexdigest()
        assert note["adapter"] == BUNDLED_FILE.name
        assert "CC BY 4.0" in note["training_data"]["cuad"] and "CC BY 4.0" in note["training_data"]["tatqa"]

    def test_same_query_same_vector(self) -> None:
        q = np.random.default_rng(0).standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        a, b = adapt_query(BUNDLED_ADAPTER, q), adapt_query(BUNDLED_ADAPTER, q.copy())
        assert a.dtype == np.float32
        assert a.tobytes() == b.tobytes()
        assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)

    def test_the_default_maps_long_queries_only_and_fast_none(self) -> None:
        adapted = embedders_of(balanced_scorer("onnxruntime-int8-cpu", query_adapter=BUNDLED_ADAPTER))
        assert [(e.query_adapter, e.query_adapter_min_length) for e in adapted] == [(BUNDLED_ADAPTER, 0.0)]
        assert adapted[0].name.endswith("@128+qa")
        default = embedders_of(balanced_scorer("onnxruntime-int8-cpu"))
        assert [(e.query_adapter, e.query_adapter_min_length) for e in default] == [(BUNDLED_ADAPTER,
                                                                                     LONG_QUERY_WORDS)]
        assert default[0].name.endswith("@128+qa>20")
        assert [e.query_adapter for e in embedders_of(balanced_scorer("onnxruntime-int8-cpu",
                                                                      query_adapter=None))] == [None]
        assert [e.query_adapter for e in embedders_of(fast_scorer("onnxruntime-int8-cpu"))] == [None]

    def test_the_default_with_another_model_has_no_adapter(self, tmp_path: Path) -> None:
        other = embedders_of(balanced_scorer("onnxruntime-int8-cpu", model=str(tmp_path)))
        assert [e.query_adapter for e in other] == [None]

    def test_the_named_scorers(self) -> None:
        embedders = embedders_of(get_scorer("balanced-qa"))
        assert len(embedders) <= 1  # none where MiniLM cannot run (BM25 alone)
        assert all((e.query_adapter, e.query_adapter_min_length) == (BUNDLED_ADAPTER, 0.0) for e in embedders)
        default = embedders_of(get_scorer("balanced"))
        assert all(e.query_adapter_min_length == LONG_QUERY_WORDS for e in default)

    def test_another_model_is_refused_the_bundled_adapter(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="trained on the bundled all-MiniLM-L6-v2"):
            balanced_scorer("onnxruntime-int8-cpu", model=str(tmp_path), query_adapter=BUNDLED_ADAPTER)
        own = _write(tmp_path / "own.npz", np.zeros((4, 4)))
        other = embedders_of(balanced_scorer("onnxruntime-int8-cpu", model=str(tmp_path), query_adapter=own))
        assert other[0].query_adapter == own


class TestAdaptQuery:
    def test_identity_keeps_the_vector(self, tmp_path: Path) -> None:
        path = _write(tmp_path / "zero.npz", np.zeros((4, 4)))
        q = np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)
        assert np.array_equal(adapt_query(path, q), q)

    def test_maps_and_normalizes(self, tmp_path: Path) -> None:
        delta = np.zeros((2, 2))
        delta[0, 0] = 2.0  # (I + D) = diag(3, 1)
        path = _write(tmp_path / "stretch.npz", delta)
        out = adapt_query(path, np.array([0.6, 0.8], dtype=np.float32))
        assert out == pytest.approx(np.array([1.8, 0.8]) / np.hypot(1.8, 0.8))

    def test_width_mismatch_names_both(self, tmp_path: Path) -> None:
        path = _write(tmp_path / "w3.npz", np.zeros((3, 3)))
        with pytest.raises(ConfigError, match="width 3, the model gives 4"):
            adapt_query(path, np.ones(4, dtype=np.float32))

    @pytest.mark.parametrize("delta", [np.zeros((2, 3)), np.full((2, 2), np.nan)])
    def test_bad_matrix(self, tmp_path: Path, delta: np.ndarray) -> None:
        path = _write(tmp_path / "bad.npz", delta)
        with pytest.raises(ConfigError, match="finite square matrix"):
            load_adapter(path)

    def test_missing_file_names_it(self, tmp_path: Path) -> None:
        missing = str(tmp_path / "nope.npz")
        with pytest.raises(ConfigError, match="nope.npz"):
            load_adapter(missing)

    def test_suffix(self) -> None:
        assert adapter_suffix(None) == ""
        assert adapter_suffix(BUNDLED_ADAPTER) == "+qa"
        assert adapter_suffix("/x/mine.npz") == "+qa:mine.npz"
        assert adapter_suffix(BUNDLED_ADAPTER, 20.0) == "+qa>20"

    def test_which_queries_a_gated_adapter_maps(self) -> None:
        assert adapts("any query at all", 0.0)
        assert not adapts(" ".join(["word"] * 20), 20.0)  # 20 words: not longer than 20
        assert adapts(" ".join(["word"] * 21), 20.0)
        assert not adapts("한" * 40, 20.0) and adapts("한" * 42, 20.0)  # CJK characters count half


class TestEmbedderWithAdapter:
    def test_scores_follow_the_mapped_query(self, tmp_path: Path) -> None:
        plain = FakeEmbedder(dim=4, vector_store=None)
        texts = ["alpha", "beta", "gamma"]
        vectors = plain.embed(["q", *texts])
        # a map that sends every query to the second text's vector direction: that text must score highest
        target = vectors[2].astype(np.float64)
        q = vectors[0].astype(np.float64)
        full = np.outer(target, q) / float(q @ q)
        path = _write(tmp_path / "to_beta.npz", full - np.eye(4))
        adapted = FakeEmbedder(dim=4, vector_store=None, query_adapter=path)
        scores = adapted.score("q", texts)
        assert scores[1] == pytest.approx(1.0, abs=1e-5)
        assert max(range(3), key=lambda i: scores[i]) == 1
        # passages are untouched: the same vectors, so the plain scorer's scores are the unmapped cosines
        assert plain.score("q", texts) == pytest.approx([float(v @ vectors[0]) for v in vectors[1:]], abs=1e-6)

    def test_a_gated_adapter_leaves_short_queries_alone(self, tmp_path: Path) -> None:
        plain = FakeEmbedder(dim=4, vector_store=None)
        texts = ["alpha", "beta", "gamma"]
        path = _write(tmp_path / "stretch.npz", np.diag([3.0, 0.0, 0.0, 0.0]))
        gated = FakeEmbedder(dim=4, vector_store=None, query_adapter=path, query_adapter_min_length=3.0)
        always = FakeEmbedder(dim=4, vector_store=None, query_adapter=path)
        short, long = "two words", "a query of five words"
        assert gated.score(short, texts) == plain.score(short, texts)
        assert gated.score(long, texts) == always.score(long, texts) != plain.score(long, texts)
        with pytest.raises(ConfigError, match="query_adapter_min_length"):
            FakeEmbedder(dim=4, query_adapter_min_length=-1.0)

    def test_invalid_value(self) -> None:
        with pytest.raises(ConfigError, match="query_adapter"):
            FakeEmbedder(dim=4, query_adapter=3)  # type: ignore[arg-type]


@pytest.mark.model
class TestWithMiniLM:
    def test_balanced_qa_trims_and_names_its_adapter(self) -> None:
        from ragtrim import trim
        from ragtrim.scoring.auto import balanced_scorer, choose

        if choose().scorer != "balanced":
            pytest.skip(f"scorer='auto' is {choose().scorer!r} here ({choose().reason})")
        chunks = ["This Agreement shall be governed by the laws of the State of New York.",
                  "The Supplier shall deliver the goods within thirty days of each order.",
                  "Either party may terminate this Agreement on ninety days' written notice."]
        query = ('Highlight the parts (if any) of this contract related to "Governing Law" that should be reviewed '
                 'by a lawyer. Details: Which state/country\'s law governs the interpretation of the contract?')
        first = trim(chunks, query=query, budget=20, scorer="balanced-qa")
        again = trim(chunks, query=query, budget=20, scorer="balanced-qa")
        assert first.text == again.text
        assert "New York" in first.text
        # the map moves the scores (against MiniLM's plain query vector: the default maps a query this long too)
        adapted = get_scorer("balanced-qa").score(query, chunks)
        plain = balanced_scorer(query_adapter=None).score(query, chunks)
        assert adapted != plain
        assert get_scorer("balanced").score(query, chunks) == adapted  # a query of more than 20 words
        assert max(range(3), key=lambda i: adapted[i]) == 0



def test_retention_mode_has_no_calibration_for_balanced_qa() -> None:
    from ragtrim import trim

    with pytest.raises(ConfigError, match="no retention calibration for scorer 'balanced-qa'"):
        trim(["a b c", "d e f"], query="a", keep=0.9, scorer="balanced-qa")
