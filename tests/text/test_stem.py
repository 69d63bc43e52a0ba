"""The light English stemmer BM25 matches word forms with."""

from __future__ import annotations

import pytest

from ragtrim.text.stem import light_stem


@pytest.mark.parametrize(("forms", "stem"), [
    (("govern", "governs", "governed", "governing"), "govern"),
    (("law", "laws"), "law"),
    (("agree", "agreed", "agrees"), "agre"),
    (("run", "running"), "run"),
    (("study", "studies"), "study"),
    (("pass", "passes"), "pass"),
    (("license", "licenses", "licensed", "licensing"), "licens"),
    (("quick", "quickly"), "quick"),
])
def test_forms_meet(forms: tuple[str, ...], stem: str) -> None:
    assert {light_stem(f) for f in forms} == {stem}


@pytest.mark.parametrize("word", ["bus", "analysis", "status", "red", "1999", "3.5", "straße", "Governed", "東京",
                                  "sing", "fall"])
def test_left_alone(word: str) -> None:
    assert light_stem(word) == word
