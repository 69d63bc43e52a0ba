"""clear_caches(): a cold benchmark's starting point empties every per-process cache."""

from __future__ import annotations

from ragtrim.caches import clear_caches
from ragtrim.dedup import engine
from ragtrim.inputs import coerce_chunks
from ragtrim.models import TrimContext
from ragtrim.scoring import bm25
from ragtrim.scoring.registry import get_scorer
from ragtrim.stages import compress
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.text import sentences as text
from ragtrim.text.tokens import get_counter


def test_clear_caches_empties_counts_tokens_sentences() -> None:
    counter = get_counter("cl100k_base")
    counter.count("a sentence that is now cached")
    bm25.tokenize("words to tokenize")
    text.sentence_spans("One sentence. Another one here.")
    get_scorer("bm25").score("q", ["cached text"])
    compress._cached_parts("One sentence. Another one here.")
    DuplicateFilter().run(TrimContext(query="", chunks=coerce_chunks(["a b c d", "a b c e"])),
                          counter=counter)
    assert len(bm25._tokens.cache) > 0 and len(compress._cached_parts.cache) > 0
    assert len(engine.folded_and_key.cache) > 0 and len(engine._analysed_lines.cache) > 0
    clear_caches()
    assert len(engine.folded_and_key.cache) == 0 and len(engine._analysed_lines.cache) == 0
    assert len(bm25._tokens.cache) == 0
    assert len(compress._cached_parts.cache) == 0
    assert len(text._sentence_spans.cache) == 0
    assert len(counter._cache) == 0


def test_clear_caches_reaches_into_composite_scorers() -> None:
    class Spy:
        cleared = 0
        name = "spy"

        def score(self, query: str, texts: object) -> list[float]:
            return []

        def clear_cache(self) -> None:
            Spy.cleared += 1

    from ragtrim.caches import _clear_scorer
    from ragtrim.scoring.cascade import CascadeScorer
    from ragtrim.scoring.hybrid import HybridScorer

    _clear_scorer(CascadeScorer(first="bm25", second=HybridScorer(scorers=(Spy(), "bm25"))))
    assert Spy.cleared == 1


def test_dedup_keeps_passages_not_whole_pages() -> None:
    clear_caches()
    passage, page = "A passage of a few words.", "word " * 20_000
    DuplicateFilter().run(TrimContext(query="", chunks=coerce_chunks([passage, page, passage + " More."])),
                          counter=get_counter("cl100k_base"))
    assert (passage,) in engine.folded_and_key.cache and (page,) not in engine.folded_and_key.cache
    assert len(engine._analysed_lines.cache) == 2  # the two passages' lines, not the page's
