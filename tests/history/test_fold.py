from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ragtrim.errors import ConfigError, InputError, RagtrimError
from ragtrim.history.fold import compress_history
from ragtrim.history.state import HistoryState, StateItem, render_state
from ragtrim.history.summarizers import (
    OpenAICompatibleSummarizer,
    RuleBasedSummarizer,
    Summarizer,
    parse_llm_items,
)
from ragtrim.models import Message
from ragtrim.testing import ScriptedSummarizer
from ragtrim.text.tokens import WhitespaceCounter

WS = WhitespaceCounter()

CHAT: list[dict[str, str]] = [
    {"role": "user", "content": "Hi there! How are you?", "turn_id": "t0"},
    {"role": "assistant", "content": "Hello! I'm great, thanks for asking.", "turn_id": "t1"},
    {"role": "user", "content": "I'm planning a trip to Lisbon in May with my sister Ana.", "turn_id": "t2"},
    {"role": "assistant", "content": "Lovely! Lisbon is beautiful in spring.", "turn_id": "t3"},
    {"role": "user", "content": "I prefer small boutique hotels. We can't spend more than 900 euros.", "turn_id": "t4"},
    {"role": "assistant", "content": "Thanks! Haha, that's a classic.", "turn_id": "t5"},
    {"role": "user", "content": "We decided to take the train from Porto on May 3.", "turn_id": "t6"},
    {"role": "assistant", "content": "Got it. I will look for hotels near Alfama.", "turn_id": "t7"},
    {"role": "user", "content": "Should we book a fado show on Saturday?", "turn_id": "t8"},
    {"role": "user", "content": "Also, I love seafood and I hate crowded places.", "turn_id": "t9"},
    {"role": "assistant", "content": "Noted, seafood and quiet spots.", "turn_id": "t10"},
    {"role": "user", "content": "Thanks, bye!", "turn_id": "t11"},
]


def texts(result_state: HistoryState) -> str:
    return result_state.to_text()


