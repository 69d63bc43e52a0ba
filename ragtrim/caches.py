"""The per-process caches (token counts, BM25 tokens, sentence spans, embeddings) and one call that empties them.

A benchmark that reports cold latency calls ``clear_caches()`` before every request, so nothing a request needs
was computed by an earlier one: the situation of a service whose retrieved passages are new to it. The persistent
passage-vector store (``ragtrim.vectors``) is not emptied: a cold measurement runs without one
(``RAGTRIM_VECTOR_STORE=off``, which the evaluation package sets unless a benchmark opts in; ``ragtrim bench`` turns
it off itself).
"""

from __future__ import annotations


def clear_caches() -> None:
    """Forget every cached token count, BM25 tokenization, sentence split, table view, near-duplicate line analysis
    and embedding; loaded models stay."""
    # imported here: ``ragtrim.savings`` imports this module, and ``ragtrim bench`` must start without numpy work
    from ragtrim.dedup.engine import clear_line_cache
    from ragtrim.scoring.bm25 import clear_tokenizer_cache
    from ragtrim.scoring.registry import shared_scorers
    from ragtrim.scoring.tables import clear_table_cache
    from ragtrim.stages import compress
    from ragtrim.text import sentences, tokens

    clear_tokenizer_cache()
    sentences.clear_sentence_cache()
    compress.clear_sentence_cache()
    clear_table_cache()
    clear_line_cache()
    tokens.clear_counter_caches()
    for scorer in shared_scorers():
        _clear_scorer(scorer)


def _clear_scorer(scorer: object) -> None:
    clear = getattr(scorer, "clear_cache", None)
    if callable(clear):
        clear()
    for part in getattr(scorer, "parts", lambda: ())():  # a hybrid's own scorers
        _clear_scorer(part)
    for attr in ("first", "second"):  # a cascade's stages
        inner = getattr(scorer, attr, None)
        if inner is not None and not isinstance(inner, str):
            _clear_scorer(inner)
