"""The framework peers: the LlamaIndex cutoff search, Haystack's top_k, and (with the models) each peer end to end
on one request."""

from __future__ import annotations

import pytest

from ragtrim import WhitespaceCounter
from ragtrim_bench.peers.frameworks import cutoff_candidates, largest_fitting, prefix_that_fits

COUNTER = WhitespaceCounter()


class TestCutoffCandidates:
    def test_every_change_point_from_one_sentence_per_node(self) -> None:
        # nodes of 2 and 4 sentences: below 1/2 the 2-sentence node would keep 0 (read as "all")
        assert [round(p, 6) for p in cutoff_candidates([2, 4])] == [0.5, 0.75, 1.0]

    def test_int_of_n_times_p_reaches_k(self) -> None:
        for n in range(1, 30):
            for p in cutoff_candidates([n]):
                assert int(n * p) == round(n * p)  # never one short through float rounding

    def test_single_sentence_nodes(self) -> None:
        assert cutoff_candidates([1, 1]) == [1.0]

    def test_no_sentences(self) -> None:
        assert cutoff_candidates([]) == [1.0]
        assert cutoff_candidates([0, 0]) == [1.0]


class TestLargestFitting:
    def test_the_largest_that_fits(self) -> None:
        tokens = {0.25: 10, 0.5: 20, 0.75: 30, 1.0: 40}
        assert largest_fitting(list(tokens), tokens.__getitem__, 29) == 0.5
        assert largest_fitting(list(tokens), tokens.__getitem__, 30) == 0.75
        assert largest_fitting(list(tokens), tokens.__getitem__, 100) == 1.0

    def test_none_fits_gives_the_smallest(self) -> None:
        tokens = {0.25: 10, 0.5: 20}
        assert largest_fitting(list(tokens), tokens.__getitem__, 5) == 0.25

    def test_binary_search_evaluates_few(self) -> None:
        calls: list[float] = []
        candidates = [k / 64 for k in range(1, 65)]

        def tokens_at(p: float) -> int:
            calls.append(p)
            return int(p * 640)

        assert largest_fitting(candidates, tokens_at, 320) == 0.5
        assert len(calls) <= 8


class TestPrefixThatFits:
    def test_the_most_leading_texts_that_fit(self) -> None:
        assert prefix_that_fits(["a b", "c d", "e f"], 4, COUNTER) == 2

    def test_at_least_one(self) -> None:
        assert prefix_that_fits(["a b c d e"], 2, COUNTER) == 1

    def test_empty(self) -> None:
        assert prefix_that_fits([], 10, COUNTER) == 0


PASSAGES = (
    "The rollback window closes at 18:00 UTC on Friday. After that the release is frozen.",
    "Lunch is served in the main hall at noon. The menu changes every week.",
    "Parking is free on weekends for staff. Visitors pay at the gate.",
    "The weather is sunny today. Tomorrow brings rain from the west.",
)
QUESTION = "When does the rollback window close?"


@pytest.mark.model
@pytest.mark.parametrize("name", ["langchain", "llamaindex", "haystack"])
def test_each_framework_peer_runs_within_the_budget(name: str) -> None:
    from ragtrim import get_counter
    from ragtrim_bench.peers.rows import available_rows

    counter = get_counter(None)
    row = available_rows()[name]()
    full = counter.count("\n\n".join(PASSAGES))
    big = row.trim(PASSAGES, QUESTION, full)
    assert "18:00 UTC on Friday" in big.text and counter.count(big.text) <= full
    small = row.trim(PASSAGES, QUESTION, 25)
    assert counter.count(small.text) <= 25
    assert small.cut == (small.produced_tokens > 25)
    assert "18:00 UTC" in small.text  # the one relevant passage ranks first for every peer
