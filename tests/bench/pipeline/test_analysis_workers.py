from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrim.caches import clear_caches
from ragtrim.errors import ConfigError
from ragtrim_bench.pipeline import analysis_workers as aw

PASSAGES = ("Eiffel Tower\nThe tower opened in 1889 for the fair. It is in Paris.",
            "Other tower\nA different tower opened much later, in 1930. Nobody visits.",
            "Unrelated\nNothing here about towers or years. Just words.")


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="workers must be counts"):
        aw.AnalysisWorkersConfig(workers=(0,))
    with pytest.raises(ConfigError, match="unknown columns"):
        aw.AnalysisWorkersConfig(columns=("nope",))


def test_shares_keep_every_text_in_order() -> None:
    texts = ["a" * 10, "b" * 30, "c" * 10, "d" * 50]
    parts = aw.shares(texts, 3)
    assert len(parts) == 3 and [t for share in parts for t in share] == texts
    assert aw.shares([], 2) == [[], []]


def held() -> dict[str, dict[object, object]]:
    return {name: {k: v[0] for k, v in cache._data.items()} for name, cache in aw._caches().items()}


def test_a_workers_entries_spare_the_caller_the_analysis() -> None:
    """What a worker sends back is what the caller's own analysis would have put in its caches."""
    clear_caches()
    aw.analyse("when did the tower open", PASSAGES)
    own = held()
    entries, seconds = aw.worker_job("when did the tower open", PASSAGES)  # run here: a worker runs the same
    assert seconds > 0
    clear_caches()
    aw.merge(entries)
    merged = held()
    assert merged == own
    assert merged["sentence spans"] and merged["bm25 tokens"] and merged["counts"]


def test_handed_over_trims_give_the_same_output() -> None:
    pool = aw._start(1)
    try:
        wall0, parts0, digest0 = aw.measure(None, 0, "bm25", "when did the tower open", PASSAGES, 30)
        wall1, parts1, digest1 = aw.measure(pool, 1, "bm25", "when did the tower open", PASSAGES, 30)
    finally:
        pool.shutdown()
    assert digest1 == digest0
    assert set(parts0) == {"run"} and set(parts1) == set(aw.PARTS)
    assert wall1 >= parts1["run"] and wall0 >= parts0["run"]


@pytest.mark.data
def test_main_on_shared_data(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "aw.json"
    assert aw.main(["--workers", "1", "--limit", "2", "--rounds", "1", "--columns", "nq-title", "--no-progress",
                    "-o", str(out)]) == 0
    body = json.loads(out.read_text())
    assert set(body["by_arm"]) == {"0", "1"}
    assert body["by_arm"]["1"]["outputs_differing"] == 0
    assert body["by_arm"]["0"]["ratio_p50_to_in_process"] == 1.0
    assert "analysis_workers" in body["command"]
