from ragtrim_bench.qa_metrics import (
    answer_in_text,
    answer_substring_in_text,
    best_subspan_em,
    normalize_answer,
)


class TestNormalizeAnswer:
    def test_lowercase_punctuation_articles_whitespace(self) -> None:
        assert normalize_answer("  The  Quick, brown fox!  ") == "quick brown fox"

    def test_articles_only_as_words(self) -> None:
        assert normalize_answer("Theatre an Anthem") == "theatre anthem"

    def test_empty(self) -> None:
        assert normalize_answer("") == ""


class TestAnswerInText:
    def test_found_after_normalization(self) -> None:
        assert answer_in_text(["May 18, 2018"], "released on may 18 2018 in the US")

    def test_whole_words_only(self) -> None:
        assert not answer_in_text(["1"], "in 1990")
        assert answer_substring_in_text(["1"], "in 1990")

    def test_any_answer(self) -> None:
        assert answer_in_text(["nope", "Paris"], "Paris is big")

    def test_empty_answers_never_match(self) -> None:
        assert not answer_in_text([], "anything")
        assert not answer_in_text(["The"], "the answer")

    def test_empty_text(self) -> None:
        assert not answer_in_text(["x"], "")


class TestBestSubspanEm:
    def test_paper_semantics(self) -> None:
        assert best_subspan_em("It was in 1990.", ["1990"]) == 1.0
        assert best_subspan_em("It was in 1991.", ["1990"]) == 0.0
