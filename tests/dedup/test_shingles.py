"""Shingle hashing in bounded passes (``ragtrim.dedup.shingles``): the same hashes as the one-pass hashing for
ordinary text (``reference_shingle_hashes``), the same duplicates found, long words hashed whole, and bounded memory
for a 12 MB run without spaces."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.dedup import pieces, shingles
from ragtrim.dedup.shingles import batch_shingle_hashes, normalize, sorted_unique, word_text
from ragtrim.models import Chunk, TrimContext
from ragtrim.stages.dedup import DuplicateFilter
from tests.dedup import reference_shingle_hashes as reference

words = st.text(alphabet=st.sampled_from(list("abcxyz0éü北")), min_size=1, max_size=12)
lines = st.lists(words, max_size=60).map(" ".join)


@pytest.fixture
def small_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments, folds and pieces a few characters long, so that every boundary is crossed."""
    monkeypatch.setattr(shingles, "_GROUP_BYTES", 24)
    monkeypatch.setattr(shingles, "_FOLD_WORDS", 5)
    monkeypatch.setattr(pieces, "PIECE_CHARS", 7)


class TestSameHashesAsOnePass:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(lines, max_size=8), st.integers(1, 5))
    def test_ordinary_text(self, texts: list[str], k: int) -> None:
        expected = reference.batch_shingle_hashes(texts, k)
        for group_bytes, fold_words in ((24, 5), (1 << 17, 1 << 17)):
            shingles._GROUP_BYTES, shingles._FOLD_WORDS = group_bytes, fold_words
            try:
                got = batch_shingle_hashes(texts, k)
            finally:
                shingles._GROUP_BYTES, shingles._FOLD_WORDS = 1 << 17, 1 << 17
            assert len(got) == len(expected)
            for g, e in zip(got, expected, strict=True):
                assert np.array_equal(g, e)

    def test_a_long_ordinary_text(self) -> None:
        rng = np.random.default_rng(0)
        text = " ".join(f"w{i}" for i in rng.integers(0, 50_000, 200_000))  # about 1.3 MB: ten segments
        assert len(text) > 8 * shingles._GROUP_BYTES
        assert np.array_equal(batch_shingle_hashes([text], 3)[0], reference.batch_shingle_hashes([text], 3)[0])

    @pytest.mark.usefixtures("small_passes")
    def test_long_words_take_one_hash_wherever_they_are(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(shingles, "LONG_WORD_BYTES", 10)
        long_word, other = "q" * 40, "q" * 39 + "r"
        alone = batch_shingle_hashes([long_word], 1)[0]  # a segment of its own, streamed
        inside = batch_shingle_hashes([f"a {long_word} b"], 1)[0]  # in a group, hashed from its bytes
        in_segment = batch_shingle_hashes(["x " * 20 + long_word + " y"], 1)[0]
        assert alone[0] == inside[1] == in_segment[20]
        assert batch_shingle_hashes([other], 1)[0][0] != alone[0]
        assert np.array_equal(batch_shingle_hashes(["a b c"], 1)[0], reference.batch_shingle_hashes(["a b c"], 1)[0])

    def test_sorted_unique_is_numpys_unique(self) -> None:
        values = np.random.default_rng(1).integers(0, 2**63, 5000, dtype=np.uint64)
        values = np.concatenate([values, values[:700], np.zeros(3, dtype=np.uint64)])
        assert np.array_equal(sorted_unique(values), np.unique(values))
        assert len(sorted_unique(np.empty(0, dtype=np.uint64))) == 0


def dedup(texts: list[str]) -> list[tuple[str, str, str | None, str]]:
    context = TrimContext(chunks=tuple(Chunk(t, str(i), token_count=1) for i, t in enumerate(texts)))
    out = DuplicateFilter().run(context, counter=None)  # type: ignore[arg-type]  # the stage counts nothing
    return [(r.chunk_id, r.reason, r.kept_id, r.detail) for r in out.removals]


class TestSameDuplicates:
    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.lists(lines, min_size=1, max_size=3).map("\n".join), min_size=2, max_size=6), st.data())
    def test_in_small_passes_as_in_one(self, texts: list[str], data: st.DataObject) -> None:
        # near copies: some texts again with a word changed or a line added, and with other spacing and case
        extra = [t.upper().replace(" ", "  ") + data.draw(st.sampled_from(["", " end", "\nmore words here"]))
                 for t in data.draw(st.lists(st.sampled_from(texts), max_size=3))]
        batch = texts + extra
        whole = dedup(batch)
        saved = shingles._GROUP_BYTES, shingles._FOLD_WORDS, pieces.PIECE_CHARS
        shingles._GROUP_BYTES, shingles._FOLD_WORDS, pieces.PIECE_CHARS = 24, 5, 7
        try:
            assert dedup(batch) == whole
        finally:
            shingles._GROUP_BYTES, shingles._FOLD_WORDS, pieces.PIECE_CHARS = saved

    def test_normalized_key_and_words_unchanged(self) -> None:
        text = "Ｃａｆé naïve — 東京 タワー　は 高い ; ΣΊΣΥΦΟΣ façade\r\n" * 3
        assert word_text(normalize(text)).split() == shingles._WORD.findall(normalize(text))


class TestBoundedMemory:
    """A 12 MB run without spaces: 432 MiB of numpy temporaries in one pass before (and the GIL held 0.7 s)."""

    @pytest.mark.parametrize("make", [lambda n: os.urandom(n // 2).hex(), lambda n: "a" * n,
                                      lambda n: " ".join(["x" * 3000] * (n // 3001))])
    def test_a_run_without_spaces(self, make: object) -> None:
        run = make(12 * 2**20)  # type: ignore[operator]
        texts = [run, "The tower stands by the river. " * 20, "A bridge crosses the bay. " * 20]
        tracemalloc.start()
        try:
            removals = dedup(texts)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert removals == []
        # the lower-cased copy of the text and its words (12 MB each) are the floor; no per-byte arrays on top
        assert peak < 64 * 2**20, peak / 2**20
