"""The peers plot draws every run the matrix writes, a run without timed requests (``--timed 0``) included."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the plot needs matplotlib (the benchmarks' dependencies)")

from ragtrim_bench.peers.plot import plot_peers


def result(cold_p50_ms: float | None) -> dict[str, object]:
    records = [{"split": "heldout", "column": "kv", "row": row, "ratio": ratio, "answer_recall": 1.0, "n": 1}
               for row in ("default", "langchain") for ratio in (4, 8, 16)]
    cost = [{"row": row, "cold_p50_ms": cold_p50_ms} for row in ("default", "langchain")]
    return {"records": records, "comparisons": [], "cost_by_row": cost, "date": "2026-12-03"}


@pytest.mark.parametrize("cold_p50_ms", [None, 0.0, 12.5])
def test_the_plot_is_written_with_or_without_cost(tmp_path: Path, cold_p50_ms: float | None) -> None:
    out = plot_peers(result(cold_p50_ms), tmp_path / "peers.png")
    assert out.stat().st_size > 1000