class TestCompressHistory:
    def test_last_turns_are_verbatim(self) -> None:
        r = compress_history(CHAT, keep_last_turns=3, counter=WS)
        assert [m.to_dict() for m in r.recent] == CHAT[-3:]
        assert r.folded_turn_ids == tuple(m["turn_id"] for m in CHAT[:-3])
        assert r.text.endswith("user: Thanks, bye!")

    def test_extracts_kinds_and_turn_ids(self) -> None:
        r = compress_history(CHAT, keep_last_turns=0, counter=WS)
        s = r.state
        assert any("Lisbon in May" in it.text and it.turn_ids == ("t2",) for it in s.goals)
        assert any("boutique hotels" in it.text for it in s.preferences)
        assert any("900 euros" in it.text for it in s.constraints)
        assert any("train from Porto on May 3" in it.text for it in s.decisions)
        assert any("hotels near Alfama" in it.text and it.role == "assistant" for it in s.decisions)
        assert any("seafood" in it.text for it in s.preferences)
        data = s.to_dict()
        assert set(data) >= {"preferences", "constraints", "goals", "decisions", "facts", "questions"}
        json.dumps(data)

    def test_small_talk_is_dropped(self) -> None:
        r = compress_history(CHAT, keep_last_turns=0, counter=WS)
        state_text = r.state.to_text().lower()
        for phrase in ("how are you", "thanks", "bye", "haha", "hello", "i'm great"):
            assert phrase not in state_text
        folded_ids = {t for it in r.state.items for t in it.turn_ids}
        assert not folded_ids & {"t0", "t1", "t5", "t11"}

    def test_open_question_closed_by_other_speaker(self) -> None:
        upto_9 = compress_history(CHAT[:10], keep_last_turns=0, counter=WS).state
        assert any("fado show on Saturday" in it.text for it in upto_9.questions)  # t9 is the same speaker
        upto_10 = compress_history(CHAT[:11], keep_last_turns=0, counter=WS).state
        assert upto_10.questions == ()

    def test_duplicates_merge_turn_ids(self) -> None:
        msgs = [{"role": "u", "content": "I love jazz music.", "turn_id": "a"},
                {"role": "u", "content": "I love jazz music!", "turn_id": "b"}]
        s = compress_history(msgs, keep_last_turns=0, counter=WS).state
        assert len(s.preferences) == 1 and s.preferences[0].turn_ids == ("a", "b")

    @pytest.mark.parametrize("split", [1, 4, 7, 9, 12])
    def test_incremental_equals_from_scratch_full_list(self, split: int) -> None:
        scratch = compress_history(CHAT, keep_last_turns=2, counter=WS)
        first = compress_history(CHAT[:split], keep_last_turns=2, counter=WS)
        again = compress_history(CHAT, state=first.state, keep_last_turns=2, counter=WS)
        assert again.state == scratch.state
        assert again.state_text == scratch.state_text
        assert again.recent == scratch.recent

    def test_incremental_with_only_new_turns_and_each_turn_folded_once(self) -> None:
        script = {m["turn_id"]: [("fact", f"fact of {m['turn_id']}")] for m in CHAT}
        fake = ScriptedSummarizer(script=script)
        state = None
        for i in range(0, len(CHAT), 3):
            r = compress_history(CHAT[i : i + 3], state=state, keep_last_turns=2, counter=WS, summarizer=fake)
            state = r.state
        scratch = compress_history(CHAT, keep_last_turns=2, counter=WS, summarizer=ScriptedSummarizer(script=script))
        assert state == scratch.state
        folded = [t for call in fake.calls for t in call]
        assert folded == [m["turn_id"] for m in CHAT[:-2]]  # every folded turn exactly once, in order

    def test_summarizer_never_sees_state_text(self) -> None:
        fake = ScriptedSummarizer(script={"t2": [("goal", "trip to Lisbon")]})
        first = compress_history(CHAT[:5], keep_last_turns=1, counter=WS, summarizer=fake)
        compress_history(CHAT, state=first.state, keep_last_turns=1, counter=WS, summarizer=fake)
        seen_ids = {t for call in fake.calls for t in call}
        assert seen_ids <= {m["turn_id"] for m in CHAT}

    def test_budget_respected_and_recorded(self) -> None:
        full = compress_history(CHAT, keep_last_turns=2, counter=WS)
        r = compress_history(CHAT, keep_last_turns=2, counter=WS, max_tokens=30)
        assert r.tokens_after <= 30
        assert WS.count(r.text) == r.tokens_after
        assert len(r.dropped_items) + sum(1 for line in r.state_text.splitlines() if line.startswith("- ")) == len(
            full.state)
        assert r.dropped_items and any("left" in n for n in r.notes)
        assert r.state == full.state  # the budget limits the text, never the state

    def test_budget_smaller_than_recent_turns_folds_them(self) -> None:
        r = compress_history(CHAT, keep_last_turns=3, counter=WS, max_tokens=3)
        assert r.tokens_after <= 3
        assert len(r.recent) < 3 and any("verbatim" in n for n in r.notes)

    def test_keep_last_tokens(self) -> None:
        r = compress_history(CHAT, keep_last_turns=5, keep_last_tokens=12, counter=WS)
        assert r.recent_tokens <= 12 and len(r.recent) == 2

    def test_state_round_trip(self) -> None:
        r = compress_history(CHAT, keep_last_turns=2, counter=WS)
        data = json.loads(json.dumps(r.state.to_dict()))
        assert HistoryState.from_dict(data) == r.state
        again = compress_history(CHAT + [{"role": "user", "content": "I will pay by card.", "turn_id": "t12"}],
                                 state=data, keep_last_turns=2, counter=WS)
        assert again.folded_turn_ids == ("t10",)

    def test_as_messages(self) -> None:
        r = compress_history(CHAT, keep_last_turns=1, counter=WS)
        msgs = r.as_messages()
        assert msgs[0]["role"] == "system" and msgs[0]["content"] == r.state_text
        assert msgs[-1] == {"role": "user", "content": "Thanks, bye!"}

    def test_ratio(self) -> None:
        r = compress_history(CHAT, keep_last_turns=1, counter=WS, max_tokens=40)
        assert r.ratio == r.tokens_before / r.tokens_after > 1


