"""The LoCoMo history benchmark's pure metrics (ragtrim_bench.history.locomo): answers and evidence are matched after
the one normalisation every benchmark uses (SQuAD's: punctuation deleted)."""

from __future__ import annotations

from ragtrim.models import Message
from ragtrim.text.tokens import WhitespaceCounter
from ragtrim_bench.common.answers import normalize_answer
from ragtrim_bench.history.locomo import answer_present, key_words, last_n_text, session_of, turn_retained


def test_answer_present_as_whole_words_after_normalisation() -> None:
    out = normalize_answer("Caroline's dog, Oscar, was adopted on 3:00 p.m. in May.")
    assert answer_present("Oscar", out) and answer_present("Caroline's", out) and answer_present("3:00 p.m.", out)
    assert not answer_present("Osc", out) and not answer_present("The", out)


def test_turn_retained_needs_named_facts_and_half_the_content_words() -> None:
    turn = "Melanie painted a lake sunrise in 2022 for her friends."
    kept = set(normalize_answer("melanie painted lake sunrise 2022 friends").split())
    assert turn_retained(turn, kept, 0.5)
    assert not turn_retained(turn, kept - {"2022"}, 0.5)


def test_a_turn_inside_the_output_is_retained() -> None:
    """The full history is the ceiling: the same word extraction on both sides, whatever the punctuation."""
    turn = "Caroline’s 5-star stay in São Paulo cost $1,200 on May 3rd: don't ask, it was well-known (e.g. to Jon)."
    output = "Melanie: hi there!\nCaroline: " + turn + "\nMelanie: wow."
    assert turn_retained(turn, set().union(*key_words(output)), 0.5)
    assert not turn_retained(turn, set().union(*key_words("Melanie: hi there!")), 0.5)


def test_last_n_text_fits_the_budget() -> None:
    turns = [Message(role="a", content="one two", turn_id="D1:1"), Message(role="b", content="three four five", turn_id="D1:2")]
    counter = WhitespaceCounter()
    assert last_n_text(turns, 4, counter) == "b: three four five"
    assert last_n_text(turns, 1, counter) == ""


def test_session_of() -> None:
    assert session_of("D12:3") == 12 and session_of("x") == 10**9
