"""The shared budget cut every peer goes through, the unavailable peers, and row lookup."""

from __future__ import annotations

import pytest

from ragtrim import WhitespaceCounter
from ragtrim.errors import ConfigError
from ragtrim_bench.peers.rows import (
    DEFAULT_ROWS,
    UNAVAILABLE,
    PeerOutput,
    PeerRow,
    available_rows,
    cut_to_budget,
    ragtrim_rows,
    resolve_rows,
)

COUNTER = WhitespaceCounter()
PIECES = ("alpha beta gamma delta.", "one two three. four five six.", "red green blue.")


class TestCutToBudget:
    def test_under_the_budget_nothing_is_cut(self) -> None:
        out = cut_to_budget(PIECES, 100, COUNTER)
        assert out == PeerOutput("\n\n".join(PIECES), 13, cut=False)

    def test_exactly_the_budget_is_not_a_cut(self) -> None:
        assert cut_to_budget(PIECES, 13, COUNTER).cut is False

    def test_over_the_budget_in_output_order_without_scores(self) -> None:
        out = cut_to_budget(PIECES, 9, COUNTER)
        # the second piece does not fit, and a piece cut to the 5 tokens left would be shorter than TokenBudget keeps
        assert out == PeerOutput("alpha beta gamma delta.\n\nred green blue.", 13, cut=True)

    def test_over_the_budget_by_score_keeps_the_output_order(self) -> None:
        out = cut_to_budget(PIECES, 9, COUNTER, scores=[0.1, 0.5, 0.9])
        assert out == PeerOutput("one two three. four five six.\n\nred green blue.", 13, cut=True)

    def test_blank_pieces_are_dropped(self) -> None:
        out = cut_to_budget(["", "  ", "alpha beta", "\n"], 10, COUNTER)
        assert out == PeerOutput("alpha beta", 2)

    def test_empty_input(self) -> None:
        assert cut_to_budget([], 5, COUNTER) == PeerOutput("", 0)

    def test_zero_budget_sends_nothing(self) -> None:
        out = cut_to_budget(PIECES, 0, COUNTER)
        assert out.text == "" and out.cut and out.produced_tokens == 13

    def test_negative_budget(self) -> None:
        with pytest.raises(ConfigError, match="budget must be >= 0, got -1"):
            cut_to_budget(PIECES, -1, COUNTER)

    def test_scores_must_match_the_pieces(self) -> None:
        with pytest.raises(ConfigError, match="2 scores for 3 pieces"):
            cut_to_budget(PIECES, 5, COUNTER, scores=[1.0, 2.0])

    def test_input_is_not_mutated(self) -> None:
        pieces = list(PIECES)
        cut_to_budget(pieces, 3, COUNTER, scores=[3.0, 2.0, 1.0])
        assert pieces == list(PIECES)


class TestRows:
    def test_unavailable_peers_say_why(self) -> None:
        assert [u.name for u in UNAVAILABLE] == ["llmlingua-2", "provence"]
        assert all(u.reason.startswith("cannot run offline") for u in UNAVAILABLE)

    def test_default_rows_are_all_available(self) -> None:
        assert list(available_rows()) == list(DEFAULT_ROWS)

    def test_unknown_row(self) -> None:
        with pytest.raises(ConfigError, match=r"unknown rows \['nope'\]; choose from \['default'"):
            resolve_rows(["default", "nope"])

    def test_duplicate_rows(self) -> None:
        with pytest.raises(ConfigError, match="unique"):
            resolve_rows(["default", "default"])

    def test_a_row_that_fails_to_build_is_reported(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim_bench.peers import rows as rows_module

        def broken() -> PeerRow:
            raise ImportError("no module named llmlingua")

        table = {"default": available_rows()["default"], "longllmlingua": broken}
        monkeypatch.setattr(rows_module, "available_rows", lambda: table)
        built, failed = resolve_rows(["default", "longllmlingua"])
        assert [r.name for r in built] == ["default"]
        assert failed == [{"row": "longllmlingua", "error": "ImportError: no module named llmlingua"}]

    def test_plain_bm25_never_overshoots(self) -> None:
        row = ragtrim_rows()["plain-bm25"]
        passages = ("the rollback window closes at 18:00 UTC on Friday", "lunch is at noon in the hall")
        out = row.trim(passages, "when does the rollback window close", 14)
        assert out.text == passages[0] and out.produced_tokens <= 14 and not out.cut
