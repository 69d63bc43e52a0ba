"""The hostile-input generators and cases behind ragtrim_bench.pipeline.hostile_growth."""

from __future__ import annotations

import pytest

from ragtrim.dedup.shingles import jaccard, line_shingles
from ragtrim_bench.pipeline.hostile_inputs import (
    CASES,
    HostileCase,
    conversation,
    deep_html_then_unclosed,
    deep_page,
    digit_led_sentences,
    dots,
    fences,
    japanese_quotes,
    korean_prose,
    quoted_prose,
    similar_stream,
    unpunctuated_chinese,
)


def test_text_generators_have_the_described_shape() -> None:
    assert dots(5) == ".....x"
    assert len(quoted_prose(1000)) <= 1000 and quoted_prose(1000).startswith('He said "yes." Then. ')
    assert fences(16) == "```\n~~~\n```\n~~~\n"
    assert digit_led_sentences(20).startswith("0 towers. 1 towers.")
    html = deep_html_then_unclosed(1000, "<!--x")
    assert html.startswith("<div>" * 100) and html.endswith("<!--x")
    assert deep_page(3).count("<div>") == 3 and deep_page(3).count("<span>") == 12


def test_script_generators() -> None:
    from ragtrim.text.sentences import split_sentences

    ko = korean_prose(2000)
    assert len(ko.encode("utf-8")) <= 2100 and ko.endswith("다.") and len(split_sentences(ko)) == ko.count("다.")
    ja = japanese_quotes(1000)
    assert split_sentences(ja)[:3] == ["彼は「明日来ます。待って。」と言った。", "会議は終わった！", "彼は「明日来ます。待って。」と言った。"]
    zh = unpunctuated_chinese(500)
    assert len(zh) == 500 and zh.isalpha() and split_sentences(zh) == [zh]


def test_similar_stream_is_similar_but_not_duplicate() -> None:
    stream = similar_stream(20)
    assert len(set(stream)) == 20
    sims = [jaccard(line_shingles(stream[0], 3), line_shingles(s, 3)) for s in stream[1:]]
    assert all(0.4 < s < 0.8 for s in sims)


def test_conversation_alternates_and_numbers_its_turns() -> None:
    turns = conversation(4)
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert [t["turn_id"] for t in turns] == ["t0", "t1", "t2", "t3"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_case_runs_at_a_small_size(case: HostileCase) -> None:
    case.build(max(4, case.n // 100))()
