from __future__ import annotations

import pytest

from ragtrim import trim
from ragtrim_bench.pipeline.output_digest import differences, digest, main, trace_text


def test_digest_is_stable_and_short() -> None:
    assert digest("abc") == digest("abc") != digest("abd")
    assert len(digest("abc")) == 20


def test_trace_text_lists_every_removal() -> None:
    result = trim(["same text here", "same text here", "other words entirely"], query="other", budget=3,
                  tokenizer="whitespace", scorer="bm25")
    lines = trace_text(result).splitlines()
    assert len(lines) == sum(len(r.removals) for r in result.trace) >= 1
    assert lines[0].startswith("dedup|")


def test_differences_tell_text_from_trace_and_missing() -> None:
    old = {"records": {"a": {"text": "x", "tokens_after": 1, "trace": "t"},
                       "b": {"text": "y", "tokens_after": 1, "trace": "t"},
                       "c": {"text": "z", "tokens_after": 1, "trace": "t"}}}
    new = {"records": {"a": {"text": "x", "tokens_after": 1, "trace": "t"},
                       "b": {"text": "y", "tokens_after": 1, "trace": "u"},
                       "d": {"text": "w", "tokens_after": 2, "trace": "t"}}}
    assert differences(new, old) == {"text": [], "trace_only": ["b"], "in_one_run_only": ["c", "d"]}
    new["records"]["a"]["text"] = "changed"
    assert differences(new, old)["text"] == ["a"]


def test_count_threads_below_one_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--count-threads", "0"])
    assert exc.value.code == 2