class TestMalformedInput:
    @pytest.mark.parametrize("messages", [[], None])
    def test_empty(self, messages: Any) -> None:
        r = compress_history(messages, counter=WS)
        assert (r.recent, r.state_text, r.folded_turn_ids, r.tokens_after) == ((), "", (), 0)

    def test_missing_role(self) -> None:
        with pytest.raises(InputError, match=r"message at index 1: 'role' must be a non-empty str"):
            compress_history([{"role": "u", "content": "a"}, {"content": "b"}], counter=WS)

    def test_non_string_content(self) -> None:
        with pytest.raises(InputError, match=r"'content' must be a str, got int"):
            compress_history([{"role": "u", "content": 3}], counter=WS)

    def test_not_a_list(self) -> None:
        with pytest.raises(InputError, match="wrap it in a list"):
            compress_history({"role": "u", "content": "a"}, counter=WS)

    def test_duplicate_turn_ids(self) -> None:
        with pytest.raises(InputError, match="turn id 'x' appears twice"):
            compress_history([{"role": "u", "content": "a", "id": "x"}, {"role": "u", "content": "b", "id": "x"}],
                             counter=WS)

    def test_bad_state(self) -> None:
        with pytest.raises(InputError, match="state must be a HistoryState"):
            compress_history(CHAT, state="summary so far", counter=WS)

    @pytest.mark.parametrize("bad", ["abc", "3", -1, 2.5, True, None, [1]])
    def test_bad_next_seq_is_input_error(self, bad: object) -> None:
        # "abc" raised a raw ValueError from int()
        with pytest.raises(InputError, match="state next_seq must be an int >= 0"):
            compress_history(CHAT, state={"next_seq": bad}, counter=WS)

    @pytest.mark.parametrize(
        "state",
        [{"facts": [{"text": "x", "kind": "fact", "turn_ids": 5}]}, {"pending": 5}, {"pending": [5]},
         {"goals": [{"text": "x", "kind": "goal", "turn_ids": [[1]]}]}],
    )
    def test_malformed_state_fields_are_input_errors(self, state: dict[str, Any]) -> None:
        # TypeError: 'int' object is not iterable, raw, before
        with pytest.raises(InputError):
            compress_history(CHAT, state=state, counter=WS)

    @pytest.mark.parametrize(
        ("kwargs", "name"),
        [({"keep_last_turns": -1}, "keep_last_turns"), ({"max_tokens": 1.5}, "max_tokens"),
         ({"keep_last_tokens": -2}, "keep_last_tokens"), ({"recency_weight": -1.0}, "recency_weight"),
         ({"summarizer": object()}, "summarizer")],
    )
    def test_bad_parameters(self, kwargs: dict[str, Any], name: str) -> None:
        with pytest.raises(ConfigError, match=name):
            compress_history(CHAT, counter=WS, **kwargs)

    def test_state_item_validation(self) -> None:
        with pytest.raises(InputError, match="kind must be one of"):
            StateItem(text="x", kind="gossip", turn_ids=())  # type: ignore[arg-type]
        with pytest.raises(InputError, match="non-empty str"):
            StateItem(text=" ", kind="fact", turn_ids=())


