"""rs-bpe's cl100k counts (``ragtrim.text.fastcount``): used only where they are tiktoken's, exactly."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.text import fastcount
from ragtrim.text.counting import PARALLEL_MIN_CHARS, start_counts
from ragtrim.text.tokens import TiktokenCounter

pytest.importorskip("rs_bpe", reason="rs-bpe is not installed (pip install 'ragtrim[fastcount]')")

# Around cl100k's pre-tokenizer rules: whitespace of every kind, contractions, digits, punctuation runs, markup,
# scripts without spaces, combining marks, emoji and control characters.
PIECES = list("\n\r \t\x0b\x0c\u00a0\u3000\u2028\u0085\u200b\x00aZé'sdtlmvr0123456789.,;:!?<>/=\"&#-—_()") + [
    "'s", "'LL", "'ve", "한국어", "中文", "です", "😀", "👍🏽", "a\u0308", "ǅ", "İ", "ß", "ﬁ", "١٢٣", "Ｆ", "    ", "\r\n"]


def tiktoken_count(text: str) -> int:
    return len(TiktokenCounter()._load().encode_ordinary(text))


@pytest.fixture(autouse=True)
def fresh_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fastcount.ENV, raising=False)
    fastcount.clear()


def test_the_default_counter_counts_with_rs_bpe() -> None:
    assert TiktokenCounter().fast


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=80).map("".join))
def test_counts_equal_tiktokens(text: str) -> None:
    counter = TiktokenCounter()
    assert counter._count_raw(text) == tiktoken_count(text)


def test_counts_equal_tiktokens_on_the_shared_data(shared_data: Path) -> None:
    """Every HTML page of the extraction set and the passages of every quality-matrix column (English, Korean,
    Chinese, Japanese, tables, contracts)."""
    from ragtrim_bench.html.extraction import HtmlBenchConfig, load_pages
    from ragtrim_bench.relevance.columns import build_column

    texts = [html for _, html, _ in load_pages(HtmlBenchConfig())]
    for column in ("nq-title", "squad-article", "korquad", "kv", "tatqa", "cuad", "cmrc", "jsquad"):
        texts += [p for r in build_column(column, "heldout", limit=5, seed=0) for p in r.passages]
    counter = TiktokenCounter()
    wrong = [t[:80] for t in texts if counter._count_raw(t) != tiktoken_count(t)]
    assert len(texts) > 400 and wrong == []


def test_a_long_run_keeps_its_bounded_blocks() -> None:
    blob = "Q" * (TiktokenCounter.LONG_RUN + 5)
    fast = TiktokenCounter().count(blob)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(fastcount.ENV, "off")
        assert fast == TiktokenCounter().count(blob)


def test_switched_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fastcount.ENV, "off")
    counter = TiktokenCounter()
    assert not counter.fast and counter.count("It's a test.") == tiktoken_count("It's a test.")


def fake_rs_bpe(monkeypatch: pytest.MonkeyPatch, count: object) -> None:
    tokenizer = types.SimpleNamespace(count=count)
    openai = types.SimpleNamespace(cl100k_base=lambda: tokenizer)
    package, bpe = types.ModuleType("rs_bpe"), types.ModuleType("rs_bpe.bpe")
    bpe.openai = openai  # type: ignore[attr-defined]
    package.bpe = bpe  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rs_bpe", package)
    monkeypatch.setitem(sys.modules, "rs_bpe.bpe", bpe)


def test_a_count_that_differs_on_a_probe_is_never_used(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    fake_rs_bpe(monkeypatch, lambda text: tiktoken_count(text) + (1 if "\u3000" in text else 0))
    with caplog.at_level(logging.WARNING, logger="ragtrim"):
        counter = TiktokenCounter()
        assert not counter.fast
    assert "differ from tiktoken's on 1 of" in caplog.text
    assert counter.count("a\u3000b") == tiktoken_count("a\u3000b")


def test_a_package_that_fails_is_never_used(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(text: str) -> int:
        raise RuntimeError("vocabulary missing")

    fake_rs_bpe(monkeypatch, broken)
    with caplog.at_level(logging.WARNING, logger="ragtrim"):
        assert not TiktokenCounter().fast
    assert "failed its check (RuntimeError: vocabulary missing)" in caplog.text


def test_without_the_package_tiktoken_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rs_bpe", None)
    monkeypatch.setitem(sys.modules, "rs_bpe.bpe", None)
    assert not TiktokenCounter().fast


class TestWhereTheCountsAreMade:
    TEXT = "x y\n" * PARALLEL_MIN_CHARS

    def test_few_threads_count_in_the_callers_thread(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.text import counting

        monkeypatch.setattr(counting, "count_workers", lambda: 2)
        pending = start_counts(TiktokenCounter(), [self.TEXT])
        assert pending._futures == [] and pending.result() == {}

    def test_many_threads_count_a_request_of_passages_in_the_callers_thread(self,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.text import counting

        monkeypatch.setattr(counting, "count_workers", lambda: counting.FAST_PARALLEL_WORKERS)
        assert len(self.TEXT) < counting.FEW_THREADS_MIN_CHARS
        pending = start_counts(TiktokenCounter(), [self.TEXT])
        assert pending._futures == [] and pending.result() == {}
        # the gateway's untrimmed prompt, counted while its documents are trimmed, still goes to the threads
        ahead = start_counts(TiktokenCounter(), [self.TEXT], fast_small_in_caller=False)
        assert ahead._futures and ahead.result() == {self.TEXT: tiktoken_count(self.TEXT)}

    def test_many_threads_count_a_raw_page_with_tiktoken_beside_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.text import counting

        monkeypatch.setattr(counting, "count_workers", lambda: counting.FAST_PARALLEL_WORKERS)
        page = "<p>x y</p>\n" * (counting.FEW_THREADS_MIN_CHARS // 10 + 1)
        pending = start_counts(TiktokenCounter(), [page])
        assert pending._futures and pending.result() == {page: tiktoken_count(page)}
