"""Scorers: BM25 tokenization and ranking, fusion arithmetic, the fixed fake, and (marked) MiniLM embeddings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.errors import ConfigError, InputError
from ragtrim.scoring.base import Scorer
from ragtrim.scoring.bm25 import BM25Scorer, bm25_okapi, prime_tokens, tokenize
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.scoring.hybrid import HybridScorer, min_max, rrf_contribution
from ragtrim.scoring.registry import get_scorer
from ragtrim.testing import FixedScorer


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


class TestFusion:
    def test_min_max(self) -> None:
        assert min_max(np.array([1.0, 3.0, 2.0])).tolist() == [0.0, 1.0, 0.5]
        assert min_max(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]

    def test_rrf_ties_share_the_better_rank(self) -> None:
        out = rrf_contribution(np.array([5.0, 5.0, 1.0]), 60)
        assert out.tolist() == [1 / 61, 1 / 61, 1 / 63]

    def test_mix_of_fixed_scorers(self) -> None:
        a = FixedScorer(scores=[0.0, 10.0, 5.0])
        b = FixedScorer(scores=[1.0, 0.0, 0.5])
        h = HybridScorer(scorers=(a, b), method="mix", weights=(3.0, 1.0))
        assert h.score("q", ["x", "y", "z"]) == pytest.approx([0.25, 0.75, 0.5])

    def test_rrf_of_fixed_scorers(self) -> None:
        a = FixedScorer(scores=[3.0, 2.0, 1.0])
        b = FixedScorer(scores=[1.0, 2.0, 3.0])
        h = HybridScorer(scorers=(a, b), method="rrf", rrf_k=0)
        assert h.score("q", ["x", "y", "z"]) == pytest.approx([(1 + 1 / 3) / 2, (1 / 2 + 1 / 2) / 2, (1 / 3 + 1) / 2])

    def test_invalid_parameters(self) -> None:
        with pytest.raises(ConfigError, match="method"):
            HybridScorer(method="sum")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="weights must have one entry"):
            HybridScorer(scorers=("bm25",), weights=(1.0, 2.0))
        with pytest.raises(ConfigError, match="scorers must be"):
            HybridScorer(scorers=())
        with pytest.raises(ConfigError, match=r"scorers\[0\] must be one of \['bm25', 'embedding', 'fast', 'hybrid'\]"):
            HybridScorer(scorers=("tfidf",))  # any named scorer may be a part (it was bm25 and embedding only)
        with pytest.raises(ConfigError, match="weights must not all be 0"):
            HybridScorer(scorers=("bm25",), weights=(0.0,))

    def test_empty_texts(self) -> None:
        assert HybridScorer(scorers=(FixedScorer(scores=[]),)).score("q", []) == []


class TestFixedScorer:
    def test_by_text_and_by_position(self) -> None:
        assert FixedScorer(scores={"a": 2.0}).score("q", ["a", "b"]) == [2.0, 0.0]
        assert FixedScorer(scores=[1.0], default=-1.0).score("q", ["a", "b"]) == [1.0, -1.0]

    def test_is_a_scorer(self) -> None:
        assert isinstance(FixedScorer(scores=[]), Scorer)

    def test_invalid(self) -> None:
        with pytest.raises(ConfigError, match="scores must be"):
            FixedScorer(scores="abc")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"scores\[0\]"):
            FixedScorer(scores=[float("nan")])


class TestGetScorer:
    def test_names_are_shared(self) -> None:
        assert get_scorer("bm25") is get_scorer("bm25")
        assert isinstance(get_scorer("hybrid"), HybridScorer)

    def test_passes_objects_through(self) -> None:
        s = FixedScorer(scores=[])
        assert get_scorer(s) is s

    def test_unknown(self) -> None:
        with pytest.raises(ConfigError, match="unknown scorer 'tfidf'"):
            get_scorer("tfidf")
        with pytest.raises(ConfigError, match="scorer must be"):
            get_scorer(42)  # type: ignore[arg-type]

    def test_primed_embeddings_score_without_a_model(self) -> None:
        e = EmbeddingScorer(model="/nonexistent/model")
        e.prime(["q", "a", "b"], [[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
        assert e.score("q", ["a", "b"]) == pytest.approx([1.0, 0.0])
        with pytest.raises(InputError, match="one row per text"):
            e.prime(["x"], [[1.0], [2.0]])

    def test_embedding_constructor_loads_nothing(self) -> None:
        e = EmbeddingScorer(batch_size=8)
        assert e._cache == {} and e.batch_size == 8
        with pytest.raises(ConfigError, match="batch_size"):
            EmbeddingScorer(batch_size=0)


@pytest.mark.model
class TestEmbeddingScorerModel:
    def test_minilm_ranks_paraphrase_first(self) -> None:
        e = EmbeddingScorer()
        scores = e.score("Who wrote Hamlet?", ["The tragedy Hamlet is by William Shakespeare.",
                                               "Bananas are rich in potassium."])
        assert scores[0] > scores[1]

    def test_cache_makes_repeats_free(self) -> None:
        e = EmbeddingScorer(cache_size=10)
        first = e.embed(["alpha text", "beta text"])
        assert len(e._cache) == 2
        again = e.embed(["beta text", "alpha text"])
        assert np.allclose(first[::-1], again)
        assert first.shape == (2, 384)
        assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)


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


class TestBackgroundThread:
    def test_a_task_has_started_when_submit_returns_and_busy_tracks_it(self) -> None:
        import threading

        from ragtrim._util.background import background_busy, submit_background

        started, release = threading.Event(), threading.Event()

        def task() -> int:
            started.set()
            release.wait(5)
            return 7

        future = submit_background(task)
        assert started.is_set() and background_busy()  # no interpreter switch interval before it began
        release.set()
        assert future.result(5) == 7
        for _ in range(100):  # the done callback runs right after the result is set
            if not background_busy():
                break
            threading.Event().wait(0.01)
        assert not background_busy()


class TestWarmUpOnce:
    def test_a_model_scorer_runs_its_warm_up_pass_once(self) -> None:
        from collections.abc import Sequence

        from ragtrim.scoring.embedding import CachedEmbedder

        class Model(CachedEmbedder):
            warms_up = True
            passes = 0

            @property
            def name(self) -> str:
                return "model"

            def _encode(self, texts: Sequence[str]) -> np.ndarray:
                Model.passes += 1
                return np.ones((len(texts), 2), dtype=np.float32)

        scorer = Model()
        for _ in range(3):
            scorer.warm_up()
        assert Model.passes == 1

    def test_a_plain_cached_embedder_does_not_warm_up(self) -> None:
        from collections.abc import Sequence

        from ragtrim.scoring.embedding import CachedEmbedder

        class Plain(CachedEmbedder):
            @property
            def name(self) -> str:
                return "plain"

            def _encode(self, texts: Sequence[str]) -> np.ndarray:
                raise AssertionError("warm_up must not encode")

        Plain().warm_up()
