"""The quality matrix's measurement: budgets, recall scoring, cold timing, aggregation, rows, and small end-to-end
runs (fixture requests with rows that load no model; the shared data where present)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragtrim import WhitespaceCounter
from ragtrim.errors import ConfigError
from ragtrim_bench.datasets import data_dir
from ragtrim_bench.relevance import matrix
from ragtrim_bench.relevance.columns import Request
from ragtrim_bench.relevance.matrix import (
    MatrixConfig,
    Outcome,
    aggregate,
    answer_kept,
    budget_for,
    compare,
    cost_by_row,
    measure,
    parse_args,
    run_matrix,
    trim_input,
    write_result,
)
from ragtrim_bench.relevance.report import gap_table, recall_table, report_text
from ragtrim_bench.relevance.rows import DEFAULT_ROWS, Row, register_row, resolve_rows

COUNTER = WhitespaceCounter()


FILLER = tuple(f"note {k}: the {w} team meets in room {k} every week to plan the quarter" for k, w in
               enumerate(("red", "blue", "green", "grey", "gold", "teal")))


def _request(column: str = "c", rid: str = "r0", scores: tuple[float, ...] | None = None,
             filler: bool = False) -> Request:
    passages = ("the weather is sunny today", "the rollback window closes at 18:00 UTC on Friday",
                "lunch is served in the main hall at noon", "parking is free on weekends for staff")
    if filler:
        passages += FILLER
        scores = scores and scores + (0.0,) * len(FILLER)
    return Request(column=column, split="dev", id=rid, question="when does the rollback window close",
                   answers=("18:00 UTC on Friday",), passages=passages, gold_index=1, retrieval_scores=scores)


def _first(chunks: Sequence[Mapping[str, Any]], query: str, budget: int) -> str:
    return str(chunks[0]["text"])


FIRST = Row("first", _first, "the first passage, whatever the budget")
EXTRA_ROW = Row("extra", _first, "a row named module:attribute in --rows")


class TestBudgetAndRecall:
    def test_budget_is_floor_division(self) -> None:
        assert [budget_for(2206, r) for r in (4, 8, 16)] == [551, 275, 137]
        assert budget_for(3, 4) == 0
        with pytest.raises(ConfigError, match="ratio"):
            budget_for(100, 0)

    def test_context_tokens_count_the_joined_text(self) -> None:
        req = _request()
        assert matrix.context_tokens(req, COUNTER) == sum(len(p.split()) for p in req.passages)

    def test_answer_kept_normalizes_and_is_a_substring_test(self) -> None:
        assert answer_kept(["The Eiffel Tower"], "They built the eiffel tower, in 1889.")
        assert answer_kept(["미국 육군 부참모 총장"], "그는 미국 육군 부참모 총장이었다.")  # a particle follows
        assert answer_kept(["1"], "in 1990")  # a substring, as "Lost in the Middle" counts it
        assert not answer_kept(["Paris"], "the capital is Lyon")
        assert not answer_kept(["The"], "the whole text")  # an answer that normalizes to nothing never matches

    def test_trim_input_gives_scores_only_when_asked(self) -> None:
        req = _request(scores=(1.0, 4.0, 2.0, 3.0))
        assert [c.get("score") for c in trim_input(req, with_scores=True)] == [1.0, 4.0, 2.0, 3.0]
        assert all("score" not in c for c in trim_input(req, with_scores=False))
        assert all("score" not in c for c in trim_input(_request(), with_scores=True))


class TestMeasure:
    def test_timed_call_is_cold_and_first(self) -> None:
        calls: list[str] = []

        def row_trim(chunks: Sequence[Mapping[str, Any]], query: str, budget: int) -> str:
            calls.append(f"trim {budget}")
            return "18:00 UTC on Friday" if budget > 5 else "nothing"

        out = measure(Row("r", row_trim), _request(), (4, 8, 16), COUNTER, lambda: calls.append("clear"))
        # 30 tokens: budgets 7, 3, 1; the 4x call right after the one clear
        assert calls == ["clear", "trim 7", "trim 3", "trim 1"]
        assert out.budgets == (7, 3, 1) and out.kept == (True, False, False)
        assert out.tokens_after == (4, 1, 1) and out.violations == 0
        assert out.cold_ms is not None and out.cold_ms >= 0 and out.cold_cpu_s is not None

    def test_a_rows_own_caches_are_cleared_before_the_timed_call(self) -> None:
        calls: list[str] = []

        def row_trim(chunks: Sequence[Mapping[str, Any]], query: str, budget: int) -> str:
            calls.append("trim")
            return ""

        row = Row("own", row_trim, clear=lambda: calls.append("own clear"))
        measure(row, _request(), (4, 8), COUNTER, lambda: calls.append("clear"))
        measure(row, _request(), (4,), COUNTER, None)
        assert calls == ["clear", "own clear", "trim", "trim", "trim"]

    def test_scorer_clearer_reaches_the_parts(self) -> None:
        from ragtrim.scoring.hybrid import HybridScorer
        from ragtrim_bench.relevance.rows import scorer_clearer

        class Cached:
            name = "cached"

            def __init__(self) -> None:
                self.cleared = 0

            def score(self, query: str, texts: Sequence[str]) -> list[float]:
                return [0.0] * len(texts)

            def clear_cache(self) -> None:
                self.cleared += 1

        a, b = Cached(), Cached()
        scorer_clearer(HybridScorer(scorers=(a, b)), a)()
        assert (a.cleared, b.cleared) == (2, 1)

    def test_untimed_without_clear(self) -> None:
        out = measure(FIRST, _request(), (4, 8), COUNTER, None)
        assert out.cold_ms is None and out.kept == (False, False) and out.error is None

    def test_budget_violations_are_counted(self) -> None:
        out = measure(FIRST, _request(), (4, 8, 16), COUNTER, lambda: None)
        assert out.tokens_after == (5, 5, 5) and out.violations == 2  # budgets 7, 3, 1

    def test_errors_are_recorded_not_raised(self) -> None:
        def boom(chunks: Sequence[Mapping[str, Any]], query: str, budget: int) -> str:
            raise ValueError("bad input")

        out = measure(Row("boom", boom), _request(), (4,), COUNTER, lambda: None)
        assert out.error == "ValueError: bad input" and out.kept == ()


class TestAggregate:
    def _outcomes(self) -> list[Outcome]:
        return [Outcome("r", "c", "dev", "a", (10, 5), (True, True), (9, 5), 10.0, 0.01),
                Outcome("r", "c", "dev", "b", (10, 5), (True, False), (10, 6), 30.0, 0.03),
                Outcome("r", "c", "dev", "c", (10, 5), (False, False), (3, 2), None, None),
                Outcome("r", "c", "dev", "d", (10, 5), error="ValueError: x")]

    def test_recall_bits_errors_and_violations(self) -> None:
        four, eight = aggregate(self._outcomes(), (4, 8))
        assert four["answer_recall"] == 0.5 and four["kept_bits"] == "1100" and four["n_errors"] == 1
        assert eight["answer_recall"] == 0.25 and eight["kept_bits"] == "1000"
        assert eight["budget_violations"] == 1 and four["budget_violations"] == 0
        assert four["answer_recall_ci95_low"] < 0.5 < four["answer_recall_ci95_high"]
        assert four["first_error"] == "ValueError: x"

    def test_cost_only_at_the_timed_ratio(self) -> None:
        four, eight = aggregate(self._outcomes(), (4, 8))
        assert four["n_timed"] == 2 and four["cold_p50_ms"] == 20.0 and four["cold_mean_cpu_s"] == 0.02
        assert eight["cold_p50_ms"] is None and eight["n_timed"] is None
        assert set(four) == set(eight)  # flat: the same keys in every record

    def test_cost_by_row_against_the_references(self) -> None:
        outs = [Outcome("bm25", "c", "dev", "a", (1,), cold_ms=2.0), Outcome("plain-bm25", "c", "dev", "a", (1,),
                                                                             cold_ms=4.0),
                Outcome("x", "c", "dev", "a", (1,), cold_ms=20.0), Outcome("x", "k", "dev", "b", (1,), cold_ms=40.0)]
        x = next(r for r in cost_by_row(outs) if r["row"] == "x")
        assert x["cold_p50_ms"] == 30.0 and x["cold_p50_vs_bm25"] == 15.0 and x["cold_p50_vs_plain_bm25"] == 7.5
        assert x["cold_p50_ms_by_column"] == {"c": 20.0, "k": 40.0}


class TestCompare:
    @staticmethod
    def _rec(row: str, bits: str, column: str = "c", ratio: int = 4) -> dict[str, Any]:
        return {"row": row, "column": column, "split": "dev", "ratio": ratio, "kept_bits": bits,
                "answer_recall": bits.count("1") / len(bits)}

    def test_paired_against_the_best_rival(self) -> None:
        records = [self._rec("default", "1110000000"), self._rec("bm25", "1111111100"),
                   self._rec("embedding", "0111111111"), self._rec("default", "11", column="k")]
        [c] = compare(records, "default", ("bm25", "embedding"))
        # embedding (0.9) beats bm25 (0.8); default keeps request 0 alone, embedding requests 3-9
        assert c["against"] == "embedding" and c["recall_diff"] == pytest.approx(-0.6)
        assert (c["n_only_row"], c["n_only_against"]) == (1, 7) and c["mcnemar_p"] == pytest.approx(0.0703125)
        assert compare(records, "nope", ("bm25",)) == [] and compare(records, "default", ("default",)) == []

    def test_gap_table(self) -> None:
        records = [self._rec("default", "1100"), self._rec("bm25", "1110"), self._rec("plain-bm25", "1000")]
        result = {"comparisons": matrix.comparisons(records)}
        assert gap_table(result, "dev") == ("| column | 4x: vs best named scorer; vs plain-bm25 |\n| --- | --- |\n"
                                            "| c | -0.250 (bm25, p 1.00); +0.250 (p 1.00) |")
        assert gap_table(result, "heldout") == ""


class TestRows:
    def test_builtin_rows(self) -> None:
        from ragtrim.scoring.registry import SCORER_NAMES

        assert DEFAULT_ROWS == ("default", *SCORER_NAMES, "given", "plain-bm25")
        assert [r.name for r in resolve_rows(["given"]) if r.uses_retrieval_score] == ["given"]

    def test_register_and_module_attribute(self) -> None:
        register_row(Row("candidate-x", _first))
        names = ["candidate-x", "tests.bench.relevance.test_matrix:EXTRA_ROW"]
        assert [r.name for r in resolve_rows(names)] == ["candidate-x", "extra"]

    def test_bad_names(self) -> None:
        with pytest.raises(ConfigError, match="unknown row"):
            resolve_rows(["nope"])
        with pytest.raises(ConfigError, match="not found"):
            resolve_rows(["tests.bench.relevance.test_matrix:NOPE"])
        with pytest.raises(ConfigError, match="unique"):
            resolve_rows(["bm25", "bm25"])
        with pytest.raises(ConfigError, match="Row"):
            register_row("bm25")  # type: ignore[arg-type]


class TestConfig:
    def test_args(self) -> None:
        c = parse_args(["--split", "dev", "--rows", "bm25,plain-bm25", "--columns", "kv", "--limit", "7"])
        assert c.splits == ("dev",) and c.rows == ("bm25", "plain-bm25") and c.columns == ("kv",) and c.limit == 7
        assert parse_args([]).splits == ("dev", "heldout") and parse_args([]).limit == 300

    @pytest.mark.parametrize("kw", [{"limit": 0}, {"timed": -1}, {"columns": ("nope",)}, {"splits": ("test",)},
                                    {"rows": ()}, {"ratios": (8, 16)}])
    def test_invalid(self, kw: dict[str, Any]) -> None:
        with pytest.raises(ConfigError):
            MatrixConfig(**kw)


class TestEndToEnd:
    """Real trim() with rows that load no model (bm25, given) and the baseline, on fixture requests."""

    def test_run_and_write(self, tmp_path: Path) -> None:
        requests = {("scored", "dev"): [_request("scored", f"s{i}", (0.1, 0.9, 0.2, 0.3), filler=True)
                                        for i in range(3)],
                    ("bare", "dev"): [_request("bare", f"b{i}", filler=True) for i in range(2)]}
        clears: list[int] = []
        config = MatrixConfig(splits=("dev",), rows=("bm25", "given", "plain-bm25"), columns=("kv",), limit=3,
                              timed=2, progress=False)
        result = run_matrix(config, requests=requests, clear=lambda: clears.append(1), command="test")
        recs = result["records"]
        assert {(r["row"], r["column"]) for r in recs} == {("bm25", "scored"), ("given", "scored"),
                                                            ("plain-bm25", "scored"), ("bm25", "bare"),
                                                            ("plain-bm25", "bare")}
        assert result["skipped"] == [{"row": "given", "column": "bare", "split": "dev",
                                      "reason": "the column has no retrieval score"}]
        assert result["budget_violations_total"] == 0 and result["errors_total"] == 0
        given4 = next(r for r in recs if r["row"] == "given" and r["ratio"] == 4)
        assert given4["answer_recall"] == 1.0 and given4["n"] == 3 and given4["n_timed"] == 2
        assert [r["row"] for r in recs if r["column"] == "scored" and r["ratio"] == 4] == ["bm25", "given",
                                                                                           "plain-bm25"]
        # clears: warm-up once per row and column (5), once after it, before each timed call (2 x 3 + 2 x 2)
        assert len(clears) == 5 + 1 + 6 + 4
        assert result["command"] == "test" and result["host"]["cores"] >= 1
        assert "| given |" in recall_table(recs, "dev") and "budget violations: 0" in report_text(result)
        json_path, png = write_result(result, tmp_path / "m" / "quality_matrix.json")
        assert json.loads(json_path.read_text())["records"][0]["row"] == "bm25"
        assert png is not None and png.stat().st_size > 10_000

    def test_report_from_a_written_json(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from ragtrim_bench.relevance import report

        rec = {"row": "bm25", "column": "c", "split": "dev", "ratio": 4, "n": 1, "answer_recall": 1.0}
        path = tmp_path / "qm.json"
        path.write_text(json.dumps({"records": [rec], "cost_by_row": [], "command": "x"}))
        assert report.main([str(path), "--plot"]) == 0
        assert "| bm25 | 1.000 |" in capsys.readouterr().out and path.with_suffix(".png").is_file()
        assert report.main([str(tmp_path / "absent.json")]) == 1


@pytest.mark.data
def test_main_on_shared_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not data_dir().is_dir():
        pytest.skip(f"shared data absent at {data_dir()}; set RAGTRIM_DATA")
    out = tmp_path / "qm.json"
    argv = ["--split", "heldout", "--limit", "2", "--timed", "1", "--rows", "bm25,given,plain-bm25",
            "--output", str(out), "--no-progress"]
    assert matrix.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["command"].endswith(" ".join(argv))
    assert {r["column"] for r in result["records"]} == {"nq-title", "nq-notitle", "squad-article", "korquad", "kv",
                                                         "tatqa", "cuad", "cmrc", "jsquad"}
    assert result["budget_violations_total"] == 0 and result["errors_total"] == 0
    assert out.with_suffix(".png").is_file() and "answer recall, heldout" in capsys.readouterr().out
