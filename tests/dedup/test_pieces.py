"""Long texts a piece at a time (``ragtrim.dedup.pieces``): every result equals the whole-text one, on texts built of
the characters that see across a cut (final sigma, combining marks, kana voicing marks, half-width kana, Hangul
jamo, whitespace of every kind), with pieces a few characters long so that every cut lands somewhere hard."""

from __future__ import annotations

import hashlib
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.dedup import pieces
from ragtrim.dedup.shingles import _CHAR_CUT, _CHAR_TOKEN, _WORD

ALPHABET = list(
    "ab AZ09_.,;'-\t\n\r\x0b\x0c\u00a0\u2028\u3000"  # ASCII, punctuation, whitespace of every kind
    "\u03a3\u03c3\u03c2\u0399"  # capital sigma (final or not depends on its neighbours), sigmas, iota
    "e\u0301\u0327\u0338<="  # combining marks; '<' + U+0338 composes to '≮'
    "\u304b\u3099\u309a\u30ab\uff76\uff9e\uff9f"  # kana, voicing marks, half-width kana and its voicing marks
    "\u1100\u1161\u11a8\uac00"  # Hangul jamo L, V, T and a syllable (L+V and LV+T compose)
    "\u5317\u4eac\u2211\U0001d6ba\ufb01\u2460\u0130\u1e9e"  # Han, ∑, bold capital sigma, ﬁ, ①, İ, ẞ
)
texts = st.text(alphabet=st.sampled_from(ALPHABET), max_size=200)


@pytest.fixture(autouse=True)
def tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pieces, "PIECE_CHARS", 5)


def whole_key(folded: str) -> bytes:
    h = hashlib.blake2b(" ".join(folded.split()).encode("utf-8", "surrogatepass"), digest_size=16,
                        person=b"ragtrim-exact")
    return h.digest()


class TestSameAsWhole:
    @settings(max_examples=400, deadline=None)
    @given(texts)
    def test_nfkc_lower(self, text: str) -> None:
        assert pieces.nfkc_lower(text) == unicodedata.normalize("NFKC", text).lower()

    @settings(max_examples=400, deadline=None)
    @given(texts)
    def test_exact_key(self, text: str) -> None:
        assert pieces.exact_key(text) == whole_key(text)

    @settings(max_examples=400, deadline=None)
    @given(texts)
    def test_words_and_characters(self, text: str) -> None:
        folded = unicodedata.normalize("NFKC", text).lower()
        assert pieces.tokens_joined(folded, _WORD) == " ".join(_WORD.findall(folded))
        assert pieces.tokens_joined(folded, _CHAR_TOKEN, _CHAR_CUT) == " ".join(_CHAR_TOKEN.findall(folded))
        table = {ord(c): " " for c in ".,;'-"}
        assert pieces.translated(folded, table) == folded.translate(table)

    @pytest.mark.parametrize("text", [
        "ab\u03a3 cd", "a\u03a3' b", "x\u03a3ab" * 5, "\u304b" * 6 + "\u3099", "\uff76" * 5 + "\uff9e",
        "<" * 5 + "\u0338", "\u1100" * 5 + "\u1161\u11a8", "word " * 3 + "x" * 20 + " end", " " * 12 + "a",
    ])
    def test_cuts_next_to_what_looks_across(self, text: str) -> None:
        assert pieces.nfkc_lower(text) == unicodedata.normalize("NFKC", text).lower()
        assert pieces.exact_key(text) == whole_key(text)

    def test_pieces_cover_the_text_and_cut_only_before_a_match(self) -> None:
        text = "aaaaaaaa bbbbbbbbbb cc d"
        got = list(pieces.pieces(text, re.compile(" "), 5))
        assert "".join(got) == text and all(p.startswith(" ") for p in got[1:])
        assert list(pieces.pieces("", re.compile(" "), 5)) == [] and list(pieces.pieces("abc", re.compile(" "))) == ["abc"]
