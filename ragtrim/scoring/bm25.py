"""BM25: its tokenizer (cached per text, primed from a passage's sentences) and the Okapi scorer.

The tokens and scores every BM25 use in ragtrim shares: the relevance stage, sentence compression, the fast path's
first stage and the benchmarks' distractor mining.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Sequence
from itertools import chain, filterfalse
from typing import Any, ClassVar

import numpy as np

from ragtrim._util.lru import bounded_cache
from ragtrim._util.validate import Boolean, Constraints, Interval
from ragtrim.components import Component, component, register
from ragtrim.scoring.base import check_score_inputs as _check_inputs
from ragtrim.scoring.registry import named_scorer
from ragtrim.text.stopwords import STOPWORDS as _STOPWORDS

# -- tokenization ---------------------------------------------------------------------------------------------------
# Numbers keep their inner separators ("1,000" -> "1000", "3.5" stays "3.5"); words are runs of letters, so
# "obama's" gives "obama" + "s" (a stopword) and "covid19" gives "covid" + "19".
_WORD = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+", re.UNICODE)
_WORD_ASCII = re.compile(r"[a-z]+|[0-9]+(?:[.,:][0-9]+)*", re.ASCII)
"""``_WORD`` on lower-cased ASCII text: the same tokens, with cheaper ASCII classes (a test compares them)."""


def _weigh_tokens(args: tuple[Any, ...], toks: tuple[str, ...]) -> int:
    # An O(1) upper estimate: the tokens' characters are at most the text's, plus one str object per token.
    return 2 * sys.getsizeof(args[0]) + sys.getsizeof(toks) + 56 * len(toks)


@bounded_cache(max_entries=65536, weigh=_weigh_tokens)
def _tokens(text: str, stopwords: bool) -> tuple[str, ...]:
    norm = unicodedata.normalize("NFKC", text).lower()
    toks = (_WORD_ASCII if norm.isascii() else _WORD).findall(norm)
    if "," in norm:  # only numbers can hold a comma ("1,000"): the per-token pass is needed only then
        toks = [t.replace(",", "") if t[0].isdigit() else t for t in toks]
    return tuple(filterfalse(_STOPWORDS.__contains__, toks)) if stopwords else tuple(toks)


def prime_tokens(text: str, spans: Sequence[tuple[int, int]], *, stopwords: bool = True) -> None:
    """Tokenize the sentences of ``text`` (``spans``: ``ragtrim.text.sentences.sentence_spans(text)``, which cover it without
    gaps) into the BM25 cache, and cache the whole text's tokens as their concatenation: the compression stage
    tokenizes every sentence anyway, and the relevance stage's BM25 over whole passages then costs one join instead
    of a second pass over the text.

    The join is cached only where it provably equals ``tokenize(text)``: every cut follows whitespace (which no
    token contains), and the text and each sentence are NFKC-normalized, so NFKC is the identity on all of them;
    lower-casing is per character, and its one context rule (final sigma) stops at whitespace."""
    parts = [_tokens(text[a:b].strip(), stopwords) for a, b in spans]
    key = (text, stopwords)
    if not spans or _tokens.cache.get(key) is not None:
        return
    if spans[0][0] != 0 or spans[-1][1] != len(text) or not unicodedata.is_normalized("NFKC", text):
        return
    for (a, _), (_, b_prev) in zip(spans[1:], spans):
        if a != b_prev or not text[a - 1].isspace():
            return
    if not all(unicodedata.is_normalized("NFKC", text[a:b]) for a, b in spans):
        return
    _tokens.cache.put(key, tuple(chain.from_iterable(parts)))


def tokenize(text: str, *, stopwords: bool = True) -> list[str]:
    """BM25 tokens: NFKC, lower-case, punctuation stripped, numbers kept whole (``1,000`` -> ``1000``).

    With ``stopwords`` the English function and question words ("what", "when", "the") are dropped: in a
    20-passage pool their IDF is noise. Results are cached per text, so a passage seen before costs nothing.
    """
    return list(_tokens(text, stopwords))


@register("scorer", "bm25")
@component
class BM25Scorer(Component):
    """Okapi BM25 (rank-bm25's term weights with Lucene's IDF, see ``bm25_okapi``) with the texts of one call as
    the corpus: IDF comes from those texts alone.

    An empty corpus or a query without content words scores every text 0.0 (rank-bm25 itself divides by zero on
    an all-empty corpus).
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "k1": [Interval(float, 0.0, None)],
        "b": [Interval(float, 0.0, 1.0)],
        "stopwords": [Boolean()],
    }

    k1: float = 1.2
    b: float = 0.75
    stopwords: bool = True

    @property
    def name(self) -> str:
        return "bm25"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        _check_inputs(query, texts)
        if not texts:
            return []
        # Unique query terms in query order, not a set: the rows are summed in this order, and a set's order (so the
        # last digit of every score, and ties) moved with PYTHONHASHSEED.
        q = tuple(dict.fromkeys(_tokens(query, self.stopwords)))
        docs = [_tokens(t, self.stopwords) for t in texts]
        n = len(docs)
        lengths = np.fromiter((len(d) for d in docs), dtype=np.float64, count=n)
        if not q or not lengths.any():
            return [0.0] * n
        # Term frequencies of the query terms only: scoring touches nothing else (tuple.count scans in C).
        tf = np.array([[d.count(t) for d in docs] for t in q], dtype=np.float64)
        return [float(x) for x in bm25_okapi(tf, lengths, k1=self.k1, b=self.b)]


def bm25_okapi(tf: np.ndarray, lengths: np.ndarray, *, k1: float, b: float) -> np.ndarray:
    """Okapi BM25 scores from a (query terms x documents) term-frequency matrix and the document lengths.

    The term weights are rank-bm25's BM25Okapi formula except for the IDF, which is Lucene's
    ``log(1 + (N - df + 0.5) / (df + 0.5))``: always positive. The classic ``log((N - df + 0.5) / (df + 0.5))``
    (which rank-bm25 floors at a fraction of the mean IDF) is zero or negative for a term in half the texts or
    more, so a single chunk, or sentences that all repeat the query's subject, would score 0 whatever they say.
    Only the query terms are touched, which keeps a 20-passage call well under a millisecond.
    """
    n = lengths.size
    df = (tf > 0).sum(axis=1).astype(np.float64)
    idf = np.where(df > 0, np.log1p((n - df + 0.5) / (df + 0.5)), 0.0)
    avgdl = float(lengths.mean()) or 1.0
    norm = k1 * (1 - b + b * lengths / avgdl)
    out: np.ndarray = (idf[:, None] * tf * (k1 + 1) / (tf + norm[None, :])).sum(axis=0)
    return out


def clear_tokenizer_cache() -> None:
    """Forget BM25's memoized tokenizations (a benchmark's "cold" pass starts from here)."""
    _tokens.cache_clear()


@named_scorer("bm25")
def _bm25() -> BM25Scorer:
    return BM25Scorer()
