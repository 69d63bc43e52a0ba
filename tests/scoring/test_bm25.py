"""BM25: tokenization, the scorer, tokens primed from sentences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.errors import ConfigError, InputError
from ragtrim.scoring.bm25 import BM25Scorer, bm25_okapi, prime_tokens, query_text, tokenize
from ragtrim.text.stem import light_stem


class TestTokenize:
    def test_lowercase_punctuation_stopwords(self) -> None:
        assert tokenize("When did The Beatles' last album come out?") == ["beatles", "last", "album", "come", "out"]

    def test_numbers_kept_whole(self) -> None:
        assert tokenize("It cost 1,000 dollars, or 3.5% in 1999.") == ["cost", "1000", "dollars", "3.5", "1999"]

    def test_without_stopwords(self) -> None:
        assert tokenize("the cat", stopwords=False) == ["the", "cat"]

    def test_every_script(self) -> None:
        assert tokenize("요금제의 월 한도는?") == ["요금", "금제", "제의", "월", "한도", "도는"]
        assert tokenize("東京タワーの高さは？") == ["東京", "京タ", "タワ", "ワー", "ーの", "の高", "高さ", "さは"]
        assert tokenize("İstanbul'un nüfusu") == ["istanbul", "un", "nüfusu"]
        assert tokenize("सीमा क्या है?") == ["सीमा", "क्या", "है"]

    def test_cjk_question_words_are_stopwords(self) -> None:
        assert tokenize("한도는 무엇인가?") == ["한도", "도는", "엇인", "인가"]
        assert tokenize("한도는 무엇인가?", stopwords=False)[2:4] == ["무엇", "엇인"]
        assert "什么" not in tokenize("上海是什么") and "いつ" not in tokenize("いつ行く")

    def test_stem_on_request(self) -> None:
        assert tokenize("It was governed by the laws", stem=True) == ["govern", "law"]
        assert tokenize("It was governed by the laws") == ["governed", "laws"]

    def test_query_question_words_are_cut_before_bigrams(self) -> None:
        assert tokenize(query_text("他司职什么位置")) == ["他司", "司职", "位置"]  # not 职什, 么位
        assert tokenize(query_text("한도는 무엇인가?")) == ["한도", "도는", "인가"]  # not 엇인
        assert query_text("What is it?") == "What is it?"

    @pytest.mark.parametrize(("query", "expected"), [
        ("他何时出生", ["他", "出生"]),  # not 他何, 时出
        ("公司为何破产", ["公司", "破产"]),  # not 司为, 何破
        ("这座桥建于几年", ["这座", "座桥", "桥建", "建于", "年"]),  # not 于几, 几年
        ("東京タワーは何メートル", ["東京", "京タ", "タワ", "ワー", "ーは", "メー", "ート", "トル"]),  # not は何, 何メ
        ("誰が書いた本", ["が書", "書い", "いた", "た本"]),  # not 誰が
    ])
    def test_more_chinese_and_japanese_question_words(self, query: str, expected: list[str]) -> None:
        assert tokenize(query_text(query)) == expected

    def test_unknown_analyzer(self) -> None:
        with pytest.raises(ConfigError, match="analyzer"):
            tokenize("x", analyzer="icu")  # type: ignore[arg-type]

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80), st.booleans())
    def test_ascii_path_equals_the_script_analyzer(self, text: str, stopwords: bool) -> None:
        """ASCII text skips the script analyzer (English tokens are exactly as before it existed); on ASCII both
        give the same tokens, which ``prime_tokens`` relies on when a passage mixes ASCII and other sentences."""
        from itertools import filterfalse

        from ragtrim.scoring import bm25
        from ragtrim.text.analyzer import script_tokens

        toks = script_tokens(text.lower())
        expected = list(filterfalse(bm25._ALL_STOPWORDS.__contains__, toks)) if stopwords else toks
        assert tokenize(text, stopwords=stopwords) == expected


class TestBM25Scorer:
    def test_word_forms_match(self) -> None:
        texts = ["This Agreement shall be governed by the laws of Delaware.", "Notices shall be in writing."]
        assert BM25Scorer().score("governing law", texts)[0] > 0
        assert BM25Scorer(stem=False).score("governing law", texts)[0] == 0.0

    def test_a_junk_bigram_around_a_question_word_matches_nothing(self) -> None:
        """"要么位于" shares 么位 with "什么位置" only across the question word 什么."""
        assert BM25Scorer().score("他司职什么位置", ["他司职前锋位置", "要么位于北京"])[1] == 0.0
        assert BM25Scorer(stopwords=False).score("他司职什么位置", ["他司职前锋位置", "要么位于北京"])[1] > 0

    def test_ranks_the_matching_text_first(self) -> None:
        texts = ["The cat sat on the mat.", "Paris is the capital of France.", "Dogs bark at night."]
        scores = BM25Scorer().score("capital of France", texts)
        assert scores.index(max(scores)) == 1
        assert scores[0] == 0.0 and scores[2] == 0.0

    def test_empty_corpus_and_empty_texts(self) -> None:
        assert BM25Scorer().score("anything", []) == []
        assert BM25Scorer().score("anything", ["", "  "]) == [0.0, 0.0]

    def test_query_without_content_words(self) -> None:
        assert BM25Scorer().score("what is the", ["a cat", "a dog"]) == [0.0, 0.0]

    def test_invalid_parameters(self) -> None:
        with pytest.raises(ConfigError, match="k1"):
            BM25Scorer(k1=-1)
        with pytest.raises(ConfigError, match="b must be"):
            BM25Scorer(b=2.0)

    def test_single_str_is_rejected(self) -> None:
        with pytest.raises(InputError, match="single str"):
            BM25Scorer().score("q", "not a list")

    def test_okapi_arithmetic(self) -> None:
        # one query term, three docs of length 2; tf 2, 0, 0; idf = log(1 + (3 - 1 + .5) / (1 + .5))
        out = bm25_okapi(np.array([[2.0, 0.0, 0.0]]), np.array([2.0, 2.0, 2.0]), k1=1.0, b=0.75)
        idf = np.log(1 + 2.5 / 1.5)
        assert out.tolist() == pytest.approx([idf * 2 * 2 / (2 + 1.0), 0.0, 0.0])

    def test_single_text_scores_positive(self) -> None:
        assert BM25Scorer().score("cat", ["the cat sat"])[0] > 0

    def test_korean_particles_do_not_hide_the_match(self) -> None:
        """Whole-word tokens scored ``요금제의 한도는`` 0 against ``요금제 ... 한도``; bigrams match."""
        texts = ["이 요금제 월 한도 5만 원입니다.", "서울은 대한민국의 수도이다.", "회의는 오후 3시에 끝났다."]
        scores = BM25Scorer().score("요금제의 월 한도는?", texts)
        assert scores[0] > 0 and scores[1:] == [0.0, 0.0]

    def test_japanese_and_chinese_score(self) -> None:
        scores = BM25Scorer().score("東京の人口", ["東京の人口は約1400万人だ。", "大阪は商業の町だ。"])
        assert scores[0] > scores[1]
        scores = BM25Scorer().score("北京的历史", ["北京有三千多年的历史。", "上海是最大的城市。"])
        assert scores[0] > scores[1]

    def test_analyzer_parameter(self) -> None:
        assert BM25Scorer().analyzer == "script" and BM25Scorer().name == "bm25"
        assert BM25Scorer(analyzer="kiwi").name == "bm25-kiwi"  # no model is loaded to build it
        with pytest.raises(ConfigError, match="analyzer"):
            BM25Scorer(analyzer="icu")  # type: ignore[arg-type]


class TestPrimeTokens:
    """``prime_tokens`` caches a passage's BM25 tokens as the join of its sentences': only where that is exact."""

    _ALPHABET = list("ab AB Σσ9,.!?\n\t") + ["1,000", "3.5", "the", "İ", "ﬁ", "é", "e\u0301", "\u0301", "\x1c", "\xa0",
                                            "ΟΔΟΣ", ". The", ".\n\n", "U.S.", "\u2028", "한도", "東京", "。", "」",
                                            "！", "?", "।", "ก ข", "「", "무엇", "\n| a |", "\n- "]

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(_ALPHABET), max_size=40).map("".join), st.booleans())
    def test_cached_tokens_equal_a_direct_tokenization(self, text: str, stopwords: bool) -> None:
        from ragtrim.scoring import bm25
        from ragtrim.text.sentences import sentence_spans

        bm25.clear_tokenizer_cache()
        prime_tokens(text, sentence_spans(text), stopwords=stopwords, stem=True)
        assert tokenize(text, stopwords=stopwords) == list(bm25._tokens._fn(text, stopwords))
        assert tokenize(text, stopwords=stopwords, stem=True) == [light_stem(t) for t in
                                                                 bm25._tokens._fn(text, stopwords)]

    def test_primes_stems_as_the_join_of_the_sentences_stems(self) -> None:
        from ragtrim.scoring import bm25
        from ragtrim.text.sentences import sentence_spans

        bm25.clear_tokenizer_cache()
        text = "The clauses governed the parties. Transfers are prohibited."
        prime_tokens(text, sentence_spans(text), stem=True)
        assert bm25._stemmed.cache.get((text, True)) == ("claus", "govern", "party", "transfer", "prohibit")
        bm25.clear_tokenizer_cache()
        prime_tokens(text, sentence_spans(text))  # stems only when asked
        assert bm25._stemmed.cache.get((text, True)) is None
        prime_tokens("alpha beta", [(0, 3), (3, 10)], stem=True)  # no exact join of tokens: no join of stems either
        assert bm25._stemmed.cache.get(("alpha beta", True)) is None

    def test_primes_a_plain_passage_and_declines_cuts_inside_words(self) -> None:
        from ragtrim.scoring import bm25
        from ragtrim.text.sentences import sentence_spans

        bm25.clear_tokenizer_cache()
        plain = "The tower is 330 m tall. It was built in 1889. Paris, 1,000 visitors."
        prime_tokens(plain, sentence_spans(plain))
        assert bm25._tokens.cache.get((plain, True)) is not None
        decomposed = "Cafe\u0301 opened. It was full."  # NFKC composes é inside a sentence: the join is still exact
        prime_tokens(decomposed, sentence_spans(decomposed))
        assert bm25._tokens.cache.get((decomposed, True)) == ("café", "opened", "full")
        for text, spans in (("alpha beta", [(0, 3), (3, 10)]), ("東京タワー", [(0, 2), (2, 5)])):
            prime_tokens(text, spans)  # a cut inside a word or a bigram run: the join would be wrong
            assert bm25._tokens.cache.get((text, True)) is None

    def test_primes_cjk_passages_cut_without_a_space(self) -> None:
        """Chinese and Japanese sentences end in 。 with no space: their join is exact and is cached too (a
        whitespace-only rule tokenized every CJK passage twice)."""
        from ragtrim.scoring import bm25
        from ragtrim.text.sentences import sentence_spans

        bm25.clear_tokenizer_cache()
        for text in ("東京は日本の首都である。人口は約1400万人だ！本当？（はい）", "서울은 수도이다. 인구는 940만 명이다."):
            prime_tokens(text, sentence_spans(text))
            assert bm25._tokens.cache.get((text, True)) == bm25._tokens._fn(text, True)

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
    def test_ascii_pattern_finds_the_unicode_patterns_tokens(self, text: str) -> None:
        from ragtrim.scoring import bm25

        lowered = text.lower()
        assert bm25._WORD_ASCII.findall(lowered) == bm25._WORD.findall(lowered)
