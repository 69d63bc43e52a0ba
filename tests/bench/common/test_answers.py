from ragtrim_bench.common.answers import (
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


def squad_official_normalize_answer(s: str) -> str:
    """The official SQuAD evaluation script's ``normalize_answer`` (evaluate-v1.1.py / evaluate-v2.0.py), retyped
    as the reference: lower, delete ``string.punctuation``, drop a/an/the, collapse whitespace."""
    import re
    import string

    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


class TestSquadNormalization:
    """Every benchmark's answer recall uses SQuAD's normalisation: punctuation is deleted, not replaced by a space
    (so "Caroline's" is "carolines", and "3:00" is "300")."""

    CASES = ("Caroline's", "3:00 p.m.", "U.S.A.", "The Eiffel-Tower", "  an apple, a pear & the fig!  ", "don't",
             "x.y.z", "Ünïcödé «quoted» — dash", "東京タワー。", "e.g. 1,000,000", "the", "", "A\tB\nC", "anthem the")

    def test_matches_the_official_script(self) -> None:
        for text in self.CASES:
            assert normalize_answer(text) == squad_official_normalize_answer(text), text

    def test_deletes_punctuation(self) -> None:
        assert normalize_answer("Caroline's") == "carolines"
        assert answer_in_text(["Caroline's"], "it was carolines idea")
        assert not answer_in_text(["Caroline's"], "it was caroline s idea")

    def test_is_the_librarys(self) -> None:
        import ragtrim.savings

        assert normalize_answer is ragtrim.savings.normalize_answer
