"""Properties of the default pipeline on generated input: the budget holds, nothing is lost without a trace,
every output chunk derives from an input chunk, and runs are deterministic."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtrim.api import default_pipeline

_word = st.sampled_from(["tower", "Paris", "built", "1889", "metres", "iron", "the", "a", "fair", "<p>", "</p>",
                         "<nav>Home</nav>", "&amp;", ".", "!", "\n\n", "<div>", "</div>", "é", "330"])
_text = st.lists(_word, max_size=40).map(" ".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(_text, max_size=10),
    repeat=st.lists(st.integers(0, 9), max_size=3),
    budget=st.integers(0, 120),
    query=_text,
)
def test_default_pipeline_properties(texts: list[str], repeat: list[int], budget: int, query: str) -> None:
    texts = texts + [texts[i] for i in repeat if i < len(texts)]  # exact duplicates
    chunks = [{"text": t, "id": f"c{i}"} for i, t in enumerate(texts)]
    pipeline = default_pipeline(budget=budget, tokenizer="cl100k_base", scorer="bm25")
    result = pipeline.run(chunks, query=query)
    counter = pipeline.counter
    assert sum(counter.count(c.text) for c in result.chunks) <= budget
    input_ids = {c["id"] for c in chunks}
    out_ids = [c.id for c in result.chunks]
    assert set(out_ids) <= input_ids and len(out_ids) == len(set(out_ids))
    dropped = {r.chunk_id for r in result.removals if r.action == "dropped"}
    assert set(out_ids) | dropped == input_ids
    assert not set(out_ids) & dropped
    again = default_pipeline(budget=budget, tokenizer="cl100k_base", scorer="bm25").run(chunks, query=query)
    assert [c.to_dict() for c in again.chunks] == [c.to_dict() for c in result.chunks]
    assert [r.to_dict() for r in again.removals] == [r.to_dict() for r in result.removals]
