from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, TrimContext, TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages import dedup as dedup_module
from ragtrim.stages.base import stage_from_dict
from ragtrim.stages.dedup import (
    DuplicateFilter,
    batch_shingle_hashes,
    jaccard,
    lsh_bands,
    minhash_signatures,
    normalize,
    shingle_hashes,
    word_text,
    words_of,
)
from ragtrim.text import normalize_text
from ragtrim.tokens import WhitespaceCounter

BASE = ("the committee met on tuesday to discuss the new budget for the city parks and the public library "
        "and agreed to publish a report before the end of the month")


def run(stage: DuplicateFilter, chunks: Sequence[Any]) -> TrimResult:
    return Pipeline([stage], tokenizer="whitespace").run(chunks)


def random_text(rng: random.Random, n_words: int) -> str:
    return " ".join(f"w{rng.randrange(20000)}" for _ in range(n_words))


class TestDuplicateFilter:
    def test_defaults(self) -> None:
        s = DuplicateFilter()
        assert s.get_params() == {"threshold": 0.8, "num_perm": 128, "shingle_words": 3, "seed": 1, "exact": True,
                                  "near": True, "keep": "best"}
        assert stage_from_dict(s.to_dict()).get_params() == s.get_params()

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"threshold": 0.0}, "threshold must be > 0.0, got 0.0"),
            ({"threshold": 1.5}, "threshold must be <= 1.0, got 1.5"),
            ({"threshold": "high"}, "threshold must be a number"),
            ({"num_perm": 4}, "num_perm must be >= 8, got 4"),
            ({"num_perm": 128.0}, "num_perm must be an int"),
            ({"shingle_words": 0}, "shingle_words must be >= 1, got 0"),
            ({"seed": -1}, "seed must be >= 0, got -1"),
            ({"exact": 1}, "exact must be True or False"),
            ({"near": None}, "near must be True or False"),
            ({"keep": "last"}, "keep must be one of"),
            ({"exact": False, "near": False}, "exact and near are both False"),
        ],
    )
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            DuplicateFilter(**kwargs)  # type: ignore[arg-type]

    def test_empty(self) -> None:
        out = DuplicateFilter().run(TrimContext(), counter=WhitespaceCounter())
        assert out.context.chunks == () and out.removals == ()

    def test_single_chunk(self) -> None:
        result = run(DuplicateFilter(), [BASE])
        assert [c.text for c in result.chunks] == [BASE]

    def test_exact_duplicate_after_normalization(self) -> None:
        result = run(DuplicateFilter(), [BASE, "  " + BASE.upper().replace(" ", "\n\t ", 2), "other text"])
        assert [c.id for c in result.chunks] == ["0", "2"]
        (r,) = result.removals
        assert (r.chunk_id, r.reason, r.kept_id, r.stage) == ("1", "exact_duplicate", "0", "dedup")
        assert r.detail == "same normalized text as chunk 0"
        assert r.tokens_removed == len(BASE.split())

    def test_near_duplicate_detail_pins_exact_jaccard(self) -> None:
        # 30 words -> 28 shingles; replacing the last word changes 1 shingle... of 3 that contain it (last only 1).
        near = BASE.rsplit(" ", 1)[0] + " year"
        a = frozenset(shingle_hashes(BASE, 3).tolist())
        b = frozenset(shingle_hashes(near, 3).tolist())
        assert len(a) == 28 and jaccard(a, b) == pytest.approx(27 / 29)
        result = run(DuplicateFilter(), [BASE, near])
        (r,) = result.removals
        assert (r.chunk_id, r.reason, r.kept_id, r.detail) == ("1", "near_duplicate", "0", "jaccard 0.93 with chunk 0")

    def test_below_threshold_is_kept(self) -> None:
        half = " ".join(BASE.split()[:15]) + " " + " ".join(f"x{i}" for i in range(15))
        result = run(DuplicateFilter(), [BASE, half])
        assert len(result.chunks) == 2 and result.removals == ()

    def test_keep_best_scored_and_output_order(self) -> None:
        chunks = [Chunk("unrelated words here for the first slot", "a", score=0.9),
                  Chunk(BASE, "low", score=0.1), Chunk(BASE + " again", "high", score=0.8)]
        result = run(DuplicateFilter(), chunks)
        assert [c.id for c in result.chunks] == ["a", "high"]
        assert result.removals[0].kept_id == "high"
        first = run(DuplicateFilter(keep="first"), chunks)
        assert [c.id for c in first.chunks] == ["a", "low"]

    def test_unscored_loses_to_scored_and_pinned_is_never_dropped(self) -> None:
        chunks = [Chunk(BASE, "u"), Chunk(BASE, "s", score=0.2)]
        assert [c.id for c in run(DuplicateFilter(), chunks).chunks] == ["s"]
        pinned = [Chunk(BASE, "s", score=0.9), Chunk(BASE, "p", pinned=True), Chunk(BASE, "q", pinned=True)]
        result = run(DuplicateFilter(), pinned)
        assert [c.id for c in result.chunks] == ["p", "q"]
        assert result.removals[0].kept_id == "p"

    def test_no_chaining(self) -> None:
        # A~B and B~C but not A~C: only B goes (it duplicates kept A); C is compared with kept chunks only.
        words = [f"t{i}" for i in range(60)]
        a, b, c = (" ".join(words[s : s + 40]) for s in (0, 5, 10))
        sims = [jaccard(frozenset(shingle_hashes(x, 3).tolist()), frozenset(shingle_hashes(y, 3).tolist()))
                for x, y in ((a, b), (b, c), (a, c))]
        assert sims[0] >= 0.75 and sims[1] >= 0.75 and sims[2] < 0.75
        result = run(DuplicateFilter(threshold=0.75), [a, b, c])
        assert [ch.id for ch in result.chunks] == ["0", "2"]

    def test_exact_only_and_near_only(self) -> None:
        near = BASE + " indeed"
        assert len(run(DuplicateFilter(near=False), [BASE, near, BASE]).chunks) == 2
        result = run(DuplicateFilter(exact=False), [BASE, BASE])
        assert result.removals[0].reason == "near_duplicate"
        assert result.removals[0].detail == "jaccard 1.00 with chunk 0"

    def test_empty_and_short_chunks(self) -> None:
        result = run(DuplicateFilter(), ["", "", "...", "hi", "Hi!", "hi there"])
        removed = {r.chunk_id: r for r in result.removals}
        assert removed["1"].reason == "exact_duplicate" and removed["1"].kept_id == "0"
        # "hi" and "Hi!" have the same words (one shingle of fewer words than shingle_words): near duplicates.
        assert removed["4"].reason == "near_duplicate" and removed["4"].kept_id == "3"
        assert set(removed) == {"1", "4"}

    def test_unicode(self) -> None:
        text = "Ｃａｆé naïve — 東京 タワー　は 高い ; ΣΊΣΥΦΟΣ façade" * 3
        assert normalize(text) == normalize_text(text)
        assert words_of(normalize("Ｃａｆé, naïve—東京!")) == ["café", "naïve", "東京"]
        result = run(DuplicateFilter(), [text, text.replace("Ｃａｆé", "CAFÉ") + " end", "ascii only"])
        assert [r.chunk_id for r in result.removals] == ["1"]

    def test_ascii_fast_path_matches_regex(self) -> None:
        sample = "a_b c-d e.f (g) h's 12,5 x\ty__ z! [q] {r} ~s`"
        assert word_text(sample).split() == dedup_module._WORD.findall(sample)

    def test_trace_and_no_input_mutation(self) -> None:
        chunks = [Chunk(BASE, "a", score=0.5), Chunk(BASE + " too", "b", score=0.4), Chunk(BASE, "c")]
        before = [(c.text, c.id, c.score) for c in chunks]
        result = run(DuplicateFilter(), chunks)
        assert [(c.text, c.id, c.score) for c in chunks] == before
        removals = {r.chunk_id: r for r in result.removals}
        assert set(removals) == {"b", "c"}
        assert removals["c"].reason == "exact_duplicate" and removals["b"].reason == "near_duplicate"
        assert all(r.kept_id == "a" and r.action == "dropped" for r in removals.values())
        report = result.trace[0]
        assert report.info["exact_duplicates"] == 1 and report.info["near_duplicates"] == 1
        json.dumps(result.to_dict())


