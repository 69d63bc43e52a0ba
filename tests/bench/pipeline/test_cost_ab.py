from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ragtrim.errors import ConfigError
from ragtrim_bench.pipeline.cost_ab import CostAbConfig, compare, export_ref, run, side_summary

REPO = Path(__file__).resolve().parents[3]


def _round(ids: list[str], bm25: list[float]) -> dict[str, object]:
    return {"requests": ids, "wall_ms": {"bm25": bm25}, "cpu_ms": {"bm25": [x - 0.5 for x in bm25]}}


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="ref must name"):
        CostAbConfig(ref=" ")
    with pytest.raises(ConfigError, match="limit and rounds"):
        CostAbConfig(ref="HEAD", rounds=0)
    with pytest.raises(ConfigError, match="unknown columns"):
        CostAbConfig(ref="HEAD", columns=("nope",))


def test_a_request_counts_by_its_fastest_round() -> None:
    rounds = [_round(["a", "b", "c"], [10.0, 3.0, 8.0]), _round(["a", "b", "c"], [4.0, 9.0, 8.0])]
    s = side_summary(rounds, "bm25")
    assert s["n"] == 3 and s["p50_of_best_ms"] == 4.0 and s["mean_of_best_ms"] == 5.0
    assert s["p50_of_best_cpu_ms"] == 3.5 and s["round_p50_ms"] == [8.0, 8.0]


def test_ratios_are_checkout_over_ref_and_the_requests_must_match() -> None:
    out = compare({"checkout": [_round(["a", "b"], [2.0, 4.0])], "ref": [_round(["a", "b"], [4.0, 8.0])]}, ["bm25"])
    assert out["bm25"]["ratio_mean"] == pytest.approx(0.5) and out["bm25"]["ratio_p50"] == pytest.approx(0.5)
    with pytest.raises(RuntimeError, match="different requests"):
        compare({"checkout": [_round(["a"], [1.0])], "ref": [_round(["b"], [1.0])]}, ["bm25"])


def _in_git() -> bool:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _in_git(), reason="needs the repository's git history (a clone, not an exported tree)")
def test_exports_the_revisions_package(tmp_path: Path) -> None:
    commit = export_ref("HEAD", REPO, tmp_path)
    assert len(commit) == 40 and (tmp_path / "ragtrim" / "pipeline.py").is_file()
    with pytest.raises(ConfigError, match="not a revision"):
        export_ref("no-such-revision-anywhere", REPO, tmp_path / "x")


@pytest.mark.skipif(not _in_git(), reason="needs the repository's git history (a clone, not an exported tree)")
def test_both_sides_run_in_their_own_process_on_the_same_requests(shared_data: Path) -> None:
    result = run(CostAbConfig(ref="HEAD", scorers=("bm25",), columns=("nq-title",), limit=2, rounds=1),
                 progress=False)
    body = result["by_scorer"]["bm25"]
    assert body["checkout"]["n"] == body["ref"]["n"] == 2
    assert len(body["checkout"]["round_p50_ms"]) == 1 and body["ratio_p50"] > 0
    assert len(result["config"]["ref_commit"]) == 40


def test_a_ref_root_must_hold_a_ragtrim_package(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no ragtrim package"):
        run(CostAbConfig(ref="label", scorers=("bm25",), columns=("nq-title",), limit=1, rounds=1), progress=False,
            ref_root=tmp_path)
