"""The retention calibration's margin: cross-validated by document on dev, the smallest that holds every column."""

from __future__ import annotations

from ragtrim_bench.relevance.retention import FOLDS, Ranked, choose_z, cross_validate


def _requests(column: str, script: str, ranks: list[int | None], group: str = "") -> list[Ranked]:
    return [Ranked(column, f"{column}-{i}", (script, "short", "d0"), rank, 20, f"{group}{i % 7}" if group else "")
            for i, rank in enumerate(ranks)]


def test_cross_validation_keeps_the_answers_a_margin_protects() -> None:
    # an easy column (gold first) and a hard one (gold 2nd-5th) share one cell: pooled, the cell promises too much
    # for the hard one, and a margin makes the stage keep more of its chunks
    easy = _requests("easy", "other", [1] * 300)
    hard = _requests("hard", "other", [1, 2, 3, 4, 5] * 20, group="report")
    cv0 = cross_validate(easy + hard, [0.9], 0.0)
    cv3 = cross_validate(easy + hard, [0.9], 3.0)
    assert cv0["other"]["easy"]["0.9"] == 1.0 and cv0["other"]["easy"]["n"] == 300
    assert cv0["other"]["hard"] == {"n": 100, "0.9": 0.66}  # the pooled cell: first chunk only
    assert cv3["other"]["hard"] == {"n": 100, "0.9": 0.86}  # the margin keeps more chunks
    assert choose_z({0.0: cv0, 3.0: cv3}, [0.9], "other") == 3.0  # neither holds 0.89: the largest tried


def test_choose_z_takes_the_smallest_that_holds_and_ignores_small_columns() -> None:
    cv = {0.0: {"cjk": {"a": {"n": 100, "0.9": 0.95}, "tiny": {"n": 5, "0.9": 0.2}},
                "other": {"b": {"n": 100, "0.9": 0.80}}},
          1.0: {"cjk": {"a": {"n": 100, "0.9": 0.97}, "tiny": {"n": 5, "0.9": 0.2}},
                "other": {"b": {"n": 100, "0.9": 0.89}}},
          2.0: {"cjk": {"a": {"n": 100, "0.9": 0.99}, "tiny": {"n": 5, "0.9": 0.2}},
                "other": {"b": {"n": 100, "0.9": 0.93}}}}
    assert choose_z(cv, [0.9], "cjk") == 0.0  # "tiny" has too few requests to judge
    assert choose_z(cv, [0.9], "other") == 1.0  # 0.89 >= 0.9 - 0.01
    cv[2.0]["other"]["b"]["0.9"] = 0.5
    cv[1.0]["other"]["b"]["0.9"] = 0.5
    assert choose_z(cv, [0.9], "other") == 2.0  # none holds: the largest tried


def test_folds_split_by_document() -> None:
    from ragtrim_bench.relevance.retention import _fold

    same_report = [Ranked("tatqa", f"q{i}", ("other", "short", "d0"), 1, 20, "report-7") for i in range(20)]
    assert len({_fold(r) for r in same_report}) == 1
    assert len({_fold(r) for r in _requests("nq", "other", [1] * 200)}) == FOLDS
