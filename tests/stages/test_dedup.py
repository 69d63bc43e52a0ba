from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ragtrim.dedup import engine as dedup_engine
from ragtrim.dedup import minhash, shingles
from ragtrim.dedup.minhash import lsh_bands, minhash_signatures
from ragtrim.dedup.shingles import (
    batch_shingle_hashes,
    jaccard,
    line_shingles,
    normalize,
    shingle_hashes,
    template_lines,
    word_text,
    words_of,
)
from ragtrim.errors import ConfigError
from ragtrim.models import Chunk, TrimContext, TrimResult
from ragtrim.pipeline import Pipeline
from ragtrim.stages import dedup as dedup_module
from ragtrim.stages.base import stage_from_dict
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.text.sentences import normalize_text
from ragtrim.text.tokens import WhitespaceCounter

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
                                  "near": True, "keep": "best", "template_min_chunks": 3, "template_max_words": 20}
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
            ({"template_min_chunks": 2}, "template_min_chunks must be >= 3, got 2"),
            ({"template_min_chunks": 3.0}, "template_min_chunks must be an int"),
            ({"template_max_words": 0}, "template_max_words must be >= 1, got 0"),
            ({"template_max_words": None}, "template_max_words must be an int"),
        ],
    )
    def test_invalid(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            DuplicateFilter(**kwargs)  # type: ignore[arg-type]

    def test_template_can_be_disabled(self) -> None:
        s = DuplicateFilter(template_min_chunks=None, template_max_words=5)
        assert (s.template_min_chunks, s.template_max_words) == (None, 5)
        assert stage_from_dict(s.to_dict()).get_params() == s.get_params()

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
        assert word_text(sample).split() == shingles._WORD.findall(sample)

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
        monkeypatch.setattr(minhash, "_BLOCK_ROWS", 64)
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


SHORT = "the river flows north through the old town past the mill and into the lake below the hills"  # 18 words
OTHER = [f"an unrelated passage number {n} about {topic} with several words of its own here"
         for n, topic in enumerate(["trains", "bread", "stars", "chess"])]


class TestLineShinglesAndTemplates:
    def test_shingles_do_not_cross_lines(self) -> None:
        assert line_shingles("A b c d\ne, f", 3) == {("a", "b", "c"), ("b", "c", "d"), ("e", "f")}
        # Same eight words on one line vs two lines: the two line-crossing shingles are missing, J = 4/6.
        one, two = "w1 w2 w3 w4 w5 w6 w7 w8", "w1 w2 w3 w4\nw5 w6 w7 w8"
        result = run(DuplicateFilter(threshold=0.6, exact=False), [one, two])
        assert result.removals[0].detail == "jaccard 0.67 with chunk 0"
        assert run(DuplicateFilter(exact=False), [one, two]).removals == ()

    def test_template_lines_function(self) -> None:
        chunks = [[["read", "more"], ["body", str(i)]] for i in range(3)] + [[["read", "more"]] * 2]
        assert template_lines(chunks, min_chunks=3, max_words=20) == {("read", "more")}  # once per chunk
        assert template_lines(chunks, min_chunks=5, max_words=20) == frozenset()
        assert template_lines(chunks, min_chunks=3, max_words=1) == frozenset()  # too long to be a template

    def test_copy_with_replaced_template_lines_is_caught(self) -> None:
        # Header/footer lines from a shared pool, each in >= 3 chunks: template lines, not compared.
        base = f"Skip to main content\n{SHORT}\nRead more"
        copy = f"Advertisement\n{SHORT}\nComments (0)"
        others = [f"{h}\n{o}\n{f}" for h, o, f in zip(["Skip to main content", "Advertisement"] * 2, OTHER,
                                                        ["Read more", "Comments (0)"] * 2, strict=True)]
        result = run(DuplicateFilter(), [base, *others, copy])
        (r,) = result.removals
        assert (r.chunk_id, r.reason, r.kept_id) == ("5", "near_duplicate", "0")
        assert r.detail == "jaccard 1.00 with chunk 0, 4 template lines not compared"
        assert result.trace[0].info["template_lines"] == 4
        # Without template discounting the changed lines count as content: J = 16 / (16 + 3 + 2) = 0.76
        assert run(DuplicateFilter(template_min_chunks=None), [base, *others, copy]).removals == ()

    def test_one_off_changed_line_is_judged_on_content(self) -> None:
        # The header occurs once in the batch: it is content. Body 16 shingles + 2 x 4 header shingles: J = 16/24.
        base = f"Posted by user17 on 3 May\n{SHORT}"
        copy = f"Posted by user42 on 9 June\n{SHORT}"
        chunks = [base, *OTHER, copy]
        assert run(DuplicateFilter(), chunks).removals == ()
        (r,) = run(DuplicateFilter(threshold=0.65), chunks).removals
        assert r.detail == "jaccard 0.67 with chunk 0"

    def test_exact_copies_do_not_make_template_lines(self) -> None:
        # Three exact copies share every line, but count once: nothing becomes a template line.
        text = f"Short header line\n{SHORT}"
        chunks = [text, text.upper(), text + "  ", f"Short header line\n{OTHER[0]}"]
        result = run(DuplicateFilter(), chunks)
        assert result.trace[0].info["template_lines"] == 0
        assert [r.reason for r in result.removals] == ["exact_duplicate", "exact_duplicate"]

    def test_chunk_of_only_template_lines_keeps_its_full_set(self) -> None:
        lines = ["Read more", "Comments (0)"]
        chunks = [f"{lines[0]}\n{lines[1]}", *(f"{lines[0]}\n{o}\n{lines[1]}" for o in OTHER),
                  f"{lines[1]}\n{lines[0]}"]
        result = run(DuplicateFilter(), chunks)
        # The first and last chunks are all template lines: compared on their full sets, equal -> near duplicate.
        (r,) = result.removals
        assert (r.chunk_id, r.kept_id, r.detail) == ("5", "0", "jaccard 1.00 with chunk 0")

    def test_template_paths_agree(self, monkeypatch: pytest.MonkeyPatch) -> None:
        rng = random.Random(11)
        pool = ["Skip to main content", "Advertisement", "Read more", "Comments (0)", "Share this"]
        texts = []
        for _ in range(80):
            body = random_text(rng, rng.randrange(10, 60))
            texts.append(f"{rng.choice(pool)}\n{body}\n{rng.choice(pool)}")
            if rng.random() < 0.4:
                texts.append(f"{rng.choice(pool)}\n{body}\n{rng.choice(pool)}")
        chunks = [Chunk(t, f"c{i}") for i, t in enumerate(texts)]
        lsh = run(DuplicateFilter(), chunks)
        assert lsh.trace[0].info["near_method"] == "minhash_lsh"
        monkeypatch.setattr(dedup_module, "PAIRWISE_MAX_CHUNKS", 10**6)
        pure = run(DuplicateFilter(), chunks)
        monkeypatch.setattr(dedup_module, "PYTHON_PATH_MAX_CHARS", 0)
        indexed = run(DuplicateFilter(), chunks)
        got = [[(r.chunk_id, r.kept_id, r.detail) for r in res.removals] for res in (lsh, pure, indexed)]
        assert got[0] == got[1] == got[2]
        assert len(got[0]) == len(texts) - 80


def similar_stream(n: int, *, seed: int = 0, replaced: int = 12) -> list[str]:
    """Issue 14's hostile stream: one 200-word text, each copy with ``replaced`` words changed (Jaccard ~0.6 between
    copies: similar, never duplicates at 0.8)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    base = [rng.choice(vocab) for _ in range(200)]
    out = []
    for _ in range(n):
        words = list(base)
        for j in rng.sample(range(200), replaced):
            words[j] = rng.choice(vocab)
        out.append(" ".join(words))
    return out


class TestCandidateCaps:
    def test_similar_stream_is_capped_and_keeps_everything(self) -> None:
        result = run(DuplicateFilter(), similar_stream(400))
        info = result.trace[0].info
        assert len(result.chunks) == 400 and info["near_method"] == "minhash_lsh"
        assert info["near_candidates_capped"] > 0

    def test_exact_checks_grow_linearly(self, monkeypatch: pytest.MonkeyPatch) -> None:
        calls = [0]
        real = dedup_engine.jaccard

        def counting(a: Any, b: Any) -> float:
            calls[0] += 1
            return real(a, b)

        monkeypatch.setattr(dedup_engine, "jaccard", counting)
        run(DuplicateFilter(), similar_stream(150))
        small = calls[0]
        calls[0] = 0
        run(DuplicateFilter(), similar_stream(600))
        # All pairs (the old candidate generation) would be 16x; the caps bound the checks per chunk.
        assert calls[0] <= 8 * small
        assert calls[0] <= dedup_engine.LSH_MAX_CANDIDATES * 600

    def test_caps_never_drop_wrongly_and_still_catch_copies(self) -> None:
        stream = similar_stream(300, seed=1)
        rng = random.Random(2)
        copies = []
        for k in range(0, 300, 10):  # a near copy (2 words changed) of every tenth chunk, at the end
            words = stream[k].split()
            for j in rng.sample(range(200), 2):
                words[j] = "changed"
            copies.append(" ".join(words))
        stage = DuplicateFilter()
        result = run(stage, stream + copies)
        removals = result.trace[0].removals
        texts = {str(i): t for i, t in enumerate(stream + copies)}
        for r in removals:
            assert jaccard(line_shingles(texts[r.chunk_id], 3), line_shingles(texts[r.kept_id or ""], 3)) >= 0.8
        assert {r.chunk_id for r in removals} == {str(300 + i) for i in range(len(copies))}

    def test_ordinary_batch_does_not_reach_the_caps(self) -> None:
        rng = random.Random(3)
        texts = [random_text(rng, 120) for _ in range(200)]
        result = run(DuplicateFilter(), texts + texts[:20])
        assert result.trace[0].info["near_candidates_capped"] == 0
