from __future__ import annotations

from typing import Any

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim.history.fold import compress_history
from ragtrim.history.state import HistoryState
from ragtrim.models import TrimContext
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import stage_from_dict
from ragtrim.stages.history import HistoryCompressor
from ragtrim.testing import ScriptedSummarizer
from ragtrim.text.tokens import WhitespaceCounter

HISTORY = [
    {"role": "user", "content": "Hello!", "turn_id": "1"},
    {"role": "user", "content": "I prefer window seats on trains.", "turn_id": "2"},
    {"role": "assistant", "content": "Great, noted.", "turn_id": "3"},
    {"role": "user", "content": "We decided to leave Berlin on Friday at 9.", "turn_id": "4"},
    {"role": "assistant", "content": "I will book it.", "turn_id": "5"},
]


def run(stage: HistoryCompressor, chunks: list[Any], history: list[Any] | None = None, state: Any = None) -> Any:
    return Pipeline([stage], tokenizer="whitespace").run(chunks, query="q", history=history, state=state)


class TestHistoryCompressor:
    def test_defaults(self) -> None:
        s = HistoryCompressor()
        assert s.get_params() == {"keep_last_turns": 4, "keep_last_tokens": None, "max_tokens": None,
                                  "summarizer": None, "recency_weight": 1.0}
        assert s.to_dict() == {"type": "history", "keep_last_turns": 4, "keep_last_tokens": None, "max_tokens": None,
                               "summarizer": None, "recency_weight": 1.0}

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [({"keep_last_turns": -1}, "keep_last_turns must be >= 0"),
         ({"keep_last_tokens": "5"}, "keep_last_tokens must be an int"),
         ({"max_tokens": -3}, "max_tokens must be >= 0"),
         ({"recency_weight": float("nan")}, "recency_weight must be a number"),
         ({"summarizer": "gpt"}, "summarizer must have an extract")],
    )
    def test_invalid(self, kwargs: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            HistoryCompressor(**kwargs)

    def test_registry_round_trip(self) -> None:
        s = stage_from_dict({"type": "history", "keep_last_turns": 2, "max_tokens": 50})
        assert isinstance(s, HistoryCompressor) and (s.keep_last_turns, s.max_tokens) == (2, 50)

    def test_empty(self) -> None:
        r = run(HistoryCompressor(), [])
        assert r.chunks == () and r.context.history == () and r.context.state is None
        assert r.trace[0].info["folded_turn_ids"] == []

    def test_single_chunk_passes_through(self) -> None:
        r = run(HistoryCompressor(keep_last_turns=1), ["a chunk of text"], history=HISTORY)
        assert [c.text for c in r.chunks] == ["a chunk of text"] and r.removals == ()

    def test_behaviour(self) -> None:
        r = run(HistoryCompressor(keep_last_turns=2), ["x"], history=HISTORY)
        assert [m.turn_id for m in r.context.history] == ["4", "5"]
        state = r.context.state
        assert isinstance(state, HistoryState)
        assert any("window seats" in it.text for it in state.preferences)
        expected = compress_history(HISTORY, keep_last_turns=2, counter=WhitespaceCounter())
        assert state == expected.state

    def test_trace(self) -> None:
        r = run(HistoryCompressor(keep_last_turns=2, max_tokens=40), ["x"], history=HISTORY)
        info = r.trace[0].info
        assert info["folded_turn_ids"] == ["1", "2", "3"]
        assert info["history_tokens_before"] == sum(len(f"{m['role']}: {m['content']}".split()) for m in HISTORY)
        assert info["history_tokens_after"] <= 40
        assert "window seats" in info["state_text"]
        assert r.to_dict()["trace"][0]["info"]["folded_turn_ids"] == ["1", "2", "3"]

    def test_incremental_through_state(self) -> None:
        stage = HistoryCompressor(keep_last_turns=1)
        first = run(stage, [], history=HISTORY[:3])
        second = run(stage, [], history=HISTORY, state=first.context.state)
        scratch = run(stage, [], history=HISTORY)
        assert second.context.state == scratch.context.state
        assert second.trace[0].info["folded_turn_ids"] == ["3", "4"]

    def test_state_from_dict_is_accepted(self) -> None:
        stage = HistoryCompressor(keep_last_turns=1)
        first = run(stage, [], history=HISTORY[:3])
        second = run(stage, [], history=HISTORY, state=first.context.state.to_dict())
        assert second.trace[0].info["folded_turn_ids"] == ["3", "4"]

    def test_foreign_state_is_an_error(self) -> None:
        with pytest.raises(InputError, match="context.state to be a HistoryState"):
            run(HistoryCompressor(), [], history=HISTORY, state=42)

    def test_custom_summarizer(self) -> None:
        fake = ScriptedSummarizer(script={"2": [("preference", "window seat")]})
        r = run(HistoryCompressor(keep_last_turns=1, summarizer=fake), [], history=HISTORY)
        assert [it.text for it in r.context.state.items] == ["window seat"]
        assert fake.calls == [("1", "2", "3", "4")]

    def test_no_input_mutation(self) -> None:
        ctx = TrimContext(query="q", history=tuple(Pipeline().run([], history=HISTORY).context.history))
        before = (ctx.history, ctx.state)
        HistoryCompressor(keep_last_turns=1).run(ctx, counter=WhitespaceCounter())
        assert (ctx.history, ctx.state) == before


class TestEmptyTurnsInTheTrace:
    def test_every_folded_turn_without_an_item_is_in_the_trace(self) -> None:
        r = run(HistoryCompressor(keep_last_turns=1), [], history=HISTORY)
        info = r.trace[0].info
        no_signal = "no fact, preference, constraint, goal, decision or question found"
        assert info["empty_turns"] == [{"turn_id": "1", "role": "user", "reason": "small talk"},
                                       {"turn_id": "3", "role": "assistant", "reason": no_signal}]
        assert info["notes"] == ["1 of 4 folded turns yielded no state item (small talk): turn 1",
                                 f"1 of 4 folded turns yielded no state item ({no_signal}): turn 3"]

    def test_korean_history(self) -> None:
        history = [{"role": "user", "content": c, "turn_id": str(i)} for i, c in enumerate(
            ["안녕하세요!", "예산은 1인당 50만 원 이하로 잡고 있어요.", "대한항공으로 하기로 했어요.", "고마워요!"], 1)]
        r = run(HistoryCompressor(keep_last_turns=0), [], history=history)
        info = r.trace[0].info
        assert info["state_items"] == 2
        assert "- user: 예산은 1인당 50만 원 이하로 잡고 있어요" in info["state_text"]
        assert [t["turn_id"] for t in info["empty_turns"]] == ["1", "4"]

    def test_empty_history_has_the_same_keys(self) -> None:
        info = run(HistoryCompressor(), []).trace[0].info
        assert info["empty_turns"] == [] and info["notes"] == []
