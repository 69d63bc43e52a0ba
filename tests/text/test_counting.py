from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.text.counting import (
    FEW_THREADS_MIN_CHARS,
    PARALLEL_MIN_CHARS,
    additive_blocks,
    splits_additively,
    start_counts,
)
from ragtrim.text.tokens import CL100K_PATTERN, TiktokenCounter, WhitespaceCounter

# Characters around the pre-tokenizer's rules: line breaks and other whitespace, letters, digits, punctuation,
# apostrophe contractions, markup, a non-breaking space, CJK and an accent.
TRICKY = st.text(alphabet=st.sampled_from(list("\n\r \t\x0b\x0c\u00a0\u3000aZé'sdt0123456789.,<>/=\"!?-—漢字")),
                 max_size=400)


class TestAdditiveBlocks:
    def test_short_text_is_one_block(self) -> None:
        assert additive_blocks("one line\nand another", block_chars=100) == ["one line\nand another"]

    def test_blocks_cut_after_a_line_break_before_non_space(self) -> None:
        text = "aaaa\n  bbbb\ncccc\n\ndddd"
        assert additive_blocks(text, block_chars=4) == ["aaaa\n  bbbb\n", "cccc\n\n", "dddd"]

    def test_no_cut_point_keeps_the_text_whole(self) -> None:
        assert additive_blocks("x" * 50 + "\n ", block_chars=10) == ["x" * 50 + "\n "]

    @settings(max_examples=400, deadline=None)
    @given(TRICKY, st.integers(min_value=1, max_value=40))
    def test_counts_add_up_exactly(self, text: str, block_chars: int) -> None:
        counter = TiktokenCounter()
        blocks = additive_blocks(text, block_chars=block_chars)
        assert "".join(blocks) == text
        assert sum(counter._count_raw(b) for b in blocks if b) == (counter._count_raw(text) if text else 0)

    def test_counts_add_up_on_markup(self) -> None:
        counter = TiktokenCounter()
        page = "".join(f"<div class='c{i}'>\n  <p>Row {i}: it's 3.5 km.</p>\n</div>\n" for i in range(400))
        blocks = additive_blocks(page, block_chars=512)
        assert len(blocks) > 10
        assert sum(counter._count_raw(b) for b in blocks) == counter._count_raw(page)


class TestSplitsAdditively:
    def test_cl100k_pattern_is_the_encodings(self) -> None:
        assert TiktokenCounter()._load()._pat_str == CL100K_PATTERN
        assert splits_additively(TiktokenCounter())

    def test_other_counters_do_not_split(self) -> None:
        assert not splits_additively(WhitespaceCounter())


class TestStartCounts:
    """tiktoken's counts on worker threads (with rs-bpe installed, few threads count in the caller's instead:
    tests/text/test_fastcount.py)."""

    @pytest.fixture(autouse=True)
    def tiktoken_only(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("RAGTRIM_FAST_COUNT", "off")

    def test_counts_equal_count_and_fill_the_cache(self) -> None:
        counter = TiktokenCounter()
        texts = ["first line\n" * 2000, "second text, short", "third\n" * 3000, ""]
        pending = start_counts(counter, texts)
        got = pending.result()
        for t in texts[:3]:
            assert got[t] == TiktokenCounter().count(t)
            assert counter.cached(t)

    def test_counted_on_other_threads(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.text import counting

        threads: set[str] = set()
        real = counting._count_blocks

        def spy(enc: object, blocks: list[str]) -> list[int]:
            threads.add(threading.current_thread().name)
            return real(enc, blocks)

        monkeypatch.setattr(counting, "_count_blocks", spy)
        monkeypatch.setattr(counting, "count_workers", lambda: 2)
        start_counts(TiktokenCounter(), ["x y\n" * FEW_THREADS_MIN_CHARS]).result()
        assert threads and all(t.startswith("ragtrim-count") for t in threads)

    def test_shares_per_worker_keep_each_texts_count(self) -> None:
        counter = TiktokenCounter()
        texts = [f"text {i}\n" + "some words here.\n" * (50 * i + 1) for i in range(30)] + ["x" * 20_000 + "\ny" * 9]
        got = start_counts(counter, texts).result()
        assert got == {t: TiktokenCounter().count(t) for t in texts}

    def test_a_long_run_without_whitespace_is_left_to_the_counters_bounded_blocks(self,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.text import counting

        monkeypatch.setattr(counting, "count_workers", lambda: 2)
        counter = TiktokenCounter()
        blob, prose = "Q" * (counter.LONG_RUN + 1), "x y\n" * FEW_THREADS_MIN_CHARS
        got = start_counts(counter, [blob, prose]).result()
        assert blob not in got and got[prose] == TiktokenCounter().count(prose)
        assert counter.count(blob) == TiktokenCounter().count(blob)

    def test_with_few_threads_a_request_of_passages_counts_in_the_caller(self,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtrim.text import counting

        passages = [f"passage {i}\n" + "some words here.\n" * 40 for i in range(20)]  # about 14 KB
        assert PARALLEL_MIN_CHARS <= sum(map(len, passages)) < FEW_THREADS_MIN_CHARS
        monkeypatch.setattr(counting, "count_workers", lambda: 2)
        assert not start_counts(TiktokenCounter(), passages)._futures
        page = ["<p>x y</p>\n" * (FEW_THREADS_MIN_CHARS // 10)]  # a raw page's markup: worth the hand-over
        assert start_counts(TiktokenCounter(), page)._futures
        monkeypatch.setattr(counting, "count_workers", lambda: counting.FAST_PARALLEL_WORKERS)
        assert start_counts(TiktokenCounter(), passages)._futures

    def test_small_or_other_inputs_count_in_the_caller(self) -> None:
        assert start_counts(TiktokenCounter(), ["tiny"]).result() == {}
        assert start_counts(WhitespaceCounter(), ["a b\n" * PARALLEL_MIN_CHARS]).result() == {}
