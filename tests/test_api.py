"""trim() end to end, and the bad-input contract: a typed error or a documented pass-through, never a crash."""

from __future__ import annotations

import time

import pytest

import ragtrim
from ragtrim import ConfigError, InputError, trim
from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget

PAGE = (
    "<html><head><script>var x = 1;</script><style>p{}</style></head><body>"
    "<nav><a href='/'>Home</a> <a href='/about'>About</a></nav>"
    "<p>The Eiffel Tower is 330 metres tall and was completed in 1889 for the World's Fair.</p>"
    "<footer>© 2026 Example · <a href='/privacy'>Privacy</a></footer></body></html>"
)


class TestTrim:
    def test_readme_example(self) -> None:
        chunks = [PAGE, "The Eiffel Tower is 330 metres tall and was completed in 1889 for the World's Fair.",
                  {"text": "Gustave Eiffel's company built the tower.", "id": "doc-7", "score": 0.8}]
        result = trim(chunks, query="How tall is the Eiffel Tower?", budget=40, scorer="bm25")
        assert result.tokens_after <= 40
        assert "330 metres" in result.text
        assert "Home" not in result.text and "var x" not in result.text
        reasons = {r.reason for r in result.removals}
        assert "boilerplate" in reasons and "exact_duplicate" in reasons
        kept_and_dropped = {c.id for c in result.chunks} | {r.chunk_id for r in result.removals if r.action == "dropped"}
        assert kept_and_dropped == {"0", "1", "doc-7"}

    def test_empty(self) -> None:
        r = trim([], query="q", budget=10, scorer="bm25")
        assert r.chunks == () and r.tokens_before == 0 and r.ratio == 1.0

    def test_empty_query_is_a_pass_through_for_query_aware_stages(self) -> None:
        r = trim(["alpha beta.", "gamma delta."], query="", budget=100, scorer="bm25")
        assert [c.text for c in r.chunks] == ["alpha beta.", "gamma delta."]

    def test_pipeline_and_budget_conflict(self) -> None:
        with pytest.raises(ConfigError, match="not both"):
            trim(["a"], budget=5, pipeline=Pipeline([TokenBudget(max_tokens=5)]))

    def test_custom_pipeline(self) -> None:
        r = trim(["a b c", "d e f"], pipeline=Pipeline([TokenBudget(max_tokens=3)], tokenizer="whitespace"))
        assert r.tokens_after == 3 and r.tokenizer == "whitespace"

    def test_to_dict_is_json(self) -> None:
        import json

        json.dumps(trim([PAGE], query="tower", budget=30, scorer="bm25").to_dict())


class TestBadInput:
    @pytest.mark.parametrize(
        ("chunks", "error", "message"),
        [
            (None, InputError, "chunks is None"),
            ([None], InputError, "is None"),
            ([{"text": 12}], InputError, "'text' must be str"),
            ([b"\xc3\x28 invalid"], InputError, "not valid UTF-8"),
        ],
    )
    def test_typed_errors(self, chunks: object, error: type[Exception], message: str) -> None:
        with pytest.raises(error, match=message):
            trim(chunks, query="q", budget=10)  # type: ignore[arg-type]

    def test_negative_budget(self) -> None:
        with pytest.raises(ConfigError, match="budget must be >= 0, got -5"):
            trim(["a"], budget=-5)

    def test_non_string_query(self) -> None:
        with pytest.raises(ConfigError, match="query must be a str"):
            trim(["a"], query=3)  # type: ignore[arg-type]

    def test_every_error_is_a_ragtrim_error(self) -> None:
        with pytest.raises(ragtrim.RagtrimError):
            trim([object()])

    def test_ten_megabyte_chunk_finishes(self) -> None:
        big = ("The quick brown fox jumps over the lazy dog. " * 230_000)[:10_000_000]
        started = time.perf_counter()
        r = trim([big, "short answer chunk."], query="fox", budget=500, scorer="bm25")
        assert r.tokens_after <= 500
        assert time.perf_counter() - started < 120

    def test_broken_html_does_not_crash(self) -> None:
        r = trim(["<div><p>Unclosed <b>bold <i>text</div></span></p>", "<<<>>> <p"], query="q", budget=100, scorer="bm25")
        assert r.tokens_after <= 100


def test_the_chunk_the_query_asks_about_is_not_merged_away() -> None:
    """The Free and Pro plan chunks (Jaccard 0.89) differ in their rate limit; both reach the ranking, and
    the Pro one the query asks about comes first."""
    free = ("The Free plan is meant for trying the API on small projects and personal tools. It allows 60 requests "
            "per minute and 10,000 requests per month, with a maximum payload of 2 MB for each request. Responses are "
            "cached for five minutes, and every endpoint is available, including search, embeddings and batch jobs. "
            "Requests above the limit get HTTP status 429 with a Retry-After header, and the monthly counter resets "
            "at midnight UTC on the first day of each month for every account.")
    pro = free.replace("The Free plan", "The Pro plan").replace("60 requests", "600 requests")
    result = trim([free, pro], query="What is the rate limit of the Pro plan?", budget=120, scorer="bm25",
                  tokenizer="whitespace")
    assert [c.id for c in result.chunks] == ["1", "0"]
    assert "600 requests per minute" in result.text
    assert not [r for r in result.removals if r.stage == "dedup"]
    (dedup,) = [t for t in result.trace if t.stage == "dedup"]
    assert dedup.info["value_conflicts"] == 1
