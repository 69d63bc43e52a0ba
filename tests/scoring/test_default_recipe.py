"""The default recipe (``scorer="auto"`` -> ``balanced``) on small hand-made cases, with the real MiniLM."""

from __future__ import annotations

import pytest

from ragtrim import trim
from ragtrim.scoring.auto import choose

pytestmark = pytest.mark.model

ROLLBACK = ["Weather: sunny.",
            ("Dr. Kim met the team at 3 p.m. on Monday to review the rollout plan. The rollback window closes at 18:00 "
            "UTC on Friday. Lunch is served in the main hall.")]


@pytest.fixture(autouse=True)
def _needs_minilm() -> None:
    if choose().scorer != "balanced":
        pytest.skip(f"scorer='auto' is {choose().scorer!r} here ({choose().reason})")


def test_the_answering_sentence_survives_a_short_chunk_prior() -> None:
    result = trim(ROLLBACK, query="When does the rollback window close?", budget=15)
    assert result.text == "The rollback window closes at 18:00 UTC on Friday."
    assert result.removals  # what was cut is recorded


def test_an_identifier_question_keeps_its_record() -> None:
    keys = ["a81f-22c9", "7d03-e5b1", "c44a-9f10", "0be7-61d2", "5e2d-8a47", "9c1b-03fe"]
    records = [f"Record {i}: the configuration value stored under key {k} is {v}." for i, (k, v) in
               enumerate(zip(keys, ["blue", "green", "amber", "violet", "teal", "coral"]))]
    result = trim(records, query="What is the configuration value stored under key 5e2d-8a47?", budget=30)
    assert "teal" in result.text
