"""RelevanceFilter: scoring, the top-k cap, the adaptive cut-offs, and the trace."""

from __future__ import annotations

import pytest

from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, TrimContext, TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import stage_from_dict
from ragtrim.stages.relevance import RelevanceFilter, adaptive_keep_count
from ragtrim.testing import FixedScorer
from ragtrim.text.tokens import WhitespaceCounter


def run(stage: RelevanceFilter, chunks: list[object], query: str = "q") -> TrimResult:
    return Pipeline([stage], tokenizer="whitespace").run(chunks, query=query)


SCORES = [0.9, 0.1, 0.8, 0.3, 0.85]
TEXTS = ["a", "b", "c", "d", "e"]


def fixed() -> FixedScorer:
    return FixedScorer(scores=SCORES)


class TestRelevanceFilter:
    def test_defaults(self) -> None:
        s = RelevanceFilter()
        assert s.get_params() == {"scorer": "bm25", "mode": "top_k", "top_k": 5, "min_keep": 1,
                                  "relative_threshold": 0.5, "gap_threshold": 0.25, "keep_scores": True}
        assert s.to_dict()["type"] == "relevance"

    def test_round_trip(self) -> None:
        s = stage_from_dict({"type": "relevance", "mode": "gap", "top_k": None, "scorer": "bm25"})
        assert isinstance(s, RelevanceFilter) and s.mode == "gap" and s.top_k is None

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"scorer": "tfidf"}, "scorer must be one of"),
            ({"scorer": 3}, "scorer must be one of"),
            ({"mode": "best"}, "mode must be one of"),
            ({"top_k": 0}, "top_k must be >= 1, got 0"),
            ({"top_k": 2.5}, "top_k must be an int"),
            ({"min_keep": -1}, "min_keep must be >= 0"),
            ({"relative_threshold": 1.5}, "relative_threshold must be <= 1"),
            ({"gap_threshold": 0.0}, "gap_threshold must be > 0"),
            ({"keep_scores": 1}, "keep_scores must be True or False"),
        ],
    )
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            RelevanceFilter(**kwargs)  # type: ignore[arg-type]

    def test_empty(self) -> None:
        assert run(RelevanceFilter(), []).chunks == ()

    def test_single_chunk(self) -> None:
        # Nothing to rank: the chunk is kept as it came (the caller's score, or none), and no scorer runs.
        calls: list[str] = []

        class Recording(FixedScorer):
            def score(self, query: str, texts: object) -> list[float]:  # type: ignore[override]
                calls.append(query)
                return [1.0]

            def warm_up(self) -> None:
                calls.append("warm_up")

        r = run(RelevanceFilter(scorer=Recording(scores=[1.0]), top_k=1), ["the cat sat"], query="cat")
        assert [(c.text, c.score) for c in r.chunks] == [("the cat sat", None)] and calls == []
        assert r.trace[0].info == {"scored": False}
        given = run(RelevanceFilter(scorer="given"), [{"text": "the cat sat", "score": 0.4}], query="cat")
        assert given.chunks[0].score == 0.4

    def test_two_chunks_are_ranked(self) -> None:
        r = run(RelevanceFilter(top_k=1), ["the cat sat", "a dog ran"], query="cat")
        assert [c.text for c in r.chunks] == ["the cat sat"]
        assert r.chunks[0].score is not None and r.chunks[0].score > 0

    def test_top_k_keeps_best_in_input_order_and_sets_scores(self) -> None:
        r = run(RelevanceFilter(scorer=fixed(), top_k=3), TEXTS)
        assert [c.text for c in r.chunks] == ["a", "c", "e"]
        assert [c.score for c in r.chunks] == [0.9, 0.8, 0.85]

    def test_trace(self) -> None:
        r = run(RelevanceFilter(scorer=fixed(), top_k=3), TEXTS)
        assert [(x.chunk_id, x.reason, x.action, x.tokens_removed, x.detail) for x in r.removals] == [
            ("1", "below_top_k", "dropped", 1, "score 0.1 rank 5 of 5"),
            ("3", "below_top_k", "dropped", 1, "score 0.3 rank 4 of 5"),
        ]

    def test_bm25_behaviour(self) -> None:
        chunks = ["Paris is the capital of France.", "Bananas are yellow.", "France borders Spain."]
        r = run(RelevanceFilter(top_k=1), chunks, query="What is the capital of France?")
        assert [c.id for c in r.chunks] == ["0"]

    def test_top_k_none_only_scores(self) -> None:
        r = run(RelevanceFilter(scorer=fixed(), top_k=None), TEXTS)
        assert [c.score for c in r.chunks] == SCORES and r.removals == ()

    def test_relative_mode(self) -> None:
        # shifted by the worst (0.1): range 0.8; keep s - 0.1 >= 0.5 * 0.8 -> s >= 0.5: a, c, e
        r = run(RelevanceFilter(scorer=fixed(), mode="relative", top_k=None), TEXTS)
        assert [c.text for c in r.chunks] == ["a", "c", "e"]
        assert {x.reason for x in r.removals} == {"low_relevance"}

    def test_gap_mode(self) -> None:
        # sorted 0.9 .85 .8 .3 .1; range .8; first drop >= .2 is .8 -> .3
        r = run(RelevanceFilter(scorer=fixed(), mode="gap", top_k=None), TEXTS)
        assert [c.text for c in r.chunks] == ["a", "c", "e"]

    def test_adaptive_cap_reports_below_top_k(self) -> None:
        r = run(RelevanceFilter(scorer=fixed(), mode="gap", top_k=2), TEXTS)
        assert [c.text for c in r.chunks] == ["a", "e"]
        assert {x.chunk_id: x.reason for x in r.removals} == {"2": "below_top_k", "3": "low_relevance",
                                                              "1": "low_relevance"}

    def test_min_keep(self) -> None:
        r = run(RelevanceFilter(scorer=fixed(), mode="relative", relative_threshold=1.0, top_k=None, min_keep=2),
                TEXTS)
        assert [c.text for c in r.chunks] == ["a", "e"]

    def test_pinned_always_kept(self) -> None:
        chunks = [{"text": t} for t in TEXTS]
        chunks[1]["pinned"] = True  # type: ignore[index]
        r = run(RelevanceFilter(scorer=fixed(), top_k=1), chunks)
        assert [c.text for c in r.chunks] == ["a", "b"]

    def test_empty_query_passes_through(self) -> None:
        r = run(RelevanceFilter(scorer=fixed(), top_k=1), TEXTS, query="")
        assert [c.text for c in r.chunks] == TEXTS and r.removals == ()

    def test_no_input_mutation(self) -> None:
        chunks = tuple(Chunk(text=t, id=str(i), token_count=1) for i, t in enumerate(TEXTS))
        ctx = TrimContext(query="q", chunks=chunks)
        RelevanceFilter(scorer=fixed(), top_k=2).run(ctx, counter=WhitespaceCounter())
        assert ctx.chunks == chunks and all(c.score is None for c in ctx.chunks)


class TestAdaptiveKeepCount:
    def test_flat_scores_keep_all(self) -> None:
        assert adaptive_keep_count([1.0, 1.0], mode="gap", relative_threshold=0.5, gap_threshold=0.2) == 2

    def test_negative_scores(self) -> None:
        assert adaptive_keep_count([-0.1, -0.2, -0.9], mode="relative", relative_threshold=0.5,
                                   gap_threshold=0.2) == 2
