"""RerankScorer and QueryLikelihoodScorer's checks, without models (the model test is in tests/bench/test_model_prep.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragtrim.errors import ConfigError, InputError
from ragtrim.pipeline import Pipeline
from ragtrim.scoring.rerank import QueryLikelihoodScorer, RerankScorer, as_question
from ragtrim.stages.relevance import RelevanceFilter
from ragtrim.testing import FixedScorer


class Recording:
    """A second-stage fake: a fixed score per text, and a record of what it was asked to score."""

    name = "recording"

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.calls: list[list[str]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append(list(texts))
        return [self.scores[t] for t in texts]


TEXTS = ["a", "b", "c", "d"]
FIRST = FixedScorer(scores={"a": 0.50, "b": 0.80, "c": 0.75, "d": 0.10})


def test_second_stage_reorders_the_head_only() -> None:
    second = Recording({"b": -4.0, "c": -1.0})
    scores = RerankScorer(FIRST, second, top_k=2, weight=0.2).score("q", TEXTS)
    assert second.calls == [["b", "c"]]  # only the first stage's top 2 are rescored
    assert scores[2] > scores[1]  # c: 0.75 - 0.2 beats b: 0.80 - 0.8
    assert min(scores[1], scores[2]) > scores[0] > scores[3]  # the head stays ahead; the rest keep their order
    assert scores[0] == 0.50 and scores[3] == 0.10


def test_weight_zero_keeps_the_first_order() -> None:
    scores = RerankScorer(FIRST, Recording({"b": -9.0, "c": 0.0}), top_k=2, weight=0.0).score("q", TEXTS)
    assert sorted(range(4), key=lambda i: -scores[i]) == [1, 2, 0, 3]


def test_top_k_larger_than_the_input_and_empty_input() -> None:
    second = Recording({t: 0.0 for t in TEXTS})
    assert len(RerankScorer(FIRST, second, top_k=10).score("q", TEXTS)) == 4
    assert second.calls == [TEXTS[:0] + ["b", "c", "a", "d"]]
    assert RerankScorer(FIRST, second).score("q", []) == []


def test_in_a_relevance_filter() -> None:
    scorer = RerankScorer(FIRST, Recording({"b": -4.0, "c": -1.0}), top_k=2)
    out = Pipeline([RelevanceFilter(scorer=scorer, top_k=1)]).run([{"id": t, "text": t} for t in TEXTS], query="q")
    assert [c.text for c in out.chunks] == ["c"]
    assert {r.chunk_id for r in out.removals} == {"a", "b", "d"}  # nothing lost without a trace


def test_rerank_scorer_checks() -> None:
    with pytest.raises(ConfigError, match="top_k"):
        RerankScorer(FIRST, Recording({}), top_k=0)
    with pytest.raises(ConfigError, match="weight"):
        RerankScorer(FIRST, Recording({}), weight=-1.0)
    with pytest.raises(ConfigError, match="second"):
        RerankScorer(FIRST, "bm25")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="first"):
        RerankScorer(3, Recording({}))  # type: ignore[arg-type]
    with pytest.raises(InputError):
        RerankScorer(FIRST, Recording({})).score("q", "a")


def test_query_likelihood_scorer_checks(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match="template"):
        QueryLikelihoodScorer("/m", template="no placeholder")
    with pytest.raises(ConfigError, match="dtype"):
        QueryLikelihoodScorer("/m", dtype="int4")
    with pytest.raises(ConfigError, match="model"):
        QueryLikelihoodScorer("")
    with pytest.raises(ConfigError, match="batch_size"):
        QueryLikelihoodScorer("/m", batch_size=0)
    assert QueryLikelihoodScorer("/m").score("q", []) == []  # nothing to score: no model load


def test_query_likelihood_scorer_needs_a_local_model_dir(tmp_path: object) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    with pytest.raises(ConfigError, match="config.json"):
        QueryLikelihoodScorer(str(tmp_path)).score("who wrote hamlet", ["Hamlet is a play by Shakespeare."])


@pytest.mark.parametrize(("query", "expected"), [
    ("who wrote hamlet", "Who wrote hamlet?"),
    ("  when did  it end ? ", "When did it end?"),
    ("Where is Paris?", "Where is Paris?"),
    ("", ""),
])
def test_as_question(query: str, expected: str) -> None:
    assert as_question(query) == expected


def test_warm_up_reaches_both_stages() -> None:
    class Warm(Recording):
        warmed = 0

        def warm_up(self) -> None:
            self.warmed += 1

    first, second = Warm({}), Warm({})
    RerankScorer(first, second).warm_up()
    assert (first.warmed, second.warmed) == (1, 1)
