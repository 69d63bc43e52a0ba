"""Inputs found by ``ragtrim-bench pipeline fuzz_trim`` that raised an untyped exception, kept as regressions."""

from __future__ import annotations

import pytest

from ragtrim import trim


@pytest.mark.parametrize("ctrl", ["\x0b", "\x00", "\x1f", "\x0c"])
def test_control_characters_in_html_tails(ctrl: str) -> None:
    # lxml refused to set a text node holding "\x0b" after a dropped <nav>: StageError(ValueError) before
    r = trim([f"<nav>Home | About</nav>The tower is tall. {ctrl}More text.<p>Iron.", "x"], scorer="bm25")
    assert "The tower is tall." in r.text
