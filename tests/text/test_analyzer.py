"""The script analyzer: CJK bigrams, South-East Asian grapheme bigrams, words with their combining marks."""

from __future__ import annotations

import unicodedata

import pytest

from ragtrim.text.analyzer import bigrams, run_bigrams, script_tokens


def _tokens(text: str) -> list[str]:
    return script_tokens(unicodedata.normalize("NFKC", text).lower())


class TestScriptTokens:
    def test_empty(self) -> None:
        assert script_tokens("") == []
        assert bigrams("") == [""]

    def test_hangul_runs_become_bigrams_and_lone_syllables_unigrams(self) -> None:
        assert _tokens("요금제의 월 한도는 5만 원") == ["요금", "금제", "제의", "월", "한도", "도는", "5", "만", "원"]

    def test_a_particle_does_not_hide_the_word(self) -> None:
        assert set(_tokens("요금제")) <= set(_tokens("요금제의"))
        assert set(_tokens("한도")) <= set(_tokens("한도는"))

    def test_japanese_and_chinese_clauses_are_not_one_token(self) -> None:
        assert _tokens("東京は首都。") == ["東京", "京は", "は首", "首都"]
        assert _tokens("北京是首都") == ["北京", "京是", "是首", "首都"]
        assert _tokens("ジョン・スミス") == ["ジョ", "ョン", "スミ", "ミス"]  # the middle dot ends a run

    def test_numbers_keep_their_separators(self) -> None:
        assert _tokens("1,000원 3.5% 1924년") == ["1000", "원", "3.5", "1924", "년"]

    def test_indic_words_keep_their_marks(self) -> None:
        assert _tokens("सीमा भारत की है।") == ["सीमा", "भारत", "की", "है"]
        assert _tokens("ঢাকা বাংলাদেশের") == ["ঢাকা", "বাংলাদেশের"]

    def test_thai_becomes_grapheme_cluster_bigrams(self) -> None:
        assert _tokens("เมืองหลวง") == ["เมื", "มือ", "อง", "งห", "หล", "ลว", "วง"]
        assert _tokens("ก") == ["ก"]

    def test_other_scripts_are_words(self) -> None:
        assert _tokens("Москва — столица") == ["москва", "столица"]
        assert _tokens("Café naïve coöperate") == ["café", "naïve", "coöperate"]
        assert _tokens("دیده‌اید") == ["دیده\u200cاید"]  # the zero-width non-joiner stays inside the word

    def test_run_bigrams(self) -> None:
        assert run_bigrams(["무엇", "어떻게", "왜"]) == frozenset({"무엇", "어떻", "떻게", "왜"})

    @pytest.mark.parametrize("text", ["北京是中国的首都" * 20_000, "가" * 100_000, "ก" * 50_000, "\u0301" * 100_000,
                                      "a\u0301" * 50_000, "1." * 50_000])
    def test_hostile_runs_are_linear(self, text: str) -> None:
        assert isinstance(script_tokens(text), list)
