from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.errors import BudgetError, ConfigError
from ragtrim.models import Chunk
from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget, truncate_to_fit
from ragtrim.text.tokens import WhitespaceCounter, get_counter


def run(stage: TokenBudget, chunks: list[object], tokenizer: str = "whitespace") -> object:
    return Pipeline([stage], tokenizer=tokenizer).run(chunks)


class TestTokenBudget:
    def test_defaults(self) -> None:
        s = TokenBudget(max_tokens=100)
        assert s.get_params() == {"max_tokens": 100, "policy": "score", "truncate": True, "min_truncated_tokens": 16,
                                  "per_chunk_overhead_tokens": 0}

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"max_tokens": -1}, "max_tokens must be >= 0, got -1"),
            ({"max_tokens": 1.5}, "max_tokens must be an int"),
            ({"max_tokens": True}, "max_tokens must be an int"),
            ({"max_tokens": 5, "policy": "random"}, "policy must be one of"),
            ({"max_tokens": 5, "truncate": "yes"}, "truncate must be True or False"),
            ({"max_tokens": 5, "min_truncated_tokens": 0}, "min_truncated_tokens must be >= 1"),
            ({"max_tokens": 5, "per_chunk_overhead_tokens": -2}, "per_chunk_overhead_tokens must be >= 0"),
        ],
    )
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            TokenBudget(**kwargs)  # type: ignore[arg-type]

    def test_empty(self) -> None:
        r = run(TokenBudget(max_tokens=5), [])
        assert r.chunks == ()  # type: ignore[attr-defined]

    def test_single_chunk_fits(self) -> None:
        r = run(TokenBudget(max_tokens=5), ["a b c"])
        assert [c.text for c in r.chunks] == ["a b c"]  # type: ignore[attr-defined]

    def test_score_policy_keeps_best_in_input_order(self) -> None:
        chunks = [{"text": "a a a", "score": 0.1}, {"text": "b b b", "score": 0.9}, {"text": "c c c", "score": 0.5}]
        r = run(TokenBudget(max_tokens=6, truncate=False), chunks)
        assert [c.id for c in r.chunks] == ["1", "2"]  # type: ignore[attr-defined]
        (removal,) = r.removals  # type: ignore[attr-defined]
        assert (removal.chunk_id, removal.reason, removal.tokens_removed) == ("0", "over_budget", 3)
        assert removal.detail == "needs 3 tokens, 0 of 6 left"

    def test_position_policy(self) -> None:
        chunks = [{"text": "a a a", "score": 0.1}, {"text": "b b b", "score": 0.9}, {"text": "c c c", "score": 0.5}]
        r = run(TokenBudget(max_tokens=6, policy="position", truncate=False), chunks)
        assert [c.id for c in r.chunks] == ["0", "1"]  # type: ignore[attr-defined]

    def test_smaller_later_chunk_still_fills(self) -> None:
        r = run(TokenBudget(max_tokens=4, policy="position", truncate=False), ["a b c", "d e", "f"])
        assert [c.id for c in r.chunks] == ["0", "2"]  # type: ignore[attr-defined]

    def test_truncates_at_sentence_boundary(self) -> None:
        text = "One two three four. Five six seven eight. Nine ten eleven twelve."
        r = run(TokenBudget(max_tokens=9, min_truncated_tokens=2), [text])
        (c,) = r.chunks  # type: ignore[attr-defined]
        assert c.text == "One two three four. Five six seven eight."
        (removal,) = r.removals  # type: ignore[attr-defined]
        assert (removal.reason, removal.action, removal.tokens_removed) == ("truncated", "shortened", 4)

    def test_truncation_respects_minimum(self) -> None:
        text = "One two three four. Five six seven eight."
        r = run(TokenBudget(max_tokens=5, min_truncated_tokens=6), [text])
        assert r.chunks == ()  # type: ignore[attr-defined]
        assert r.removals[0].reason == "over_budget"  # type: ignore[attr-defined]

    def test_overhead_counts(self) -> None:
        r = run(TokenBudget(max_tokens=6, per_chunk_overhead_tokens=2, truncate=False), ["a b", "c d", "e f"])
        assert len(r.chunks) == 1  # type: ignore[attr-defined]

    def test_pinned_always_kept(self) -> None:
        chunks = [Chunk("a b c", "p", pinned=True, score=0.0), Chunk("d e", "q", score=1.0)]
        r = run(TokenBudget(max_tokens=4, truncate=False), chunks)
        assert [c.id for c in r.chunks] == ["p"]  # type: ignore[attr-defined]

    def test_pinned_over_budget_raises(self) -> None:
        with pytest.raises(BudgetError, match="pinned chunks need 3 tokens but max_tokens is 2"):
            run(TokenBudget(max_tokens=2), [Chunk("a b c", "p", pinned=True)])

    def test_zero_budget_drops_everything_with_records(self) -> None:
        r = run(TokenBudget(max_tokens=0), ["a", "b"])
        assert r.chunks == () and len(r.removals) == 2  # type: ignore[attr-defined]

    def test_no_mutation(self) -> None:
        chunks = (Chunk("a b c. d e f.", "x"),)
        before = chunks[0]
        run(TokenBudget(max_tokens=3, min_truncated_tokens=1), list(chunks))
        assert chunks[0] is before and chunks[0].text == "a b c. d e f."

    def test_real_tokenizer_hard_guarantee(self) -> None:
        text = "The Eiffel Tower is 330 metres tall. It was built in 1889. Gustave Eiffel's company built it. " * 20
        r = run(TokenBudget(max_tokens=50), [text, text + " extra."], tokenizer="cl100k_base")
        counter = get_counter("cl100k_base")
        assert sum(counter.count(c.text) for c in r.chunks) <= 50  # type: ignore[attr-defined]
        assert r.tokens_after > 30  # type: ignore[attr-defined]


def test_truncate_to_fit_none_fits() -> None:
    assert truncate_to_fit("alpha beta gamma.", 1, WhitespaceCounter()) == ""


_words = st.text(alphabet="abcde .!?\n", min_size=0, max_size=80)


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(_words, max_size=12),
    scores=st.lists(st.one_of(st.none(), st.floats(-5, 5)), max_size=12),
    budget=st.integers(0, 60),
    policy=st.sampled_from(["score", "position"]),
    truncate=st.booleans(),
)
def test_property_budget_holds_and_trace_complete(
    texts: list[str], scores: list[float | None], budget: int, policy: str, truncate: bool
) -> None:
    chunks = [Chunk(t, str(i), score=scores[i] if i < len(scores) else None) for i, t in enumerate(texts)]
    stage = TokenBudget(max_tokens=budget, policy=policy, truncate=truncate, min_truncated_tokens=1)  # type: ignore[arg-type]
    r = Pipeline([stage], tokenizer="whitespace").run(chunks)
    counter = WhitespaceCounter()
    assert sum(counter.count(c.text) for c in r.chunks) <= budget
    out_ids = [c.id for c in r.chunks]
    assert out_ids == sorted(out_ids, key=int)  # input order kept
    dropped = {x.chunk_id for x in r.removals if x.action == "dropped"}
    assert set(out_ids) | dropped == {c.id for c in chunks}
    assert not set(out_ids) & dropped
    for c in r.chunks:
        original = chunks[int(c.id)].text
        assert original.startswith(c.text)  # truncation only cuts a prefix
    again = Pipeline([stage], tokenizer="whitespace").run(chunks)
    assert again.to_dict()["chunks"] == r.to_dict()["chunks"]
