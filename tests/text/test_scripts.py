"""Script detection: shares of letters per script over a bounded prefix, and the language guess."""

from __future__ import annotations

import pytest

from ragtrim.text.scripts import SCRIPTS, dominant_script, guess_language, script_shares, share_in
from tests.text import multilingual_heldout, multilingual_reference


class TestScriptShares:
    def test_empty_and_letterless_text(self) -> None:
        assert script_shares("") == {}
        assert script_shares("1,000 + 2 = ?!") == {}
        assert dominant_script("42") == "none"
        assert share_in("42", {"latin"}) is None

    def test_ascii_is_latin(self) -> None:
        assert script_shares("The tower is 330 m tall.") == {"latin": 1.0}

    def test_shares_are_counted_over_letters(self) -> None:
        shares = script_shares("한도 ab")
        assert shares == {"hangul": 0.5, "latin": 0.5}

    @pytest.mark.parametrize(("text", "script"), [
        ("알렉산더 헤이그는 1924년에 태어났다.", "hangul"), ("北京是中国的首都。", "han"), ("ひらがなとカタカナ", "kana"),
        ("Москва — столица России.", "cyrillic"), ("Η Αθήνα είναι", "greek"), ("القاهرة هي عاصمة مصر", "arabic"),
        ("ירושלים היא עיר", "hebrew"), ("भारत एक विशाल देश है।", "indic"), ("กรุงเทพมหานคร", "thai_lao"),
        ("ဗမာစာ", "myanmar_khmer"), ("საქართველო", "other"), ("Łódź İstanbul café", "latin"), ("𠀋𠀋𠀋", "han"),
    ])
    def test_dominant_script(self, text: str, script: str) -> None:
        assert script in SCRIPTS
        assert dominant_script(text) == script

    def test_only_the_prefix_is_read(self) -> None:
        text = "English words here. " * 30 + "한국어 " * 1000
        assert dominant_script(text) == "latin"
        assert dominant_script(text, max_chars=len(text)) == "hangul"

    def test_share_in(self) -> None:
        assert share_in("abcd 가나", {"latin"}) == pytest.approx(4 / 6)
        assert share_in("가나다", {"latin"}) == 0.0


class TestGuessLanguage:
    @pytest.mark.parametrize(("text", "lang"), [
        ("요금제의 월 한도는 5만 원입니다.", "ko"), ("東京は日本の首都である。", "ja"), ("北京是中国的首都。", "zh"),
        ("The budget is fixed.", "latin"), ("Москва", "ru"), ("123", "none"), ("한국 漢字 한국어", "ko"),
    ])
    def test_guess(self, text: str, lang: str) -> None:
        assert guess_language(text) == lang

    def test_reference_texts(self) -> None:
        """Every hand-checked reference text gets its script's language (Latin-script languages as "latin")."""
        latin = {"pl", "tr", "cs", "es", "de", "fr", "vi"}
        expected = {"uk": "ru", "fa": "ar", "bn": "hi"}
        for lang, text, _ in multilingual_reference.cases() + multilingual_heldout.cases():
            assert guess_language(text) == ("latin" if lang in latin else expected.get(lang, lang)), (lang, text)
