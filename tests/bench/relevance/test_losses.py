from __future__ import annotations

from ragtrim import trim
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim_bench.relevance.columns import Request
from ragtrim_bench.relevance.losses import classify, gold_rank, question_words_in_gold, resolve_scorer

GOLD = "The Eiffel Tower is 330 metres tall. It stands in Paris."
OTHERS = ["The tower of Pisa leans.", "Tall buildings stand in many cities.", "Paris is the capital of France."]


def request(passages: list[str], gold_index: int) -> Request:
    return Request(column="toy", split="dev", id="r0", question="How tall is the Eiffel Tower?", answers=("330",),
                   passages=tuple(passages), gold_index=gold_index)


def test_gold_rank_counts_better_scores_and_earlier_ties() -> None:
    assert gold_rank(BM25Scorer(), request([*OTHERS, GOLD], 3)) == 1
    assert gold_rank(BM25Scorer(), request([GOLD, GOLD], 1)) == 2  # a tie goes to the earlier passage


def test_a_gold_chunk_that_compression_dropped() -> None:
    chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate([*OTHERS, GOLD])]
    result = trim(chunks, query="capital of France", budget=8, scorer="bm25")
    assert "330" not in result.text
    cause, detail = classify(result, "p3")
    assert cause == "compressed out" and detail


def test_a_gold_chunk_kept_without_its_answer() -> None:
    long_gold = GOLD + " " + " ".join(f"Paris has museum number {i} and many visitors." for i in range(12))
    chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate([*OTHERS, long_gold])]
    result = trim(chunks, query="museums and visitors in Paris", budget=30, scorer="bm25")
    assert "330" not in result.text and any(c.id == "p3" for c in result.chunks)
    assert classify(result, "p3")[0] == "answer cut"


def test_a_kept_whole_gold_is_other() -> None:
    chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate([*OTHERS, GOLD])]
    result = trim(chunks, query="How tall is the Eiffel Tower?", scorer="bm25")
    assert classify(result, "p3") == ("other", "")


def test_question_words_in_gold() -> None:
    # "tall", "eiffel", "tower": all three in the gold (stems: "towers" meets "tower")
    assert question_words_in_gold("How tall are the Eiffel towers?", GOLD) == 1.0
    assert question_words_in_gold("What does the table show?", "Loans payable are summarized as follows:") == 0.0
    assert question_words_in_gold("How tall is Big Ben?", GOLD) == 1 / 3
    assert question_words_in_gold("What is it?", GOLD) == 0.0  # no content word at all


def test_a_scorer_by_name_or_by_the_function_that_builds_it() -> None:
    scorer, passed = resolve_scorer("ragtrim.scoring.bm25:BM25Scorer")
    assert isinstance(scorer, BM25Scorer) and passed is scorer
    scorer, passed = resolve_scorer("bm25")
    assert isinstance(scorer, BM25Scorer) and passed == "bm25"
