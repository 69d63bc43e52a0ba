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
    line_tokens,
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
        assert s.get_params() == {"threshold": 0.8, "num_perm": 128, "shingle_words": 3, "shingle_chars": 6, "seed": 1,
                                  "exact": True, "near": True, "keep": "best", "template_min_chunks": 3,
                                  "template_max_words": 20, "keep_differing_values": True}
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
            ({"shingle_chars": 0}, "shingle_chars must be >= 1, got 0"),
            ({"shingle_chars": 65}, "shingle_chars must be <= 64, got 65"),
            ({"keep_differing_values": "yes"}, "keep_differing_values must be True or False"),
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


    def test_texts_met_again_are_judged_on_their_new_batch(self) -> None:
        """A text's lines are cached (``_analysed_lines``); which of them are template lines is still decided by the
        batch: the same texts give the same result warm, in any batch, as cold."""
        rng = random.Random(5)
        pool = ["Skip to main content", "Read more", "Share this"]
        texts = [f"{rng.choice(pool)}\n{random_text(rng, 30)}\n{rng.choice(pool)}" for _ in range(12)]
        texts += [texts[0].replace(pool[0], "Advertisement"), texts[1] + "\nComments (0)"]
        batches = [texts, texts[:2] + texts[-2:], texts[::-1], texts[5:] + texts[:5]]

        def removals(batch: list[str]) -> list[tuple[str, str | None, str]]:
            chunks = [Chunk(t, f"c{texts.index(t)}") for t in batch]
            return [(r.chunk_id, r.kept_id, r.detail) for r in run(DuplicateFilter(), chunks).removals]

        warm = [removals(b) for b in batches]
        cold = []
        for b in batches:
            dedup_engine.clear_line_cache()
            cold.append(removals(b))
        assert warm == cold
        assert any(warm) and any("template line" in d for res in warm for _, _, d in res)


