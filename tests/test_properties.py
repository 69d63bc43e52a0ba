"""Properties of the default pipeline on generated input: the budget holds, nothing is lost without a trace,
every output chunk derives from an input chunk, and runs are deterministic."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtrim import trim
from ragtrim.api import default_pipeline
from ragtrim.errors import ContractError, RagtrimError, StageError
from ragtrim.models import Chunk
from ragtrim.text.tokens import get_counter

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
    assert counter.count(result.text) <= budget  # the joined text, separators included
    input_ids = {c["id"] for c in chunks}
    out_ids = [c.id for c in result.chunks]
    assert set(out_ids) <= input_ids and len(out_ids) == len(set(out_ids))
    dropped = {r.chunk_id for r in result.removals if r.action == "dropped"}
    assert set(out_ids) | dropped == input_ids
    assert not set(out_ids) & dropped
    again = default_pipeline(budget=budget, tokenizer="cl100k_base", scorer="bm25").run(chunks, query=query)
    assert [c.to_dict() for c in again.chunks] == [c.to_dict() for c in result.chunks]
    assert [r.to_dict() for r in again.removals] == [r.to_dict() for r in result.removals]


# Wider inputs: any Unicode, HTML fragments, runs that stress tokenizers, every input form, lying token counts.
_piece = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["\x0b", "\x00", "<nav>x</nav>", "<p>", "</p>", "<script>x()</script>", "<!--", "-->", "<title>T</title>", "&nbsp;", "```",
                     "\n\n", ". ", "!!!", "?", "\u200b", "e\u0301", "東京", "🙂", "\t", "    x = 1;", "Dr. ", "3.5"]),
    st.integers(1, 300).map(lambda n: "." * n),
    st.integers(1, 200).map(lambda n: "ab" * n),
)
_any_text = st.lists(_piece, max_size=12).map("".join)


@st.composite
def _inputs(draw: st.DrawFn) -> list[object]:
    out: list[object] = []
    for i, text in enumerate(draw(st.lists(_any_text, max_size=8))):
        form = draw(st.sampled_from(["str", "dict", "chunk"]))
        if form == "str":
            out.append(text)
        elif form == "dict":
            out.append({"text": text, "id": f"d{i}", "score": draw(st.one_of(st.none(), st.floats(-3, 3)))})
        else:
            out.append(Chunk(text=text, id=f"c{i}", token_count=draw(st.one_of(st.none(), st.integers(0, 3)))))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=_inputs(), budget=st.integers(0, 60), query=_any_text)
def test_budget_holds_on_result_text_for_any_input(chunks: list[object], budget: int, query: str) -> None:
    try:
        result = trim(chunks, query=query, budget=budget, scorer="bm25")
    except (StageError, ContractError):
        raise  # a stage's raw exception, wrapped: a bug
    except RagtrimError:
        return  # a typed refusal is allowed (pinned chunks over budget); anything else fails the test
    assert get_counter().count(result.text) <= budget
    ids = [c.id if isinstance(c, Chunk) else c.get("id", str(i)) if isinstance(c, dict) else str(i)
           for i, c in enumerate(chunks)]
    dropped = {r.chunk_id for r in result.removals if r.action == "dropped"}
    assert {c.id for c in result.chunks} | dropped == set(ids)  # nothing lost
    again = trim(chunks, query=query, budget=budget, scorer="bm25")
    assert again.text == result.text and [r.to_dict() for r in again.removals] == [
        r.to_dict() for r in result.removals]
