"""ragtrim.gate.scoring: exact match, token F1, contains, refusals and JSON answers, with hand-checked values."""

from __future__ import annotations

import pytest

from ragtrim.gate.builders import JSON_ANSWER_SCHEMA
from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.scoring import (
    contains,
    exact_match,
    extract_answer,
    is_refusal,
    judge,
    parse_json_reply,
    token_f1,
    tokens,
)

ITEM = GoldenItem(id="q", question="Who designed the tower?", answers=("Gustave Eiffel",))
JSON_ITEM = GoldenItem(id="j", question="Who designed the tower?", answers=("Gustave Eiffel",),
                       schema=JSON_ANSWER_SCHEMA)
UNANSWERABLE = GoldenItem(id="u", question="Who painted the tower red?", answerable=False)


def test_exact_and_f1_hand_values() -> None:
    assert exact_match("The Gustave Eiffel.", ["Gustave Eiffel"]) == 1.0
    assert exact_match("Eiffel", ["Gustave Eiffel"]) == 0.0
    assert token_f1("Eiffel", ["Gustave Eiffel"]) == pytest.approx(2 / 3)  # P 1, R 1/2
    assert token_f1("engineer Gustave Eiffel", ["Gustave Eiffel", "Eiffel"]) == pytest.approx(0.8)  # P 2/3, R 1
    assert token_f1("", ["x"]) == 0.0 and token_f1("x", []) == 0.0


def test_contains_is_whole_words_and_cjk_by_character() -> None:
    assert contains("It was Gustave Eiffel's firm", ["Gustave Eiffel"]) == 0.0  # "eiffels" is another word
    assert contains("It was Gustave Eiffel, in 1889", ["Gustave Eiffel"]) == 1.0
    assert contains("in 1990", ["1"]) == 0.0
    assert contains("答案是北京市。", ["北京"]) == 1.0
    assert tokens("北京 is big") == ["北", "京", "is", "big"]


@pytest.mark.parametrize("reply", ["unanswerable", "The documents do not contain the answer.",
                                   "I don't know.", "UNANSWERABLE"])
def test_refusals(reply: str) -> None:
    assert is_refusal(reply)


@pytest.mark.parametrize("reply", ["", "Paris", "a mistaken guess", "the answers are unknowable"])
def test_not_refusals(reply: str) -> None:
    assert not is_refusal(reply)


def test_parse_json_reply() -> None:
    assert parse_json_reply('{"answer": "x"}') == ({"answer": "x"}, True)
    assert parse_json_reply('```json\n{"answer": "x"}\n```') == ({"answer": "x"}, False)
    assert parse_json_reply('Sure: {"answer": "x"} done') == ({"answer": "x"}, False)
    assert parse_json_reply("no json here") == (None, False)


class TestJudge:
    def test_right_wrong_and_failed(self) -> None:
        right = judge(ITEM, "Gustave Eiffel", ITEM.answers)
        assert (right.correct, right.exact, right.f1, right.contains, right.refused) == (True, 1.0, 1.0, 1.0, False)
        wrong = judge(ITEM, "Le Corbusier", ITEM.answers)
        assert wrong.correct is False and wrong.f1 == 0.0
        failed = judge(ITEM, None, ITEM.answers)
        assert failed.correct is False and failed.answer is None and failed.format_ok is None

    def test_metric_choice(self) -> None:
        assert judge(ITEM, "Eiffel", ITEM.answers, metric="contains").correct is False
        assert judge(ITEM, "Eiffel", ITEM.answers, metric="f1", f1_threshold=0.6).correct is True
        assert judge(ITEM, "Eiffel", ITEM.answers, metric="f1", f1_threshold=0.7).correct is False
        assert judge(ITEM, "It was Gustave Eiffel", ITEM.answers, metric="exact").correct is False

    def test_a_refusal_is_wrong_when_answerable_right_when_not(self) -> None:
        assert judge(ITEM, "unanswerable", ITEM.answers).correct is False
        assert judge(UNANSWERABLE, "unanswerable", ()).correct is True
        assert judge(UNANSWERABLE, "Monet", ()).correct is False
        assert judge(UNANSWERABLE, "", ()).correct is False  # silence is not a refusal

    def test_json_replies(self) -> None:
        ok = judge(JSON_ITEM, '{"answer": "Gustave Eiffel"}', JSON_ITEM.answers)
        assert ok.correct and ok.format_ok and ok.format_errors == ()
        fenced = judge(JSON_ITEM, '```json\n{"answer": "Gustave Eiffel"}\n```', JSON_ITEM.answers)
        assert fenced.correct and fenced.format_ok is False  # right answer, broken format: counted apart
        assert fenced.format_errors == ("the reply has text around its JSON",)
        prose = judge(JSON_ITEM, "Gustave Eiffel", JSON_ITEM.answers)
        assert prose.correct and prose.format_ok is False
        null = judge(JSON_ITEM, '{"answer": null}', JSON_ITEM.answers)
        assert null.refused and null.answer is None and null.correct is False and null.format_ok
        extra = judge(JSON_ITEM, '{"answer": "Gustave Eiffel", "confidence": 1}', JSON_ITEM.answers)
        assert extra.format_errors == ("$: property 'confidence' is not allowed",)
        assert extract_answer('{"answer": 42}', JSON_ITEM)[0] == "42"

    def test_agreement_expecting_a_refusal(self) -> None:
        agree = GoldenItem(id="a", question="q?")
        assert judge(agree, "unanswerable", None, expect_refusal=True).correct is True
        assert judge(agree, "Paris", None).correct is None  # nothing to judge against
