"""The audit's analyses, with numbers worked out by hand: histograms, counting, prefix cache, documents, savings."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from ragtrim._util.stats import percentile
from ragtrim.audit.breakdown import ConversationGrowth, CountCache, Histogram, TopK, part_tokens
from ragtrim.audit.duplicates import DocumentAnalysis
from ragtrim.audit.prefix import PrefixAnalysis, PrefixCacheSim, recommended_order
from ragtrim.audit.reader import parse_request
from ragtrim.audit.savings import PrioritySample, SavingsConfig, TTFTCurve, _ratio_ci, measure
from ragtrim.errors import ConfigError, InputError
from ragtrim.text.tokens import WhitespaceCounter, count_batch, get_counter

REPO = Path(__file__).resolve().parents[2]


class TestHistogram:
    def test_percentiles_equal_the_full_list(self) -> None:
        rng = random.Random(3)
        values = [rng.randrange(50) for _ in range(501)]
        h = Histogram()
        for v in values:
            h.add(v)
        for q in (0, 1, 50, 95, 99, 100):
            assert h.percentile(q) == pytest.approx(percentile(values, q))
        assert h.total == sum(values) and h.max() == max(values)

    def test_empty_summary_is_null(self) -> None:
        assert Histogram().summary() == {"mean": None, "p50": None, "p95": None, "p99": None, "max": 0}

    def test_bins(self) -> None:
        h = Histogram()
        for v in (0, 5, 10, 10, 99):
            h.add(v)
        assert h.bins([0, 10, 50]) == [2, 2, 1]


class TestCounting:
    def test_batch_counts_equal_count(self) -> None:
        counter = get_counter("cl100k_base")
        texts = ["hello world", "", "<|endoftext|> special text is plain text", "ü" * 300, "hello world"]
        assert count_batch(counter, texts) == [counter.count(t) for t in texts]

    def test_cache_counts_each_text_once_and_survives_eviction(self) -> None:
        cache = CountCache(WhitespaceCounter(), max_entries=2)
        assert cache.counts(["a b", "c", "a b"]) == [2, 1, 2]
        assert cache.counts(["d e f", "g", "h i"]) == [3, 1, 2]
        assert cache.counts(["a b"]) == [2]  # forgotten, then counted again: never guessed
        assert cache.texts_encoded == 6

    def test_part_tokens_adds_framing_to_other(self) -> None:
        req = parse_request({"messages": [{"role": "system", "content": "s s"}, {"role": "user", "content": "q"}]}, 1)
        assert part_tokens(req, [2, 1]) == {"system": 2, "history": 0, "context": 0, "question": 1, "other": 11}

    def test_topk_keeps_largest_and_earliest_on_ties(self) -> None:
        top = TopK(2)
        for i, v in enumerate([5, 9, 0, 9, 1]):
            top.offer(v, f"r{i}", position=(0, i))
        assert [(t["request_id"], t["tokens"]) for t in top.items()] == [("r1", 9), ("r3", 9)]

    def test_topk_absorbed_in_any_order_keeps_the_earliest_on_ties(self) -> None:
        early, late = TopK(2), TopK(2)
        for i, v in enumerate([5, 9, 9]):
            early.offer(v, f"a{i}", position=(0, i))
        for i, v in enumerate([9, 7]):
            late.offer(v, f"b{i}", position=(1, i))
        late.absorb(early)  # the later file's list first: ties still go to the earlier request
        assert [t["request_id"] for t in late.items()] == ["a1", "a2"]


class TestConversations:
    def chat(self, turns: list[str], cid: str | None = None) -> Any:
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
        body: dict[str, Any] = {"messages": [{"role": "system", "content": "S"}, *msgs]}
        if cid:
            body["conversation_id"] = cid
        return parse_request(body, 1)

    def test_growth_and_repeated_openings(self) -> None:
        g = ConversationGrowth()
        g.add(self.chat(["hi"]), 0)
        g.add(self.chat(["hi", "yo", "next"]), 2)
        g.add(self.chat(["hi", "yo", "next", "ok", "last"]), 6)
        g.add(self.chat(["hi"]), 0)  # the same opening again: a new conversation
        d = g.to_dict()
        assert d["conversations"] == 2 and d["multi_request_conversations"] == 1
        assert d["requests_per_conversation"]["max"] == 3
        assert d["history_tokens_added_per_request"]["p50"] == 3  # (6 - 0) / 2
        assert d["max_history_tokens"]["max"] == 6

    def test_explicit_ids_and_bounded_memory(self) -> None:
        g = ConversationGrowth(max_conversations=1)
        g.add(self.chat(["a"], "c1"), 0)
        g.add(self.chat(["a", "b", "c"], "c1"), 2)
        g.add(self.chat(["x"], "c2"), 0)  # closes c1 early, its numbers kept
        d = g.to_dict()
        assert d["conversations"] == 2 and d["closed_early"] == 1 and d["multi_request_conversations"] == 1


class TestPrefixCache:
    def test_served_tokens_by_hand(self) -> None:
        sim = PrefixCacheSim(capacity_tokens=100, block_size=4)
        assert sim.serve([1, 2], [10, 5], ["system", "question"], 15) == 0  # cold
        # 10 system tokens cached: rounded down to 8 (full blocks)
        assert sim.serve([1, 3], [10, 5], ["system", "question"], 15) == 8
        # the whole prompt cached, but never the last token: 15 - 1 = 14 -> 12
        assert sim.serve([1, 3], [10, 5], ["system", "question"], 15) == 12
        assert sim.served_by_part == {"system": 18, "history": 0, "context": 0, "question": 2, "other": 0}
        assert sim.requests_with_hit == 2

    def test_lru_eviction_by_tokens(self) -> None:
        sim = PrefixCacheSim(capacity_tokens=10, block_size=1)
        sim.serve([1], [6], ["system"], 7)
        sim.serve([2], [6], ["system"], 7)  # evicts 1
        assert sim.serve([1], [6], ["system"], 7) == 0
        assert sim.evicted_tokens == 12

    def test_orphaned_prefix_is_not_counted_twice(self) -> None:
        sim = PrefixCacheSim(capacity_tokens=10, block_size=1)
        sim.serve([1, 2], [4, 4], ["system", "question"], 8)  # holds [1] and [1, 2]
        sim.serve([3], [4], ["system"], 4)  # evicts [1]: [1, 2] is left without its parent
        sim.serve([1, 2], [4, 4], ["system", "question"], 8)
        assert sim._held == sum(sim._lru.values()) <= 10

    def test_recommended_order(self) -> None:
        parts: list[Any] = ["question", "context", "system", "context", "history", "other"]
        texts = ["q", "zeta", "s", "alpha", "h", "tools"]
        assert [texts[i] for i in recommended_order(parts, texts)] == ["s", "tools", "h", "alpha", "zeta", "q"]

    def add_all(self, a: PrefixAnalysis, bodies: list[dict[str, Any]]) -> None:
        for i, body in enumerate(bodies):
            r = parse_request(body, i)
            a.add(r, [hash(s.text) for s in r.segments], [3] * len(r.segments), 3 * len(r.segments))

    def test_advice_on_system_prompt_variants(self) -> None:
        a = PrefixAnalysis(capacity_tokens=1000, block_size=1)
        self.add_all(a, [{"messages": [
            {"role": "system", "content": f"Long stable instructions here. Today is day {i}. Be kind and brief."},
            {"role": "user", "content": f"q{i}"}]} for i in range(6)])
        advice = {x["id"]: x for x in a.advice(6)}
        assert advice["system_prompt_variants"]["variants"] == 6
        assert advice["system_prompt_variants"]["common_prefix_chars"] == len("Long stable instructions here. Today is day ")
        assert a.system_summary(6)["distinct_system_prompts"] == 6

    def test_advice_on_order(self) -> None:
        a = PrefixAnalysis(capacity_tokens=1000, block_size=1)
        docs = [["doc A", "doc B"], ["doc B", "doc A"]]
        self.add_all(a, [{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": f"q{i}"}],
                          "documents": docs[i % 2]} for i in range(8)] + [
            {"messages": [{"role": "system", "content": "S\n<context>doc C</context>"},
                          {"role": "user", "content": "q"}]}])
        advice = {x["id"]: x for x in a.advice(9)}
        assert advice["reorder"]["gain_share_of_prompt_tokens"] > 0
        assert advice["context_in_system"]["requests"] == 1
        assert a.recommended.served_tokens > a.as_logged.served_tokens

    def test_no_text_leaves_previews_out(self) -> None:
        a = PrefixAnalysis(keep_text=False)
        self.add_all(a, [{"messages": [{"role": "system", "content": "secret"}, {"role": "user", "content": "q"}]}])
        assert "preview" not in a.system_summary(1)["top_variants"][0]


class TestDocuments:
    def test_exact_near_repeated_and_boilerplate(self) -> None:
        text = " ".join(f"word{i}" for i in range(60))
        near = text.replace("word30", "other")
        html = "<div><nav>Home | About | Contact | Login</nav><p>" + text + "</p><footer>(c) 2024</footer></div>"
        cache = CountCache(WhitespaceCounter())
        docs = DocumentAnalysis()
        r1 = parse_request({"id": "r1", "query": "q", "chunks": [text, text.upper(), near, "other text"]}, 1)
        r2 = parse_request({"id": "r2", "query": "q", "chunks": [text, html]}, 2)
        out = docs.add_batch([r1, r2], [[cache.counts([s.text])[0] for s in r.segments] for r in (r1, r2)],
                             docs.cache(cache))
        assert out[0].exact_duplicate_tokens == 60  # the upper-case copy: same normalized text
        assert out[0].near_duplicate_tokens == 60 and out[0].repeated_tokens == 0
        assert out[1].repeated_tokens == 60  # `text` again, in a later request
        # In the pipeline's order: the HTML stage cleans the page first (nav and footer: 67 - 60 = 7 tokens), then
        # dedup drops the cleaned page, the same passage as `text`, at its cleaned size.
        assert cache.counts([html])[0] == 67
        assert out[1].boilerplate_tokens == 7 and out[1].exact_duplicate_tokens == 60
        assert out[1].near_duplicate_tokens == 0
        d = docs.to_dict(1000)
        assert d["within_request"]["exact_duplicate_pieces"] == 2 and d["within_request"]["near_duplicate_pieces"] == 1
        assert d["within_request"]["exact_duplicate_share_of_prompt"] == 0.12  # 120 of 1,000
        assert d["within_request"]["near_duplicate_share_of_prompt"] == 0.06
        assert d["html"]["html_pieces"] == 1 and d["distinct_documents"] == 3

    def test_boilerplate_of_a_page(self) -> None:
        cache = CountCache(WhitespaceCounter())
        docs = DocumentAnalysis()
        page = ("<html><body><nav><a href=/>Home</a> <a href=/a>About</a> <a href=/c>Contact</a></nav>"
                "<article><p>The tower was finished in 1889 and is 330 metres tall.</p></article>"
                "<footer>Copyright 2024 Example Inc. All rights reserved.</footer></body></html>")
        r = parse_request({"query": "q", "chunks": [page]}, 1)
        out = docs.add_batch([r], [cache.counts([s.text for s in r.segments])], docs.cache(cache))
        assert 0 < out[0].boilerplate_tokens < cache.counts([page])[0]

    def test_cap_counts_untracked_pieces(self) -> None:
        cache = CountCache(WhitespaceCounter())
        docs = DocumentAnalysis(max_docs=1)
        r = parse_request({"query": "q", "chunks": ["a b", "c d"]}, 1)
        docs.add_batch([r], [[2, 2, 1]], docs.cache(cache))
        assert docs.to_dict(5)["method"]["untracked_pieces"] == 1 and docs.context_tokens == 4


class TestSavings:
    def test_sample_is_reproducible_and_complete_when_small(self) -> None:
        a, b = PrioritySample(3, 7), PrioritySample(3, 7)
        for i in range(100):
            a.offer((0, i), i)
            b.offer((0, i), i)
        assert a.items == b.items and len(a.items) == 3 and a.items == sorted(a.items)
        everything = PrioritySample(0, 0)
        for i in range(5):
            everything.offer((0, i), i)
        assert everything.items == [0, 1, 2, 3, 4]

    def test_sample_of_split_input_is_the_sample_of_the_whole(self) -> None:
        whole = PrioritySample(10, 3)
        parts = [PrioritySample(10, 3) for _ in range(4)]
        for i in range(400):
            whole.offer((i // 100, i), i)
            parts[i // 100].offer((i // 100, i), i)
        merged = parts[0]
        for p in parts[1:]:
            merged.absorb(p)
        assert merged.items == whole.items and merged.seen == whole.seen == 400

    def test_sample_is_uniform(self) -> None:
        """Each of 40 positions is picked by about 5 of 40 seeds' samples of 5: chi-square far below its 0.001
        critical value (72.1 for 39 degrees of freedom) for a uniform choice."""
        picks = [0] * 40
        for seed in range(400):
            s = PrioritySample(5, seed)
            for i in range(40):
                s.offer((0, i), i)
            for i in s.items:
                picks[i] += 1
        expected = 400 * 5 / 40
        assert sum((p - expected) ** 2 / expected for p in picks) < 72.1

    def test_ratio_interval(self) -> None:
        assert _ratio_ci([10, 10], [5, 0], 0, 0) == (0.25, 0.25, 0.25)
        ratio, lo, hi = _ratio_ci([10] * 50, [5] * 25 + [0] * 25, 500, 1)
        assert ratio == 0.25 and lo < 0.25 < hi

    @pytest.mark.parametrize("kwargs", [{"sample": -1}, {"budget": 0}, {"budget": 2.5}, {"history_turns": 0},
                                        {"bootstrap": -1}])
    def test_config_errors(self, kwargs: dict[str, Any]) -> None:
        with pytest.raises(ConfigError):
            SavingsConfig(**kwargs)

    def test_measure_trims_context_and_folds_history(self) -> None:
        chatter = ["Thanks, that sounds great!", "You're welcome, happy to help with anything else.",
                   "Haha, nice one. How was your weekend?", "It was lovely, thank you for asking!"]
        turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": chatter[i % 4]} for i in range(12)]
        doc = "Paris is the capital of France. " * 5
        req = parse_request({"messages": [*turns, {"role": "user", "content": "capital of France?"}],
                             "documents": [doc, doc, "<html><body><nav>a b c</nav><p>Bananas.</p></body></html>"]}, 1)
        counter = WhitespaceCounter()
        before = part_tokens(req, [counter.count(s.text) for s in req.segments])
        rec = measure(req, before, 10, counter, SavingsConfig(history_turns=2))
        assert rec.saved["context"] >= 30 and rec.saved_by_stage["dedup"] == 30
        assert rec.saved["history"] > 0 and rec.saved["system"] == rec.saved["question"] == 0
        assert rec.prompt_after == rec.prompt_before - rec.saved["context"] - rec.saved["history"]


class TestTTFTCurve:
    def test_interpolation_floor_and_extrapolation(self) -> None:
        c = TTFTCurve(((100.0, 20.0), (1100.0, 60.0)), "test")
        assert c.ttft_ms(50) == 20.0 and c.ttft_ms(600) == 40.0 and c.ttft_ms(2100) == 100.0

    def test_load_points_and_gpu_summary(self, tmp_path: Path) -> None:
        p = tmp_path / "curve.json"
        p.write_text(json.dumps([{"prompt_tokens": 1000, "ttft_ms": 40}, [64, 20]]))
        assert TTFTCurve.load(p).points == ((64.0, 20.0), (1000.0, 40.0))
        summary = TTFTCurve.load(REPO / "benchmarks" / "results" / "gpu" / "summary.json", config="12b_graphs_1024")
        assert len(summary.points) == 11 and summary.points[0][0] == 64.625

    def test_bad_curves(self, tmp_path: Path) -> None:
        p = tmp_path / "c.json"
        p.write_text("[[1, 2]]")
        with pytest.raises(ConfigError, match="at least 2 points"):
            TTFTCurve.load(p)
        p.write_text('[["a", 2], [3, 4]]')
        with pytest.raises(InputError, match="each point"):
            TTFTCurve.load(p)
        with pytest.raises(InputError, match="no len_"):
            TTFTCurve.load(REPO / "benchmarks" / "results" / "gpu" / "summary.json", config="nope")
