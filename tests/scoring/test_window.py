from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.window import WindowScorer, best_sentence_start, window_start


class Recording:
    """A model scorer that scores a text by its length and remembers what it read."""

    name = "recording"

    def __init__(self) -> None:
        self.read: list[list[str]] = []
        self.prefetched: list[list[str]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.read.append(list(texts))
        return [float(len(t)) for t in texts]

    def prefetch(self, query: str, texts: Sequence[str]) -> None:
        self.prefetched.append(list(texts))

    def scripts_read(self) -> frozenset[str]:
        return frozenset({"latin"})


PASSAGE = ("Cracker Barrel is an American chain of restaurants. The company was founded in 1969 in Lebanon. "
           "Its stores stand near highway exits. The chain operates 639 stores in 43 states of the United States.")


class TestWindowStart:
    def test_best_sentence_holds_most_query_words(self) -> None:
        text = "Alpha beta. Gamma tower river. Tower only."
        from ragtrim.text.sentences import sentence_spans

        assert best_sentence_start(frozenset({"tower", "river"}), text, sentence_spans(text)) == text.index("Gamma")
        assert best_sentence_start(frozenset({"nothing"}), text, sentence_spans(text)) == 0

    def test_short_text_or_empty_query_reads_from_the_start(self) -> None:
        assert window_start(frozenset({"stores"}), PASSAGE, fill_chars=len(PASSAGE)) == 0
        assert window_start(frozenset(), PASSAGE, fill_chars=10) == 0

    def test_moves_back_to_fill_the_window(self) -> None:
        last = PASSAGE.index("The chain")
        assert window_start(frozenset({"states", "united"}), PASSAGE, fill_chars=10) == last
        assert window_start(frozenset({"states", "united"}), PASSAGE, fill_chars=100) == PASSAGE.index("Its stores")


class TestWindowScorer:
    def test_invalid(self) -> None:
        with pytest.raises(ConfigError, match="fill_chars must be >= 1"):
            WindowScorer(scorer=Recording(), fill_chars=0)  # type: ignore[arg-type]

    def test_reads_the_lead_then_the_best_sentence(self) -> None:
        inner = Recording()
        scorer = WindowScorer(scorer=inner, fill_chars=60, lead_chars=40)  # type: ignore[arg-type]
        (window,) = scorer.windows("how many stores in the united states", [PASSAGE])
        assert window == "Cracker Barrel is an American chain of " + PASSAGE[PASSAGE.index("The chain"):]

    def test_best_first_sentence_reads_the_text(self) -> None:
        scorer = WindowScorer(scorer=Recording(), fill_chars=60)  # type: ignore[arg-type]
        assert scorer.windows("american restaurant chain cracker barrel", [PASSAGE]) == [PASSAGE]

    def test_without_lead(self) -> None:
        scorer = WindowScorer(scorer=Recording(), fill_chars=60, lead_chars=0)  # type: ignore[arg-type]
        assert scorer.windows("united states stores", [PASSAGE]) == [PASSAGE[PASSAGE.index("The chain"):]]

    def test_score_and_prefetch_read_the_same_windows(self) -> None:
        inner = Recording()
        scorer = WindowScorer(scorer=inner, fill_chars=60)  # type: ignore[arg-type]
        texts = [PASSAGE, "short text"]
        scorer.prefetch("united states stores", texts)
        scores = scorer.score("united states stores", texts)
        assert inner.read == inner.prefetched == [scorer.windows("united states stores", texts)]
        assert scores == [float(len(w)) for w in inner.read[0]]
        assert scorer.score("q", []) == []

    def test_delegates_name_and_scripts(self) -> None:
        scorer = WindowScorer(scorer=Recording())  # type: ignore[arg-type]
        assert scorer.name == "window(recording)"
        assert scorer.scripts_read() == frozenset({"latin"})
