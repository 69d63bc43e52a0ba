"""RetentionFilter: the fewest best chunks that hold the answer with a calibrated probability, whole."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from ragtrim import Pipeline, RelevanceFilter, trim
from ragtrim.errors import ConfigError
from ragtrim.stages import retention
from ragtrim.stages.retention import (
    CALIBRATION_CHUNKS,
    MIN_CELL_REQUESTS,
    Cell,
    RetentionFilter,
    chunks_needed,
    features,
)
from ragtrim.testing import FixedScorer

PACKAGED = retention.calibration  # bound before the fixture below replaces it
SURE = [0.80, 0.90, 0.95, 0.99] + [0.995] * 16
UNSURE = [0.30, 0.40, 0.50, 0.60, 0.70, 0.75, 0.80, 0.84, 0.87, 0.90, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.985,
          0.99, 0.99, 0.99]
TABLE = {"tables": {"bm25": {"all": {"n": 500, "cdf": UNSURE}, "other": {"n": 300, "cdf": SURE},
                             "other/long": {"n": 60, "cdf": UNSURE}, "other/short/d3": {"n": 10, "cdf": UNSURE}},
                    "balanced": {"all": {"n": 500, "cdf": UNSURE}}}}


@pytest.fixture(autouse=True)
def _table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(retention, "calibration", lambda: TABLE)
    yield


def _chunks(n: int = 20) -> list[dict[str, Any]]:
    return [{"text": f"passage {i} " + "word " * 10, "id": f"c{i}"} for i in range(n)]


def _run(stage: RetentionFilter, query: str = "a short question", n: int = 20) -> Any:
    scores = {f"passage {i} " + "word " * 10: float(n - i) for i in range(n)}
    return Pipeline([RelevanceFilter(scorer=FixedScorer(scores=scores), top_k=None), stage],
                    tokenizer="whitespace").run(_chunks(n), query=query)


class TestRetentionFilter:
    def test_defaults_and_invalid(self) -> None:
        s = RetentionFilter()
        assert (s.keep, s.calibration, s.max_tokens) == (0.95, "balanced", None)
        for bad in (0.0, 1.0, 1.5, -0.1):
            with pytest.raises(ConfigError, match="keep"):
                RetentionFilter(keep=bad)
        with pytest.raises(ConfigError, match="no retention calibration for scorer 'embedding'"):
            RetentionFilter(calibration="embedding")

    def test_keeps_the_fewest_best_chunks_for_the_target(self) -> None:
        r = _run(RetentionFilter(keep=0.93, calibration="bm25"))
        assert [c.id for c in r.chunks] == ["c0", "c1", "c2"]  # "other": 0.95 at k = 3, 0.936 with its margin
        info = next(x.info for x in r.trace if x.stage == "retention")
        assert info["estimate"] == pytest.approx(0.9361, abs=1e-4) and info["cell"] == "other"
        assert info["unsure"] is False
        gone = [x for x in r.removals if x.stage == "retention"]
        assert len(gone) == 17 and all(x.reason == "low_relevance" for x in gone)
        assert "outside the 3 best chunks" in gone[0].detail and "0.936" in gone[0].detail

    def test_a_share_is_read_with_its_margin(self) -> None:
        """95 of 100 dev requests: the Wilson interval's lower end at one standard error is 0.9234; the margin
        shrinks as the cell grows, and a share of 0.95 at k = 3 no longer meets keep=0.95 there."""
        assert Cell("x", 99, (0.95,)).share(1) == pytest.approx(0.9234, abs=1e-4)
        assert Cell("x", 99, (0.95,)).share(1) < Cell("x", 9999, (0.95,)).share(1) < 0.95
        r = _run(RetentionFilter(keep=0.95, calibration="bm25"))
        assert [c.id for c in r.chunks] == ["c0", "c1", "c2", "c3"]

    def test_unsure_ranking_keeps_more_and_says_so(self) -> None:
        r = _run(RetentionFilter(keep=0.95, calibration="bm25"), query=" ".join(["word"] * 30))
        info = next(x.info for x in r.trace if x.stage == "retention")
        assert info["cell"] == "other/long" and info["chunks_kept"] == 16 and info["unsure"] is True
        assert "ranking unsure" in info["reason"]

    def test_a_small_cell_gives_way_to_its_parent(self) -> None:
        cell = retention.cell_for("bm25", "a short question", [9.0, 0.0, 0.0, 0.0])  # decisive: other/short/d3
        assert features("a short question", [9.0, 0.0, 0.0, 0.0]) == ("other", "short", "d3")
        assert cell.name == "other"  # other/short/d3 has 10 requests, under MIN_CELL_REQUESTS

    def test_a_cap_keeps_fewer_and_lowers_the_estimate(self) -> None:
        r = _run(RetentionFilter(keep=0.99, calibration="bm25", max_tokens=25))
        info = next(x.info for x in r.trace if x.stage == "retention")
        assert info["capped"] is True and info["chunks_kept"] == 2
        assert info["estimate"] == pytest.approx(0.8817, abs=1e-4)  # 0.90 at k = 2, with its margin

    def test_unreachable_target_keeps_everything(self) -> None:
        assert chunks_needed(Cell("x", 100, (0.5, 0.6)), 0.99, 20) == (20, 1.0)
        k, share = chunks_needed(Cell("x", 10000, (0.5, 0.96)), 0.95, 10)  # k scales with the chunks
        assert k == 1 and share == pytest.approx(0.958, abs=1e-3)
        assert chunks_needed(Cell("x", 100, (0.5, 0.96)), 0.95, 10) == (10, 1.0)  # 0.96 of 101 is not sure enough

    def test_nothing_ranked_keeps_everything(self) -> None:
        r = Pipeline([RetentionFilter(keep=0.9, calibration="bm25")], tokenizer="whitespace").run(
            _chunks(3), query="q")
        assert len(r.chunks) == 3 and r.removals == ()
        assert Pipeline([RetentionFilter(calibration="bm25")]).run([], query="q").chunks == ()

    def test_pinned_chunks_stay(self) -> None:
        chunks = _chunks(20)
        chunks[19]["pinned"] = True
        scores = {c["text"]: float(20 - i) for i, c in enumerate(chunks)}
        r = Pipeline([RelevanceFilter(scorer=FixedScorer(scores=scores), top_k=None),
                      RetentionFilter(keep=0.93, calibration="bm25")], tokenizer="whitespace").run(chunks, query="q")
        assert [c.id for c in r.chunks] == ["c0", "c1", "c2", "c19"]

    def test_round_trip(self) -> None:
        s = RetentionFilter(keep=0.9, calibration="bm25", max_tokens=100)
        assert RetentionFilter.from_dict(s.to_dict()).get_params() == s.get_params()


class TestTables:
    """A request whose chunks hold a table is its own kind of request, with its own cells and margin."""

    TABLE_CHUNK = "| | 2019 | 2018 |\n| Revenue | 1,200 | 1,100 |\n| Cost of sales | 700 | 650 |"

    def test_a_table_among_the_chunks_makes_the_kind(self) -> None:
        assert features("a short question", [9.0, 0.0], tables=True) == ("tables", "short", "d3")
        assert features("他司职什么位置", [9.0, 0.0], tables=True)[0] == "tables"  # whatever the query's script
        assert retention.cell_names(("tables", "short", "d3")) == ("tables/short/d3", "tables/short", "tables", "all")

    def test_the_stage_reads_the_tables_cell_with_its_margin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        table = {"tables": {"bm25": {**TABLE["tables"]["bm25"], "tables": {"n": 300, "cdf": UNSURE}}},
                 "share_z": {"other": 0.0, "tables": 1.0}}
        monkeypatch.setattr(retention, "calibration", lambda: table)
        chunks = _chunks(19) + [{"text": self.TABLE_CHUNK, "id": "t"}]
        scores = {c["text"]: float(20 - i) for i, c in enumerate(chunks)}
        pipe = Pipeline([RelevanceFilter(scorer=FixedScorer(scores=scores), top_k=None),
                         RetentionFilter(keep=0.9, calibration="bm25")], tokenizer="whitespace")
        info = next(x.info for x in pipe.run(chunks, query="a short question").trace if x.stage == "retention")
        assert info["cell"] == "tables" and info["chunks_kept"] == 11  # UNSURE: 0.92 at k = 11, 0.904 with margin 1
        info = next(x.info for x in pipe.run(chunks[:19], query="a short question").trace if x.stage == "retention")
        assert info["cell"] == "other" and info["chunks_kept"] == 2  # SURE, no margin: 0.90 at k = 2

    def test_a_file_without_a_tables_margin_gives_them_others(self) -> None:
        assert retention.share_z({"share_z": {"cjk": 0.0, "other": 2.5}}, "tables") == 2.5


def test_the_margin_is_read_per_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's ``share_z`` gives each kind its margin; ``SHARE_Z`` where it names none."""
    assert retention.share_z({"share_z": {"cjk": 0.0, "other": 2.5}}, "cjk") == 0.0
    assert retention.share_z({"share_z": {"cjk": 0.0, "other": 2.5}}, "other") == 2.5
    assert retention.share_z({"share_z": 1.5}, "cjk") == 1.5
    assert retention.share_z({}, "other") == retention.SHARE_Z
    assert Cell("x", 99, (0.95,), z=0.0).share(1) == 0.95  # no margin: the share itself
    monkeypatch.setattr(retention, "calibration", lambda: {**TABLE, "share_z": {"other": 0.0}})
    r = _run(RetentionFilter(keep=0.95, calibration="bm25"))
    assert [c.id for c in r.chunks] == ["c0", "c1", "c2"]  # 0.95 at k = 3 with no margin


