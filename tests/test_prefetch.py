"""Pipeline prefetch: the relevance stage's model pass on the background thread while the CPU stages work.

The result must be the same with and without prefetch; the model pass must not run twice; a failed prefetch must
surface as the model's own error in the caller's thread (``score`` encodes again), never be lost silently."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from ragtrim import Pipeline
from ragtrim.api import default_stages
from ragtrim.errors import ConfigError, StageError
from ragtrim.models import StageOutput, TrimContext
from ragtrim.scoring.bm25 import BM25Scorer
from ragtrim.scoring.cascade import CascadeScorer
from ragtrim.scoring.embedding import CachedEmbedder
from ragtrim.scoring.hybrid import HybridScorer
from ragtrim.stages.base import Stage
from ragtrim.stages.relevance import RelevanceFilter
from ragtrim.text.tokens import TokenCounter

PASSAGES = [
    "The Eiffel Tower was built by Gustave Eiffel's company for the 1889 World's Fair in Paris. It is 330 m tall.",
    "Paris is the capital of France. The city hosts many museums, the Louvre among them.",
    "Cats sleep up to sixteen hours a day. They are crepuscular animals.",
    "The tower was the tallest man-made structure in the world until 1930. Its design was criticised at first.",
    "Bananas are berries, botanically speaking. Strawberries are not.",
]
QUERY = "who built the eiffel tower"


class CountingEmbedder(CachedEmbedder):
    """A deterministic bag-of-letters embedder that records which thread encoded which texts (each row depends on
    its own text only, so it may take them all in one call)."""

    batch_invariant = True

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__(cache_size=1024)
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.fail = fail

    @property
    def name(self) -> str:
        return "counting"

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append((threading.current_thread().name, tuple(texts)))
        if self.fail:
            raise RuntimeError("model exploded")
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def fast_like(embedder: CachedEmbedder) -> CascadeScorer:
    mixed = HybridScorer(scorers=(BM25Scorer(), embedder), method="mix", weights=(0.4, 0.6))
    return CascadeScorer(first="bm25", second=mixed, candidates=32)


def pipeline(scorer: object, *, prefetch: bool, budget: int = 40) -> Pipeline:
    stages = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s  # type: ignore[arg-type]
              for s in default_stages(budget=budget, scorer="bm25")]
    return Pipeline(stages, tokenizer="whitespace", prefetch=prefetch)


def test_same_result_with_and_without_prefetch() -> None:
    on = pipeline(fast_like(CountingEmbedder()), prefetch=True).run(PASSAGES, query=QUERY)
    off = pipeline(fast_like(CountingEmbedder()), prefetch=False).run(PASSAGES, query=QUERY)
    assert on.text == off.text and on.text
    assert [c.id for c in on.chunks] == [c.id for c in off.chunks]
    assert [(r.chunk_id, r.reason) for r in on.removals] == [(r.chunk_id, r.reason) for r in off.removals]


def test_model_pass_runs_once_on_the_background_thread() -> None:
    embedder = CountingEmbedder()
    pipeline(fast_like(embedder), prefetch=True).run(PASSAGES, query=QUERY)
    assert len(embedder.calls) == 1
    thread, texts = embedder.calls[0]
    assert thread.startswith("ragtrim-prefetch")
    assert set(texts) == {QUERY, *PASSAGES}


def test_without_prefetch_the_caller_encodes() -> None:
    embedder = CountingEmbedder()
    pipeline(fast_like(embedder), prefetch=False).run(PASSAGES, query=QUERY)
    assert [t for t, _ in embedder.calls] == [threading.current_thread().name]


def test_html_chunks_are_not_prefetched() -> None:
    embedder = CountingEmbedder()
    html = "<html><body><nav>Home | About</nav><p>The Eiffel Tower was built by Eiffel's company.</p></body></html>"
    pipeline(fast_like(embedder), prefetch=True).run([*PASSAGES[:2], html], query=QUERY)
    assert html not in embedder.calls[0][1]


def test_failed_prefetch_raises_in_the_caller() -> None:
    embedder = CountingEmbedder(fail=True)
    with pytest.raises(StageError, match="model exploded") as info:
        pipeline(fast_like(embedder), prefetch=True).run(PASSAGES, query=QUERY)
    assert info.value.stage == "relevance"
    assert [t.startswith("ragtrim-prefetch") for t, _ in embedder.calls] == [True, False]


def test_a_stage_whose_prefetch_raises_is_named() -> None:
    class Broken(Stage):
        name = "broken"

        def prefetch(self, context: TrimContext, *, counter: TokenCounter) -> None:
            raise ValueError("bad prefetch")

        def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
            return StageOutput(context)

    with pytest.raises(StageError, match="prefetch: ValueError: bad prefetch"):
        Pipeline([Broken()]).run(PASSAGES, query=QUERY)
    assert Pipeline([Broken()], prefetch=False).run(PASSAGES, query=QUERY).text


def test_each_stages_prefetch_is_timed_apart_from_its_run() -> None:
    class SlowPrefetch(Stage):
        name = "slow"

        def prefetch(self, context: TrimContext, *, counter: TokenCounter) -> None:
            threading.Event().wait(0.05)

        def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
            return StageOutput(context)

    stages = [SlowPrefetch(), *default_stages(budget=100, scorer="bm25")]
    result = Pipeline(stages).run(PASSAGES, query=QUERY)
    timed = dict(result.prefetch_seconds)
    assert list(timed) == [s.name for s in stages]
    assert timed["slow"] >= 0.05 and result.trace[0].seconds < 0.05  # its run does not carry its prefetch
    assert dataclasses.replace(result, prefetch_seconds=()) == result  # not compared
    assert Pipeline(stages, prefetch=False).run(PASSAGES, query=QUERY).prefetch_seconds == ()
    assert Pipeline(stages).run(PASSAGES, query="").prefetch_seconds == ()


def test_no_prefetch_without_a_query() -> None:
    embedder = CountingEmbedder()
    pipeline(fast_like(embedder), prefetch=True).run(PASSAGES, query="")
    assert embedder.calls == []


def test_prefetch_flag_round_trips_and_is_checked() -> None:
    p = Pipeline(default_stages(budget=100, scorer="bm25"), prefetch=False)
    assert p.to_dict()["prefetch"] is False
    assert Pipeline.from_dict(p.to_dict()).prefetch is False
    assert "prefetch" not in Pipeline(default_stages(budget=100, scorer="bm25")).to_dict()
    with pytest.raises(ConfigError, match="prefetch must be True or False"):
        Pipeline([], prefetch="yes")  # type: ignore[arg-type]


def test_cascade_prefetches_only_what_it_will_rescore() -> None:
    embedder = CountingEmbedder()
    many = [f"Passage {i} about towers and bridges number {i}." for i in range(10)] + PASSAGES
    scorer = CascadeScorer(first="bm25", second=embedder, candidates=3)
    scorer.prefetch(QUERY, many)
    scores = scorer.score(QUERY, many)
    assert len(embedder.calls) == 1 and len(embedder.calls[0][1]) == 4  # the query and the 3 candidates
    assert scores == CascadeScorer(first="bm25", second=CountingEmbedder(), candidates=3).score(QUERY, many)


def test_a_cascade_whose_first_stage_is_a_model_starts_the_second_on_the_query_meanwhile() -> None:
    first, second = CountingEmbedder(), CountingEmbedder()
    many = [f"Passage {i} about towers and bridges number {i}." for i in range(10)] + PASSAGES
    scorer = CascadeScorer(first=first, second=second, candidates=3)
    scorer.prefetch(QUERY, many)
    scores = scorer.score(QUERY, many)
    assert second.calls[0][1] == (QUERY,)  # before the first stage had ranked anything
    assert sorted(len(texts) for _, texts in second.calls) == [1, 3]  # then only the 3 candidates
    assert scores == CascadeScorer(first=CountingEmbedder(), second=CountingEmbedder(), candidates=3).score(QUERY,
                                                                                                             many)


def test_embed_of_other_texts_does_not_wait_for_a_prefetch() -> None:
    gate = threading.Event()

    class Slow(CountingEmbedder):
        def _encode(self, texts: Sequence[str]) -> np.ndarray:
            if threading.current_thread().name.startswith("ragtrim-prefetch"):
                assert gate.wait(10)
            return super()._encode(texts)

    embedder = Slow()
    embedder.prefetch(QUERY, PASSAGES[:2])
    other = embedder.embed(["a text of another request"])  # returns while the prefetch is still blocked
    assert other.shape == (1, 26) and embedder._pending is not None
    gate.set()
    embedder.embed(PASSAGES[:2])  # waits for the prefetch and finds its texts cached
    assert [len(texts) for _, texts in embedder.calls] == [1, 3]


def test_compress_prefetch_leaves_sentence_counts_to_run_while_a_model_pass_runs() -> None:
    """The prefetch splits and tokenizes; counting every sentence beside a model pass would take the CPU from it,
    and ``run`` counts only the few it can still fit."""
    from ragtrim._util.background import background_busy, submit_background
    from ragtrim.inputs import coerce_chunks
    from ragtrim.stages.compress import SentenceCompressor
    from ragtrim.text.tokens import ApproxCounter

    counter = ApproxCounter()
    stage = SentenceCompressor(max_tokens=30)
    context = TrimContext(query=QUERY, chunks=coerce_chunks(PASSAGES))
    release = threading.Event()
    busy = submit_background(release.wait, 5.0)
    try:
        assert background_busy()
        stage.prefetch(context, counter=counter)
    finally:
        release.set()
        busy.result()
    sentences = [s.text for s in stage._split(context.chunks, counter)]
    assert len(sentences) > len(PASSAGES)
    assert not [s for s in sentences if counter.cached(s)]