def similar_stream(n: int, *, seed: int = 0, replaced: int = 12) -> list[str]:
    """A hostile stream: one 200-word text, each copy with ``replaced`` words changed (Jaccard ~0.6 between
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


# A Japanese page (two articles) and its English translation, each under two sites' headers and footers.
JA_PAGE = """宇都宮市と芳賀町を結ぶ次世代型路面電車が、八月二十六日に開業した。
新設の路面電車としては国内で七十五年ぶりとなり、開業初日から多くの市民が列をつくった。
全長約十五キロの路線に十九の停留場があり、宇都宮駅東口から工業団地までを約四十四分で結ぶ。
車両は三両編成の低床式で、車いすやベビーカーでも段差なく乗り降りできる。
運賃は距離に応じて百五十円から四百円で、交通系ICカードが使える。
市は渋滞の緩和と沿線の再開発につなげたい考えで、将来は駅の西側への延伸も検討している。
一方で、開業直後は自動車との接触事故も起きており、運行会社は安全運転の徹底を呼びかけている。
北海道函館市で、秋の味覚を集めた「はこだてグルメフェスタ」が週末の二日間開かれた。
会場の赤レンガ倉庫前には道南の飲食店など六十店が並び、イカやホタテを使った料理が人気を集めた。
名物のイカめしは昼前に売り切れる店が相次ぎ、長い行列ができた。
今年は初めて、地元の高校生が考案した新しいスイーツの販売コーナーも設けられた。
主催者によると、二日間の来場者は約四万五千人で、昨年を一割ほど上回った。
実行委員長は「来年は会場を広げ、海外からの観光客にも楽しんでもらいたい」と話した。"""
JA_SITES = (("ニュース速報 | 経済 | 地域 | スポーツ | 天気\n日本地域新聞デジタル 会員ログイン\n",
             "\n記事の無断転載を禁じます。\nお問い合わせ | 会社案内 | 個人情報の取り扱い © 日本地域新聞社"),
            ("まとめニュース > 国内 > 最新記事\nこの記事は約3分で読めます\n",
             "\nこの記事が気に入ったらフォローしよう\n人気記事ランキング 1位 2位 3位\n運営者情報 免責事項 Copyright まとめニュース"))
EN_PAGE = """A next-generation tram linking Utsunomiya and the town of Haga opened on August 26.
It is the first newly built tram line in the country in 75 years, and crowds of residents queued on the first day.
The line is about 15 km long with 19 stops, and runs from the east exit of Utsunomiya Station to an industrial park in about 44 minutes.
The low-floor trains have three cars, so wheelchairs and pushchairs can board without a step.
Fares range from 150 to 400 yen depending on distance, and transport IC cards are accepted.
The city hopes it will ease congestion and spur redevelopment along the route, and is considering extending it west of the station.
There have already been collisions with cars since the opening, and the operator is urging drivers to take care.
The Hakodate Gourmet Festa, a celebration of autumn food, was held over two days at the weekend in Hakodate, Hokkaido.
Sixty restaurants from southern Hokkaido lined up in front of the red brick warehouses, and dishes made with squid and scallops were popular.
Stall after stall sold out of the famous stuffed squid before noon, and long queues formed.
This year, for the first time, there was also a corner selling new sweets devised by local high school students.
According to the organisers, about 45,000 people came over the two days, some 10 percent more than last year.
The head of the organising committee said they hoped to enlarge the venue next year and welcome visitors from abroad too."""
EN_SITES = (("Breaking news | Business | Regions | Sports | Weather\nJapan Regional News Digital Member login\n",
             "\nReproduction of articles without permission is prohibited.\nContact | About us | Privacy (c) Japan Regional News"),
            ("Roundup News > Japan > Latest\nThis article takes about 3 minutes to read\n",
             "\nFollow us if you liked this article\nPopular articles 1st 2nd 3rd\nAbout the operator Disclaimer Copyright Roundup News"))
ZH_PAGE = """连接福州和厦门的福厦高铁于九月二十八日正式开通运营。
这是我国第一条跨海高铁，全长约二百七十七公里，设计时速三百五十公里。
线路途经莆田和泉州，沿途共设八座车站，其中三座跨越海湾。
开通后，福州至厦门最快只需五十五分钟，比过去缩短了一半以上。
首日共开行列车六十余对，车票在开售后几分钟内就被抢购一空。
当地政府表示，高铁将进一步带动沿线城市的旅游和产业发展。
受台风“海燕”影响，广东省气象台今天上午发布了台风红色预警。
预计台风将于明天傍晚在湛江到茂名一带沿海登陆，登陆时中心附近最大风力可达十四级。
广州、深圳等地的中小学和幼儿园明天全部停课，部分航班和高铁列车已经取消。
气象部门提醒市民尽量减少外出，远离广告牌和临时搭建物。
渔船已全部回港避风，沿海地区共转移群众约十二万人。
应急部门表示，将密切关注台风动向，及时发布最新信息。"""
ZH_SITES = (("首页 | 国内 | 国际 | 财经 | 科技 | 体育\n华夏新闻网 客户端下载\n",
             "\n责任编辑：王明\n本网站所刊登的信息未经授权不得转载 联系我们 网站地图 © 华夏新闻网"),
            ("当前位置：首页 > 资讯 > 正文\n阅读模式 字号 大 中 小\n",
             "\n相关阅读 热门推荐 猜你喜欢\n关于本站 | 广告服务 | 投诉建议 | 京ICP备12345678号"))


def two_sites(page: str, sites: tuple[tuple[str, str], tuple[str, str]]) -> list[str]:
    return [header + page + footer for header, footer in sites]


class TestTextWithoutSpaces:
    """Han/Kana lines are shingled by characters, so a page under another site's chrome is the same page in
    Japanese and Chinese where it is in English (word shingles saw one "word" per clause)."""

    def test_line_tokens(self) -> None:
        assert line_tokens("京都の紅葉は、例年") == ("京 都 の 紅 葉 は 例 年", True)
        # Latin words and digits inside a Japanese line stay words; a line goes by characters when most of its letters
        # are Han/Kana; Korean keeps its words; English is unchanged.
        assert line_tokens("東京ではragtrimを2024年に使う") == ("東 京 で は ragtrim を 2024 年 に 使 う", True)
        assert line_tokens("축제는 지역 곳곳에서") == ("축제는 지역 곳곳에서", False)
        assert line_tokens("mostly english with 東京") == ("mostly english with 東京", False)

    def test_line_shingles_by_characters(self) -> None:
        assert line_shingles("東京タワー\nthe old mill", 3, 4) == {
            ("東", "京", "タ", "ワ"), ("京", "タ", "ワ", "ー"), ("the", "old", "mill")}

    @pytest.mark.parametrize(("page", "sites", "detail"), [
        (JA_PAGE, JA_SITES, "jaccard 0.81 with chunk 0"),
        (ZH_PAGE, ZH_SITES, "jaccard 0.80 with chunk 0"),
        (EN_PAGE, EN_SITES, "jaccard 0.86 with chunk 0"),
    ])
    def test_page_under_another_sites_chrome_is_a_near_duplicate(
            self, page: str, sites: tuple[tuple[str, str], tuple[str, str]], detail: str) -> None:
        result = run(DuplicateFilter(), two_sites(page, sites))
        assert [(r.chunk_id, r.reason, r.detail) for r in result.removals] == [("1", "near_duplicate", detail)]

    def test_word_shingles_on_japanese_missed_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        a, b = two_sites(JA_PAGE, JA_SITES)
        assert jaccard(line_shingles(a, 3), line_shingles(b, 3)) == pytest.approx(416 / 514)
        # Shingled by words, as every line once was: one \w+ "word" per clause, 29 shingles, most of them the sites'.
        monkeypatch.setattr(shingles, "is_spaceless", lambda line, **_: False)
        assert jaccard(line_shingles(a, 3), line_shingles(b, 3)) == pytest.approx(15 / 29)
        dedup_engine.clear_line_cache()  # the stage's cached lines of these texts were shingled by characters
        try:
            assert run(DuplicateFilter(), [a, b]).removals == ()
        finally:
            dedup_engine.clear_line_cache()  # and must not stay shingled by words

    def test_different_articles_under_one_site_are_kept(self) -> None:
        header, footer = JA_SITES[0]
        first, second = JA_PAGE.split("\n北海道")
        result = run(DuplicateFilter(), [header + first + footer, header + "北海道" + second + footer])
        assert result.removals == ()

    def test_japanese_template_lines_are_learnt(self) -> None:
        # Each site's lines recur in 3 distinct chunks: left out, so the two copies compare on their content alone.
        lines = JA_PAGE.split("\n")
        bodies = ["\n".join(lines[:5]), "\n".join(lines[5:9]), "\n".join(lines[9:])]
        chunks = [h + body + f for h, f in JA_SITES for body in bodies]
        result = run(DuplicateFilter(keep="first"), chunks)
        assert [(r.chunk_id, r.kept_id, r.detail.split(", ")[0]) for r in result.removals] == [
            ("3", "0", "jaccard 1.00 with chunk 0"), ("4", "1", "jaccard 1.00 with chunk 1"),
            ("5", "2", "jaccard 1.00 with chunk 2")]
        assert result.trace[0].info["template_lines"] == 9

    def test_shingle_chars_is_used(self) -> None:
        a, b = two_sites(JA_PAGE, JA_SITES)
        assert run(DuplicateFilter(shingle_chars=3), [a, b]).removals == ()  # jaccard 0.799
        longer = run(DuplicateFilter(shingle_chars=9), [a, b]).removals
        assert [r.detail for r in longer] == ["jaccard 0.84 with chunk 0"]

    def test_paths_agree_on_mixed_scripts(self, monkeypatch: pytest.MonkeyPatch) -> None:
        chunks = [*two_sites(JA_PAGE, JA_SITES), *two_sites(ZH_PAGE, ZH_SITES), *two_sites(EN_PAGE, EN_SITES)]
        want = [(r.chunk_id, r.kept_id, r.detail) for r in run(DuplicateFilter(), chunks).removals]
        assert len(want) == 3
        monkeypatch.setattr(dedup_module, "PYTHON_PATH_MAX_CHARS", 0)  # the numpy inverted index
        assert [(r.chunk_id, r.kept_id, r.detail) for r in run(DuplicateFilter(), chunks).removals] == want
        monkeypatch.setattr(dedup_module, "PAIRWISE_MAX_CHUNKS", 1)  # MinHash LSH
        assert [(r.chunk_id, r.kept_id, r.detail) for r in run(DuplicateFilter(), chunks).removals] == want


# Two ~80-word chunks that differ in the plan and its rate limit only.
FREE_PLAN = ("The Free plan is meant for trying the API on small projects and personal tools. It allows 60 requests "
             "per minute and 10,000 requests per month, with a maximum payload of 2 MB for each request. Responses "
             "are cached for five minutes, and every endpoint is available, including search, embeddings and batch "
             "jobs. Requests above the limit get HTTP status 429 with a Retry-After header, and the monthly counter "
             "resets at midnight UTC on the first day of each month for every account.")
PRO_PLAN = FREE_PLAN.replace("The Free plan", "The Pro plan").replace("60 requests", "600 requests")


class TestDifferingValues:
    """Chunks whose numbers, dates, versions or amounts differ are never merged; the trace says why."""

    def test_free_and_pro_plans_are_both_kept(self) -> None:
        assert jaccard(line_shingles(FREE_PLAN, 3), line_shingles(PRO_PLAN, 3)) == pytest.approx(78 / 88)
        chunks = [Chunk(FREE_PLAN, "free", score=0.9), Chunk(PRO_PLAN, "pro", score=0.4)]
        result = run(DuplicateFilter(), chunks)
        assert [c.id for c in result.chunks] == ["free", "pro"] and result.removals == ()
        info = result.trace[0].info
        assert info["value_conflicts"] == 1 and info["near_duplicates"] == 0
        assert info["value_conflict_details"] == [
            "chunk pro kept beside chunk free (jaccard 0.89): values differ, 600 vs 60 (after 'it allows')"]

    def test_merging_anyway_says_so(self) -> None:
        chunks = [Chunk(FREE_PLAN, "free", score=0.9), Chunk(PRO_PLAN, "pro", score=0.4)]
        result = run(DuplicateFilter(keep_differing_values=False), chunks)
        (r,) = result.removals
        assert (r.chunk_id, r.kept_id) == ("pro", "free")
        assert r.detail == "jaccard 0.89 with chunk free, merged although values differ: 600 vs 60 (after 'it allows')"
        assert result.trace[0].info["value_conflicts"] == 0

    @pytest.mark.parametrize(("field", "new", "values"), [
        ("version", "v2.6", "2.6 vs 2.5 (after 'of ragtrim')"),
        ("date", "4 March 2025", "4 march 2025 vs 3 march 2025 (after 'closes on')"),
        ("price", "$59", "$59 vs $49 (after 'it costs')"),
        ("days", "3", "3 vs 2.5 (after 'arrives in')"),
    ])
    def test_versions_dates_amounts(self, field: str, new: str, values: str) -> None:
        text = ("The release of ragtrim {version} closes on {date} and it costs {price} per seat. The package arrives "
                "in {days} days after the order, and the team answers questions about the migration, the upgrade "
                "steps and the deprecated options in the forum every weekday morning before the office opens.")
        old = {"version": "v2.5", "date": "3 March 2025", "price": "$49", "days": "2.5"}
        base, changed = text.format(**old), text.format(**{**old, field: new})
        result = run(DuplicateFilter(), [base, changed])
        assert result.removals == ()
        (detail,) = result.trace[0].info["value_conflict_details"]
        assert detail.endswith(f"values differ, {values}")

    def test_same_values_with_other_boilerplate_are_still_merged(self) -> None:
        a = "Posted in Pricing\n" + PRO_PLAN + "\nShare this page"
        b = "Docs > Plans > Pro\n" + PRO_PLAN + "\nWas this page helpful? Yes No"
        (r,) = run(DuplicateFilter(), [a, b]).removals
        assert (r.chunk_id, r.reason, r.detail) == ("1", "near_duplicate", "jaccard 0.92 with chunk 0")

    def test_a_value_only_one_copy_has_is_no_conflict(self) -> None:
        # A window that starts three words later: "2019" is gone from it, no value replaced it.
        text = ("In 2019 the council approved the plan to rebuild the bridge over the river and to widen the road "
                "through the market square so that buses and bicycles could share the new lanes safely")
        words = text.split()
        a, b = " ".join(words[:-3]), " ".join(words[3:])
        (r,) = run(DuplicateFilter(), [a, b]).removals
        assert r.reason == "near_duplicate"

    def test_next_most_similar_copy_without_conflict_is_chosen(self) -> None:
        # "pro" conflicts with the most similar kept chunk ("free") but agrees with a kept copy of itself.
        copy = "Pricing\n" + PRO_PLAN
        chunks = [Chunk(FREE_PLAN, "free", score=0.9), Chunk(copy, "pro-copy", score=0.8), Chunk(PRO_PLAN, "pro", score=0.4)]
        result = run(DuplicateFilter(), chunks)
        (r,) = result.removals
        assert (r.chunk_id, r.kept_id) == ("pro", "pro-copy")
        assert result.trace[0].info["value_conflicts"] == 1  # "pro-copy" itself was kept beside "free"

    def test_japanese_amounts(self) -> None:
        base = ("旅行の予算は一人あたり3万円以内で、締め切りは今週の金曜日です。ホテルは駅から歩いて五分以内の場所を希望して"
                "います。朝食付きのプランがあれば、そちらを優先してください。")
        result = run(DuplicateFilter(), [base, base.replace("3万円", "5万円")])
        assert result.removals == ()
        assert result.trace[0].info["value_conflict_details"][0].endswith("values differ, 5 vs 3 (after 'たり')")
