"""Reorder: each strategy's permutation, and that nothing is dropped or changed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, TrimContext, TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages.base import stage_from_dict
from ragtrim.stages.order import Reorder, lost_in_the_middle_order
from ragtrim.text.tokens import WhitespaceCounter


def run(stage: Reorder, chunks: list[object]) -> TrimResult:
    return Pipeline([stage], tokenizer="whitespace").run(chunks, query="q")


SCORED = [{"text": t, "score": s} for t, s in zip("abcde", [0.1, 0.9, 0.5, 0.7, 0.3])]


class TestReorder:
    def test_defaults(self) -> None:
        assert Reorder().get_params() == {"strategy": "original", "source_key": "source"}
        assert isinstance(stage_from_dict({"type": "order", "strategy": "score"}), Reorder)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [({"strategy": "random"}, "strategy must be one of"), ({"source_key": ""}, "source_key must be")],
    )
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            Reorder(**kwargs)  # type: ignore[arg-type]

    def test_empty(self) -> None:
        assert run(Reorder(strategy="score"), []).chunks == ()

    def test_single_chunk(self) -> None:
        assert [c.text for c in run(Reorder(strategy="lost_in_the_middle"), ["x"]).chunks] == ["x"]

    def test_original(self) -> None:
        assert [c.text for c in run(Reorder(), SCORED).chunks] == list("abcde")

    def test_score(self) -> None:
        assert [c.text for c in run(Reorder(strategy="score"), SCORED).chunks] == list("bdcea")

    def test_score_puts_unscored_last(self) -> None:
        chunks = [{"text": "u"}, {"text": "s", "score": -1.0}]
        assert [c.text for c in run(Reorder(strategy="score"), chunks).chunks] == ["s", "u"]

    def test_lost_in_the_middle(self) -> None:
        # ranks b(1) d(2) c(3) e(4) a(5) -> front 1,3,5 and back 4,2 reversed: b c a e d
        assert [c.text for c in run(Reorder(strategy="lost_in_the_middle"), SCORED).chunks] == list("bcaed")

    def test_prefix_cache_is_deterministic_by_source_and_id(self) -> None:
        chunks = [
            {"text": "x", "id": "b2", "metadata": {"source": "wiki"}, "score": 0.9},
            {"text": "y", "id": "a1", "metadata": {"source": "wiki"}, "score": 0.1},
            {"text": "z", "id": "c3", "metadata": {"source": "blog"}, "score": 0.5},
        ]
        first = [c.id for c in run(Reorder(strategy="prefix_cache"), chunks).chunks]
        again = [c.id for c in run(Reorder(strategy="prefix_cache"), list(reversed(chunks))).chunks]
        assert first == again == ["c3", "a1", "b2"]

    def test_trace_is_empty_and_info_names_order(self) -> None:
        r = run(Reorder(strategy="score"), SCORED)
        assert r.removals == ()
        assert r.trace[0].info["order"] == ["1", "3", "2", "4", "0"]

    def test_no_input_mutation(self) -> None:
        chunks = tuple(Chunk(text=t, id=t, score=s, token_count=1) for t, s in zip("abc", [0.1, 0.9, 0.5]))
        ctx = TrimContext(query="q", chunks=chunks)
        out = Reorder(strategy="score").run(ctx, counter=WhitespaceCounter())
        assert ctx.chunks == chunks and [c.id for c in out.context.chunks] == ["b", "c", "a"]

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.one_of(st.none(), st.floats(-5, 5)), max_size=12),
           st.sampled_from(["original", "score", "lost_in_the_middle", "prefix_cache"]))
    def test_every_strategy_is_a_permutation(self, scores: list[float | None], strategy: str) -> None:
        chunks = [Chunk(text=str(i), id=f"c{i}", score=s) for i, s in enumerate(scores)]
        perm = Reorder(strategy=strategy).order(chunks)  # type: ignore[arg-type]
        assert sorted(perm) == list(range(len(chunks)))


def test_lost_in_the_middle_puts_best_two_at_the_ends() -> None:
    chunks = [Chunk(text=str(i), id=str(i), score=float(i)) for i in range(6)]
    order = lost_in_the_middle_order(chunks)
    assert order[0] == 5 and order[-1] == 4