def test_the_packaged_calibration_is_whole() -> None:
    """Every calibrated scorer has its fallback cell, every cell a non-decreasing share per k of 20 chunks, and the
    default scorer is among them (trim(keep=...) with the default scorer must find its table)."""
    from ragtrim.api import resolve_scorer

    tables = PACKAGED()["tables"]
    assert resolve_scorer("auto") in tables and "bm25" in tables
    assert set(PACKAGED()["share_z"]) == {"tables", "cjk", "other"}
    for scorer, table in tables.items():
        assert table["all"]["n"] >= MIN_CELL_REQUESTS, scorer
        for name, cell in table.items():
            cdf = cell["cdf"]
            assert len(cdf) == CALIBRATION_CHUNKS and all(0 <= a <= b <= 1 for a, b in itertools.pairwise(cdf)), name


class TestTrimKeep:
    def test_trim_keep_uses_the_scorer_calibration(self) -> None:
        chunks = ["Paris is the capital of France.", "Berlin is in Germany.", "Rome is in Italy."]
        r = trim(chunks, query="What is the capital of France?", keep=0.5, scorer="bm25")
        assert r.text == "Paris is the capital of France."  # "other" (sure): 0.80 at k = 1 of 20, and 1 of 3
        with pytest.raises(ConfigError, match="calibration"):
            trim(chunks, query="q", keep=0.9, scorer="embedding")
        with pytest.raises(ConfigError, match="keep"):
            trim(chunks, query="q", keep=2.0, scorer="bm25")

    def test_keep_with_a_budget_caps(self) -> None:
        chunks = [f"Fact {i} about the harbour and its boats." for i in range(20)]
        r = trim(chunks, query="harbour boats fact 3", keep=0.99, budget=30, scorer="bm25")
        assert r.tokens_after <= 30
        info = next(x.info for x in r.trace if x.stage == "retention")
        assert info["capped"] is True
