"""The batch invariance benchmark's parts: counting texts whose vector moved, the invariance measure on a fake model
whose vectors move with their batch, and where ``main`` writes its result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragtrim.testing import FakeEmbedder
from ragtrim_bench.relevance import batch_invariance as bench


def test_distinct_vectors() -> None:
    runs = [{"a": b"1", "b": b"2"}, {"a": b"1", "b": b"3"}, {"a": b"1"}]
    assert bench.distinct_vectors(runs) == {"a": 1, "b": 2}
    assert bench.distinct_vectors([]) == {}


def _fake(batch_dependent: bool) -> bench.Backend:
    """A backend over ``FakeEmbedder``: ``padded`` is one call for the whole batch, ``single`` one call per text."""

    def build(grouping: str, threads: int) -> bench.EmbedFn:
        model = FakeEmbedder(batch_dependent=batch_dependent, cache_size=0, vector_store=None)

        def embed(texts: Sequence[str]) -> np.ndarray:
            if grouping == "single":
                return np.vstack([model._encode([t]) for t in texts])
            return model._encode(texts)

        return embed

    return bench.Backend("fake", ("padded", "single"), build)


@pytest.mark.parametrize("batch_dependent", [True, False])
def test_measure_finds_the_texts_whose_vector_moves(batch_dependent: bool) -> None:
    requests = [[f"question {r}", *(f"passage {r}-{i}" for i in range(20))] for r in range(3)]
    row = bench.measure(_fake(batch_dependent), requests, bench.Config(requests=3, targets=10, trials=3))
    assert row["targets"] == 10 and row["batches_per_target"] == 3
    assert row["single_texts_batch_dependent"] == 0 and row["single_texts_thread_dependent"] == 0
    assert row["padded_texts_batch_dependent"] == (10 if batch_dependent else 0)
    assert row["padded_p50_ms"] >= 0 and row["single_p99_ms"] >= 0


def test_main_writes_through_the_common_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGTRIM_BENCH_RESULTS", str(tmp_path))
    requests = [[f"question {r}", *(f"passage {r}-{i}" for i in range(20))] for r in range(2)]
    monkeypatch.setattr(bench, "_requests", lambda config: requests)
    monkeypatch.setattr(bench, "BACKENDS", (_fake(True),))
    assert bench.main(["--backends", "fake", "--targets", "4", "--trials", "2", "--no-pipeline"]) == 0
    written: dict[str, Any] = json.loads((tmp_path / "relevance" / "batch_invariance.json").read_text())
    assert written["command"] == ("ragtrim-bench relevance batch_invariance --backends fake --targets 4 --trials 2 "
                                  "--no-pipeline")
    assert [r["backend"] for r in written["rows"]] == ["fake"] and written["pipeline"] is None
    assert written["rows"][0]["padded_texts_batch_dependent"] == 4 and "host" in written
