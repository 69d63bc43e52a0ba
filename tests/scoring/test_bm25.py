"""BM25: tokenization, the scorer, tokens primed from sentences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.errors import ConfigError, InputError
from ragtrim.scoring.bm25 import BM25Scorer, bm25_okapi, prime_tokens, tokenize


class TestTokenize:
    def test_lowercase_punctuation_stopwords(self) -> None:
        assert tokenize("When did The Beatles' last album come out?") == ["beatles", "last", "album", "come", "out"]

    def test_numbers_kept_whole(self) -> None:
        assert tokenize("It cost 1,000 dollars, or 3.5% in 1999.") == ["cost", "1000", "dollars", "3.5", "1999"]

    def test_without_stopwords(self) -> None:
        assert tokenize("the cat", stopwords=False) == ["the", "cat"]


class TestBM25Scorer:
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


class TestPrimeTokens:
    """``prime_tokens`` caches a passage's BM25 tokens as the join of its sentences': only where that is exact."""

    _ALPHABET = list("ab AB Σσ9,.!?\n\t") + ["1,000", "3.5", "the", "İ", "ﬁ", "é", "e\u0301", "\u0301", "\x1c", "\xa0",
                                            "ΟΔΟΣ", ". The", ".\n\n", "U.S.", "\u2028"]

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(_ALPHABET), max_size=40).map("".join), st.booleans())
    def test_cached_tokens_equal_a_direct_tokenization(self, text: str, stopwords: bool) -> None:
        from ragtrim.scoring import bm25
        from ragtrim.text.sentences import sentence_spans

        bm25.clear_tokenizer_cache()
        prime_tokens(text, sentence_spans(text), stopwords=stopwords)
        assert tokenize(text, stopwords=stopwords) == list(bm25._tokens._fn(text, stopwords))

    def test_primes_a_plain_passage_and_declines_a_non_normalized_one(self) -> None:
        from ragtrim.scoring import bm25
        from ragtrim.text.sentences import sentence_spans

        bm25.clear_tokenizer_cache()
        plain = "The tower is 330 m tall. It was built in 1889. Paris, 1,000 visitors."
        prime_tokens(plain, sentence_spans(plain))
        assert bm25._tokens.cache.get((plain, True)) is not None
        decomposed = "Cafe\u0301 opened. It was full."  # NFKC composes é: tokenizing the whole text is needed
        prime_tokens(decomposed, sentence_spans(decomposed))
        assert bm25._tokens.cache.get((decomposed, True)) is None
        assert tokenize(decomposed) == ["café", "opened", "full"]

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
    def test_ascii_pattern_finds_the_unicode_patterns_tokens(self, text: str) -> None:
        from ragtrim.scoring import bm25

        lowered = text.lower()
        assert bm25._WORD_ASCII.findall(lowered) == bm25._WORD.findall(lowered)