class TestSummarizers:
    def test_protocols(self) -> None:
        assert isinstance(RuleBasedSummarizer(), Summarizer)
        assert isinstance(ScriptedSummarizer(script={}), Summarizer)
        assert isinstance(OpenAICompatibleSummarizer(base_url="http://x/v1", model="m"), Summarizer)

    def test_rule_based_parameters(self) -> None:
        with pytest.raises(ConfigError, match="min_content_words"):
            RuleBasedSummarizer(min_content_words=-1)

    def test_scripted_validation(self) -> None:
        with pytest.raises(ConfigError, match=r"script\['a'\]"):
            ScriptedSummarizer(script={"a": [("gossip", "x")]})

    def test_render_groups_by_kind(self) -> None:
        items = [StateItem(text="Likes tea", kind="preference", turn_ids=("1",), role="u"),
                 StateItem(text="Lives in Oslo", kind="fact", turn_ids=("2",), role="u")]
        assert render_state(items).splitlines()[1:] == ["Preferences:", "- u: Likes tea", "Facts:", "- u: Lives in Oslo"]
        assert render_state([]) == ""


class FakeEndpoint:
    def __init__(self, reply: bytes | Exception) -> None:
        self.reply = reply
        self.requests: list[tuple[str, dict[str, Any], Mapping[str, str]]] = []

    def __call__(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> bytes:
        self.requests.append((url, json.loads(body), headers))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def _completion(content: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


class TestOpenAICompatibleSummarizer:
    def test_request_and_parse(self) -> None:
        content = 'Here you go: [{"kind": "goal", "text": "Trip to Lisbon in May", "turn_ids": ["t2", "zz"]},' \
                  ' {"kind": "gossip", "text": "x"}, {"kind": "fact", "text": "Sister is Ana"}]'
        post = FakeEndpoint(_completion(content))
        s = OpenAICompatibleSummarizer(base_url="http://localhost:8000/v1/", model="qwen", api_key="k", post=post)
        r = compress_history(CHAT[:4], keep_last_turns=1, counter=WS, summarizer=s)
        url, body, headers = post.requests[0]
        assert url == "http://localhost:8000/v1/chat/completions"
        assert body["model"] == "qwen" and headers["Authorization"] == "Bearer k"
        assert "[t2] user: I'm planning a trip" in body["messages"][0]["content"]
        assert "Lisbon is beautiful" not in body["messages"][0]["content"]  # the kept turn is not sent
        assert [(it.kind, it.turn_ids) for it in r.state.items] == [("goal", ("t2",)), ("fact", ("t2",))]

    def test_bad_config(self) -> None:
        with pytest.raises(ConfigError, match="base_url"):
            OpenAICompatibleSummarizer(base_url="localhost:8000", model="m")
        with pytest.raises(ConfigError, match="model"):
            OpenAICompatibleSummarizer(base_url="http://x", model="")

    def test_bad_response(self) -> None:
        s = OpenAICompatibleSummarizer(base_url="http://x", model="m", post=FakeEndpoint(b"not json"))
        with pytest.raises(InputError, match="not a chat completion"):
            s.extract([Message("u", "hello", "1")])
        with pytest.raises(InputError, match="no JSON array"):
            parse_llm_items("sorry, I cannot", [Message("u", "hello", "1")])

    def test_network_error(self) -> None:
        s = OpenAICompatibleSummarizer(base_url="http://x", model="m", post=FakeEndpoint(OSError("refused")))
        with pytest.raises(RagtrimError, match="is the server running"):
            s.extract([Message("u", "hello", "1")])


def _locomo_messages(path: Path) -> list[dict[str, str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    msgs = []
    k = 1
    while f"session_{k}" in data:
        msgs += [{"role": t["speaker"], "content": t["text"], "turn_id": t["dia_id"]} for t in data[f"session_{k}"]]
        k += 1
    return msgs


def test_locomo_incremental_equals_scratch(shared_data: Path) -> None:
    path = shared_data / "locomo" / "30.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    msgs = _locomo_messages(path)
    scratch = compress_history(msgs, keep_last_turns=4, max_tokens=2000, counter=WS)
    state = None
    for end in range(50, len(msgs) + 50, 50):
        state = compress_history(msgs[:end], state=state, keep_last_turns=4, max_tokens=2000, counter=WS).state
    final = compress_history(msgs, state=state, keep_last_turns=4, max_tokens=2000, counter=WS)
    assert final.state == scratch.state and final.state_text == scratch.state_text
    assert final.tokens_after <= 2000
    assert not re.search(r"(?im)^- \w+: (hey|hi|thanks)\b", scratch.state_text)


def _reference_merge(state_items: list[StateItem], new_items: list[StateItem], folded: list[Message],
                     next_seq: int) -> tuple[list[StateItem], int]:
    """``history._merge`` as it was (a rebuilt list and index per answering turn: quadratic), the reference
    for the linear version."""
    import dataclasses

    from ragtrim.history.fold import _item_key

    position = {m.turn_id: i for i, m in enumerate(folded)}
    by_turn: dict[int, list[StateItem]] = {}
    for it in new_items:
        at = max((position[t] for t in it.turn_ids if t in position), default=len(folded))
        by_turn.setdefault(at, []).append(it)
    items = list(state_items)
    index = {_item_key(it): i for i, it in enumerate(items)}
    for i in range(len(folded) + 1):
        if i < len(folded) and any(it.kind == "question" and it.role != folded[i].role for it in items):
            items = [it for it in items if not (it.kind == "question" and it.role != folded[i].role)]
            index = {_item_key(it): j for j, it in enumerate(items)}
        for it in by_turn.get(i, ()):
            key = _item_key(it)
            if key in index:
                old = items[index[key]]
                extra = tuple(t for t in it.turn_ids if t not in old.turn_ids)
                if extra:
                    items[index[key]] = dataclasses.replace(old, turn_ids=old.turn_ids + extra)
            else:
                index[key] = len(items)
                items.append(dataclasses.replace(it, seq=next_seq))
                next_seq += 1
    return items, next_seq


class TestLinearMerge:
    """The merge is linear (the quadratic one took 26 s for 16k turns) and gives the same state."""

    @staticmethod
    def _random_case(seed: int) -> tuple[list[StateItem], list[StateItem], list[Message]]:
        import random

        rng = random.Random(seed)
        roles = ["user", "assistant", "tool"]
        texts = ["Is it open?", "is it open", "We go by train.", "I like tea.", "Who pays?", "I like tea!"]
        folded = [Message(role=rng.choice(roles), content="x", turn_id=f"t{i}") for i in range(rng.randint(0, 30))]
        kinds = ["question", "fact", "preference", "question"]

        def item(turns: tuple[str, ...], seq: int) -> StateItem:
            return StateItem(text=rng.choice(texts), kind=rng.choice(kinds), turn_ids=turns,  # type: ignore[arg-type]
                             role=rng.choice(roles), seq=seq)

        state = [item((f"s{k}",), k) for k in range(rng.randint(0, 6))]
        new = [item(tuple(rng.choice(folded).turn_id for _ in range(rng.randint(1, 3))), 0)
               for _ in range(rng.randint(0, 40))] if folded else []
        return state, new, folded

    def test_same_state_as_the_former_merge(self) -> None:
        from ragtrim.history.fold import _merge

        for seed in range(400):
            state, new, folded = self._random_case(seed)
            assert _merge(list(state), new, folded, 10) == _reference_merge(list(state), new, folded, 10), seed

    def test_many_turns_with_questions_and_repeats(self) -> None:
        n = 16_000
        chat = [{"role": "user" if i % 2 else "assistant", "content": "c", "turn_id": f"t{i}"} for i in range(n)]
        script = {f"t{i}": [("question", f"Question {i}?"), ("preference", "I like tea.")] for i in range(n)}
        result = compress_history(chat, keep_last_turns=0, counter=WS, summarizer=ScriptedSummarizer(script=script))
        # Every question was answered by the next speaker but the last; each speaker's repeated preference is one
        # item that kept every turn id.
        assert [it.text for it in result.state.questions] == [f"Question {n - 1}?"]
        assert [len(it.turn_ids) for it in result.state.preferences] == [n // 2, n // 2]


def test_fitting_prefix_steps_then_bisects() -> None:
    from ragtrim.history.fold import _PREFIX_STEPS, _fitting_prefix

    calls: list[int] = []

    def fits_up_to(limit: int) -> Any:
        def fits(k: int) -> bool:
            calls.append(k)
            return k <= limit
        return fits

    assert _fitting_prefix(10, fits_up_to(7)) == 7 and calls == [10, 9, 8, 7]  # one at a time, as before
    assert _fitting_prefix(0, fits_up_to(0)) == 0
    calls.clear()
    assert _fitting_prefix(100_000, fits_up_to(5)) == 5
    assert len(calls) <= _PREFIX_STEPS + 20  # bisection, not 99,995 renders
    assert _fitting_prefix(50, lambda k: k == 0) == 0


class TestClauseSplitIsLinear:
    _OLD = re.compile(r"\s*(?:;|\s[-–—]\s|,\s+(?:but|so|and then)\s+)\s*")

    def test_same_splits_as_the_former_pattern(self) -> None:
        import random

        from ragtrim.history.summarizers import _CLAUSE_SPLIT

        rng = random.Random(7)
        alpha = [" ", "  ", ";", "-", "—", ",", " but ", "so", " and then ", "x", "\t", "\n", "a", ", but ", " - "]
        for _ in range(20_000):
            text = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 20)))
            assert _CLAUSE_SPLIT.split(text) == self._OLD.split(text), text

    def test_long_run_of_blanks_in_one_turn(self) -> None:
        # 20,000 spaces took 15 s: the clause split retried its leading \s* from every blank.
        chat = [{"role": "user", "content": "I like" + " " * 100_000 + "green tea a lot"},
                {"role": "assistant", "content": "ok"}]
        result = compress_history(chat, keep_last_turns=0, counter=WS)
        assert [it.kind for it in result.state.items] == ["preference"]


# Twelve Korean turns with a goal, a preference, a budget, a deadline and a decision.
KOREAN_TRIP = [
    ("user", "안녕하세요!"),
    ("assistant", "안녕하세요, 무엇을 도와드릴까요?"),
    ("user", "다음 달에 제주도로 가족 여행을 계획하고 있어요."),
    ("assistant", "좋네요. 숙소는 어떤 곳을 원하세요?"),
    ("user", "저는 바다가 보이는 조용한 호텔을 선호해요."),
    ("assistant", "알겠습니다. 예산은 어느 정도인가요?"),
    ("user", "예산은 1인당 50만 원 이하로 잡고 있어요."),
    ("assistant", "항공권은 언제까지 예약하셔야 하나요?"),
    ("user", "항공권은 이번 주 금요일까지 예약해야 해요."),
    ("assistant", "그럼 제주항공과 대한항공 요금을 비교해 드릴게요."),
    ("user", "대한항공으로 하기로 했어요."),
    ("assistant", "감사합니다! 좋은 여행 되세요."),
]


def numbered(turns: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"role": r, "content": c, "turn_id": str(i)} for i, (r, c) in enumerate(turns, 1)]


class TestEveryScript:
    def test_korean_turns_fold_into_state_items(self) -> None:
        r = compress_history(numbered(KOREAN_TRIP), keep_last_turns=0, counter=WS)
        assert [(it.kind, it.text, it.turn_ids) for it in r.state.items] == [
            ("preference", "저는 바다가 보이는 조용한 호텔을 선호해요", ("5",)),
            ("constraint", "예산은 1인당 50만 원 이하로 잡고 있어요", ("7",)),
            ("constraint", "항공권은 이번 주 금요일까지 예약해야 해요", ("9",)),
            ("goal", "다음 달에 제주도로 가족 여행을 계획하고 있어요", ("3",)),
            ("decision", "대한항공으로 하기로 했어요", ("11",)),
        ]
        # The assistant's questions (turns 4, 6, 8) were items, closed when the user answered them.
        assert r.notes == (
            "3 of 12 folded turns yielded no state item (small talk): turns 1, 2, 12",
            ("1 of 12 folded turns yielded no state item (no fact, preference, constraint, goal, decision or question "
            "found): turn 10"),
        )
        assert [(t.turn_id, t.role) for t in r.empty_turns] == [("1", "user"), ("2", "assistant"),
                                                                 ("10", "assistant"), ("12", "assistant")]
        assert r.to_dict()["empty_turns"][0] == {"turn_id": "1", "role": "user", "reason": "small talk"}

    @pytest.mark.parametrize(("turn", "kind"), [
        ("窓側の席が好きです。", "preference"), ("予算は3万円以内です。", "constraint"),
        ("東京駅で集合することにしました。", "decision"), ("来月京都に行く予定です。", "goal"),
        ("我更喜欢靠窗的座位。", "preference"), ("预算不超过五千元。", "constraint"),
        ("我们决定住在西湖附近。", "decision"), ("我打算下个月去杭州。", "goal"),
    ])
    def test_japanese_and_chinese_turns(self, turn: str, kind: str) -> None:
        r = compress_history([{"role": "user", "content": turn, "turn_id": "1"}], keep_last_turns=0, counter=WS)
        assert [(it.kind, it.text) for it in r.state.items] == [(kind, turn.rstrip("。"))]
        assert r.empty_turns == () and r.notes == ()

    def test_english_turns_that_yield_nothing_are_noted(self) -> None:
        r = compress_history(CHAT, keep_last_turns=0, counter=WS)
        assert r.notes == (
            "4 of 12 folded turns yielded no state item (small talk): turns t0, t1, t5, t11",
            ("1 of 12 folded turns yielded no state item (no fact, preference, constraint, goal, decision or question "
            "found): turn t10"),
        )
        assert [t.turn_id for t in r.empty_turns] == ["t0", "t1", "t5", "t10", "t11"]

    def test_a_script_without_rules_is_named(self) -> None:
        turns = [{"role": "user", "content": "ฉันชอบโรงแรมเงียบๆ ริมทะเล", "turn_id": "1"},
                 {"role": "user", "content": "Мы решили поехать поездом.", "turn_id": "2"}]
        r = compress_history(turns, keep_last_turns=0, counter=WS)
        assert [(t.turn_id, t.reason) for t in r.empty_turns] == [
            ("1", "no rules for its script (thai)"), ("2", "no rules for its script (cyrillic)")]

    def test_a_summarizer_without_reasons(self) -> None:
        fake = ScriptedSummarizer(script={"t2": [("goal", "Lisbon in May")]})
        r = compress_history(CHAT[:4], keep_last_turns=0, counter=WS, summarizer=fake)
        assert r.notes == (("3 of 4 folded turns yielded no state item (the summarizer returned no item for it): "
                           "turns t0, t1, t3"),)

    def test_only_turns_folded_now_are_noted(self) -> None:
        first = compress_history(CHAT[:6], keep_last_turns=0, counter=WS)
        second = compress_history(CHAT, state=first.state, keep_last_turns=0, counter=WS)
        assert [t.turn_id for t in first.empty_turns] == ["t0", "t1", "t5"]
        assert [t.turn_id for t in second.empty_turns] == ["t10", "t11"]

    def test_long_lists_are_cut_in_the_note_not_in_the_field(self) -> None:
        turns = [{"role": "user", "content": "Thanks!", "turn_id": str(i)} for i in range(15)]
        r = compress_history(turns, keep_last_turns=0, counter=WS)
        assert r.notes == (("15 of 15 folded turns yielded no state item (small talk): turns 0, 1, 2, 3, 4, 5, 6, 7, "
                           "8, 9, 10, 11 and 3 more"),)
        assert len(r.empty_turns) == 15