class TestMinHashLsh:
    def test_signatures_match_datasketch(self) -> None:
        datasketch = pytest.importorskip("datasketch")
        h = shingle_hashes(BASE, 3)
        for num_perm, seed in ((128, 1), (64, 7)):
            sig = minhash_signatures([h, np.empty(0, dtype=np.uint64)], num_perm, seed)
            m = datasketch.MinHash(num_perm=num_perm, seed=seed, hashfunc=lambda x: x)
            m.update_batch([int(x) & 0xFFFFFFFF for x in h])
            assert np.array_equal(sig[0], m.hashvalues)
            assert (sig[1] == 0xFFFFFFFF).all()

    def test_blocked_signatures_equal_unblocked(self, monkeypatch: pytest.MonkeyPatch) -> None:
        rng = np.random.default_rng(0)
        sets = [rng.integers(0, 2**63, size=n, dtype=np.uint64) for n in (5, 0, 300, 1, 70)]
        full = minhash_signatures(sets, 32, 1)
        monkeypatch.setattr(dedup_module, "_BLOCK_ROWS", 64)
        assert np.array_equal(minhash_signatures(sets, 32, 1), full)

    def test_batch_hashes_equal_single(self) -> None:
        texts = [word_text(normalize(t)) for t in (BASE, "", "one two", "x " * 3, "ünï cödé wörds here")]
        batch = batch_shingle_hashes(texts, 3)
        for text, got in zip(texts, batch, strict=True):
            assert np.array_equal(np.unique(got), shingle_hashes(text, 3))

    def test_band_choice(self) -> None:
        assert lsh_bands(0.8, 128) == (21, 6)
        bands, rows = lsh_bands(0.5, 128)
        assert bands * rows <= 128 and 1 - (1 - 0.5**rows) ** bands >= 0.995

    def test_lsh_path_agrees_with_exact_path_and_is_deterministic(self, monkeypatch: pytest.MonkeyPatch) -> None:
        rng = random.Random(3)
        texts = [random_text(rng, 80) for _ in range(150)]
        for i in range(0, 150, 3):  # every third chunk: a copy of the next one with one word changed
            words = texts[i + 1].split()
            words[rng.randrange(80)] = "changed"
            texts[i] = " ".join(words)
        chunks = [Chunk(t, f"c{i}") for i, t in enumerate(texts)]
        lsh = run(DuplicateFilter(), chunks)
        assert lsh.trace[0].info["near_method"] == "minhash_lsh"
        again = run(DuplicateFilter(), chunks)
        assert lsh.to_dict() == {**again.to_dict(), "trace": lsh.to_dict()["trace"]}
        monkeypatch.setattr(dedup_module, "PAIRWISE_MAX_CHUNKS", 10**6)
        exact = run(DuplicateFilter(), chunks)
        assert exact.trace[0].info["near_method"] == "exact_pairwise"
        assert [(r.chunk_id, r.kept_id, r.detail) for r in lsh.removals] == [
            (r.chunk_id, r.kept_id, r.detail) for r in exact.removals]
        assert len(lsh.removals) == 50

    def test_big_chunk(self) -> None:
        rng = random.Random(5)
        big = " ".join([random_text(rng, 20_000)] * 80)  # about 10 MB, 1.6 M words
        assert len(big) > 10_000_000
        chunks = [Chunk(big, "big"), Chunk(big + " tail", "big2"), Chunk("small chunk here", "s")]
        started = time.perf_counter()
        out = DuplicateFilter().run(TrimContext(chunks=tuple(chunks)), counter=WhitespaceCounter())
        assert time.perf_counter() - started < 30
        assert [(r.chunk_id, r.kept_id, r.reason) for r in out.removals] == [("big2", "big", "near_duplicate")]
