"""The history-rules benchmark: its scoring of one annotated conversation, before and after the CJK rules."""

from __future__ import annotations

from ragtrim_bench.history.script_texts import DEV, HELDOUT
from ragtrim_bench.history.scripts import english_rules_only, score, summarize


def test_every_conversation_is_annotated_within_its_turns() -> None:
    for conv in DEV + HELDOUT:
        n = len(conv.turns)
        assert all(1 <= e.turn <= n and e.phrase in conv.turns[e.turn - 1][1] for e in conv.expect), conv.name
        assert all(1 <= t <= n for t in conv.silent) and not {e.turn for e in conv.expect} & set(conv.silent)


def test_score_of_the_korean_trip() -> None:
    trip = DEV[0]
    after = score(trip)
    assert (after["kind_hits"], after["expected"], after["silent_turn_items"]) == (5, 5, 0)
    assert after["empty_turns_noted"]
    with english_rules_only():
        before = score(trip)
    assert (before["kind_hits"], before["items"], before["empty_turns"]) == (0, 0, 12)
    assert summarize({"a": after, "b": before})["kind_recall"] == 0.5
