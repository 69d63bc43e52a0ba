"""Korean morphemes through kiwipiepy (the ``ko`` extra; installed by ``make test-models``)."""

from __future__ import annotations

import sys

import pytest

from ragtrim.errors import MissingDependencyError


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrim.scoring import bm25
    from ragtrim.text import korean

    monkeypatch.setattr(korean, "_KIWI", None)
    monkeypatch.setitem(sys.modules, "kiwipiepy", None)  # import kiwipiepy raises ImportError
    bm25.clear_tokenizer_cache()
    with pytest.raises(MissingDependencyError, match=r"ragtrim\[ko\]"):
        bm25.BM25Scorer(analyzer="kiwi").score("요금제의 한도는?", ["요금제 한도"])
    # text without Hangul never needs the model
    assert bm25.BM25Scorer(analyzer="kiwi").score("plan limit", ["the plan limit", "other"])[0] > 0


@pytest.mark.model
class TestKiwi:
    @pytest.fixture(autouse=True)
    def _needs_kiwi(self) -> None:
        pytest.importorskip("kiwipiepy", reason="the ko extra is not installed (pip install 'ragtrim[ko]')")

    def test_particles_and_endings_are_stripped(self) -> None:
        from ragtrim.text.korean import morphemes

        assert morphemes("요금제의 월 한도는 무엇인가?", stopwords=True) == ["요금", "제", "월", "한도", "이"]
        assert "무엇" in morphemes("요금제의 월 한도는 무엇인가?", stopwords=False)

    def test_morphemes_come_before_the_bigrams(self) -> None:
        from ragtrim.scoring.bm25 import tokenize

        assert tokenize("한도는", analyzer="kiwi") == ["한도", "한도", "도는"]
        assert tokenize("Plan limit", analyzer="kiwi") == ["plan", "limit"]

    def test_scores_the_morpheme_match(self) -> None:
        from ragtrim.scoring.bm25 import BM25Scorer

        scorer = BM25Scorer(analyzer="kiwi")
        scorer.warm_up()
        texts = ["이 요금제 월 한도 5만 원입니다.", "서울은 대한민국의 수도이다."]
        scores = scorer.score("요금제의 월 한도는?", texts)
        assert scores[0] > 0 and scores[1] == 0.0
