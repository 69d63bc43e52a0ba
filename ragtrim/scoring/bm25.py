"""BM25: its tokenizer (cached per text, primed from a passage's sentences) and the Okapi scorer.

The tokens and scores every BM25 use in ragtrim shares: the relevance stage, sentence compression and the fast
path's first stage. ASCII text takes a fast path (English words and numbers); any other text goes through the script
analyzer (``ragtrim.text.analyzer``: CJK character bigrams, words with their combining marks). ``analyzer="kiwi"``
adds Korean morphemes from kiwipiepy (the ``ko`` extra).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Sequence
from itertools import chain, filterfalse
from typing import Any, ClassVar, Literal, get_args

import numpy as np

from ragtrim._util.lru import bounded_cache
from ragtrim._util.validate import Boolean, Constraints, Interval, Options, check_choice
from ragtrim.components import Component, component, register
from ragtrim.scoring.base import check_score_inputs as _check_inputs
from ragtrim.scoring.registry import named_scorer
from ragtrim.text.analyzer import run_bigrams, script_tokens
from ragtrim.text.analyzer import warm_up as analyzer_warm_up
from ragtrim.text.stem import light_stem
from ragtrim.text.stopwords import QUESTION_WORDS
from ragtrim.text.stopwords import STOPWORDS as _STOPWORDS

Analyzer = Literal["script", "kiwi"]
"""``script``: the core analyzer (ASCII words; CJK bigrams; words with their marks); ``kiwi``: the same plus Korean
morphemes from kiwipiepy, particles and endings stripped (``pip install 'ragtrim[ko]'``)."""
ANALYZERS: tuple[str, ...] = get_args(Analyzer)

# -- tokenization ---------------------------------------------------------------------------------------------------
# Numbers keep their inner separators ("1,000" -> "1000", "3.5" stays "3.5"); words are runs of letters, so
# "obama's" gives "obama" + "s" (a stopword) and "covid19" gives "covid" + "19".
_WORD = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+", re.UNICODE)
_WORD_ASCII = re.compile(r"[a-z]+|[0-9]+(?:[.,:][0-9]+)*", re.ASCII)
"""``_WORD`` on lower-cased ASCII text: the same tokens, with cheaper ASCII classes (a test compares them)."""


def _weigh_tokens(args: tuple[Any, ...], toks: tuple[str, ...]) -> int:
    # An O(1) upper estimate: the tokens' characters are at most the text's, plus one str object per token.
    return 2 * sys.getsizeof(args[0]) + sys.getsizeof(toks) + 56 * len(toks)


_ALL_STOPWORDS = _STOPWORDS | run_bigrams(w for words in QUESTION_WORDS.values() for w in words)
"""English stopwords and the bigrams of the Korean, Japanese and Chinese question words."""
_QUESTION_WORD = re.compile("|".join(sorted((re.escape(w) for words in QUESTION_WORDS.values() for w in words),
                                            key=len, reverse=True)))
"""The CJK question words, longest first: cut out of a query's text before its runs become bigrams."""


@bounded_cache(max_entries=65536, weigh=_weigh_tokens)
def _tokens(text: str, stopwords: bool) -> tuple[str, ...]:
    norm = unicodedata.normalize("NFKC", text).lower()
    if norm.isascii():
        toks = _WORD_ASCII.findall(norm)
        if "," in norm:  # only numbers can hold a comma ("1,000"): the per-token pass is needed only then
            toks = [t.replace(",", "") if t[0].isdigit() else t for t in toks]
        return tuple(filterfalse(_STOPWORDS.__contains__, toks)) if stopwords else tuple(toks)
    # "İ".lower() is "i" plus a combining dot: without the fix, "İstanbul" would not match "istanbul".
    toks = script_tokens(norm.replace("i\u0307", "i"))
    return tuple(filterfalse(_ALL_STOPWORDS.__contains__, toks)) if stopwords else tuple(toks)


_SAFE_BEFORE_CUT = frozenset("。！？!?।॥\"”)]」』）】〉》〕")
"""Characters a sentence cut may follow, besides whitespace, for the join of its sentences' tokens to be exact: the
stops that need no space after them and the closers that follow a stop. None is a token character, and none is
case-ignorable (so lower-casing's final-sigma rule cannot look across them)."""


def prime_tokens(text: str, spans: Sequence[tuple[int, int]], *, stopwords: bool = True, stem: bool = False) -> None:
    """Tokenize the sentences of ``text`` (``spans``: ``ragtrim.text.sentences.sentence_spans(text)``, which cover it
    without gaps) into the BM25 cache, and cache the whole text's tokens as their concatenation: the compression
    stage tokenizes every sentence anyway, and the relevance stage's BM25 over whole passages then costs one join
    instead of a second pass over the text.

    The join is cached only where it provably equals ``tokenize(text)``: every cut follows whitespace or a stop or
    closer of ``_SAFE_BEFORE_CUT`` (Chinese and Japanese sentences end in ``。`` with no space), which no token
    contains, so no token and no CJK bigram run spans a cut; NFKC of the text is NFKC of its sentences joined
    (``_nfkc_per_sentence``); lower-casing is per character, and its one context rule (final sigma) stops at
    whitespace and at those characters. A sentence of ASCII text takes the ASCII path and the whole text maybe the
    script analyzer: both give the same tokens on ASCII text (a test compares them).

    ``stem``: the stemmed tokens too (``_stemmed``, one word at a time), the whole text's as the join of its
    sentences' wherever the plain join is exact."""
    pieces = [text[a:b].strip() for a, b in spans]
    parts = [_tokens(p, stopwords) for p in pieces]
    stems = [_stemmed(p, stopwords) for p in pieces] if stem else None
    key = (text, stopwords)
    if not spans or _tokens.cache.get(key) is not None:
        return
    if spans[0][0] != 0 or spans[-1][1] != len(text):
        return
    for (a, _), (_, b_prev) in zip(spans[1:], spans):
        if a != b_prev or not (text[a - 1].isspace() or text[a - 1] in _SAFE_BEFORE_CUT):
            return
    if not _nfkc_per_sentence(text, spans):
        return
    _tokens.cache.put(key, tuple(chain.from_iterable(parts)))
    if stems is not None and _stemmed.cache.get(key) is None:
        _stemmed.cache.put(key, tuple(chain.from_iterable(stems)))


def _nfkc_per_sentence(text: str, spans: Sequence[tuple[int, int]]) -> bool:
    """True when NFKC of ``text`` is the concatenation of NFKC of its sentences: at once when all are normalized
    already (the quick check), else by comparing (Chinese and Japanese text is full of full-width ``？！（）``)."""
    if unicodedata.is_normalized("NFKC", text) and all(unicodedata.is_normalized("NFKC", text[a:b]) for a, b in spans):
        return True
    return unicodedata.normalize("NFKC", text) == "".join(unicodedata.normalize("NFKC", text[a:b]) for a, b in spans)


@bounded_cache(max_entries=65536, weigh=_weigh_tokens)
def _stemmed(text: str, stopwords: bool) -> tuple[str, ...]:
    """``_tokens`` with each English word stemmed (``ragtrim.text.stem.light_stem``)."""
    return tuple(map(light_stem, _tokens(text, stopwords)))


def query_text(query: str) -> str:
    """The query as BM25 reads it: CJK question words cut out of their runs (a space in their place), so no bigram
    straddles one ("他司职什么位置" gives 他司, 司职, 位置; before, also 职什 and 么位, and the rare 么位 matched
    "要么位于" in an unrelated paragraph). ASCII queries are returned as they are."""
    if query.isascii():
        return query
    return _QUESTION_WORD.sub(" ", unicodedata.normalize("NFKC", query))


@bounded_cache(max_entries=65536, weigh=_weigh_tokens)
def _kiwi_tokens(text: str, stopwords: bool) -> tuple[str, ...]:
    """Korean morphemes (kiwipiepy) followed by the script analyzer's tokens: a morpheme match scores on top of the
    bigrams, and text without Hangul is left to the bigrams alone."""
    from ragtrim.text.korean import morphemes

    base = _tokens(text, stopwords)
    if not _HANGUL.search(text):
        return base
    return tuple(morphemes(text, stopwords=stopwords)) + base


_HANGUL = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")


def tokenize_sentence(text: str) -> tuple[str, ...]:
    """``tokenize(text)`` as a cached tuple, for a text that is already stripped (a sentence as
    ``prime_tokens`` caches it: a stage that reads sentences finds them tokenized)."""
    return _tokens(text, True)


def tokenize(text: str, *, stopwords: bool = True, analyzer: Analyzer = "script", stem: bool = False) -> list[str]:
    """BM25 tokens: NFKC, lower-case, punctuation stripped, numbers kept whole (``1,000`` -> ``1000``); Hangul, Han
    and Kana as character bigrams, other scripts as words with their combining marks (``ragtrim.text.analyzer``).

    With ``stopwords`` the English function and question words ("what", "when", "the") and the bigrams of Korean,
    Japanese and Chinese question words are dropped: in a 20-passage pool their IDF is noise. ``analyzer="kiwi"``
    puts Korean morphemes before the bigrams (the ``ko`` extra); ``stem`` stems English words
    (``ragtrim.text.stem.light_stem``, as ``BM25Scorer`` does by default). Results are cached per text, so a passage
    seen before costs nothing.
    """
    check_choice("analyzer", analyzer, ANALYZERS)
    return list(_tokenizer(analyzer, stem)(text, stopwords))


def _tokenizer(analyzer: str, stem: bool) -> Any:
    if analyzer == "kiwi":
        return _kiwi_tokens  # Korean morphemes; English words in Korean text are rare enough to leave unstemmed
    return _stemmed if stem else _tokens


@register("scorer", "bm25")
@component
class BM25Scorer(Component):
    """Okapi BM25 (rank-bm25's term weights with Lucene's IDF, see ``bm25_okapi``) with the texts of one call as
    the corpus: IDF comes from those texts alone.

    An empty corpus or a query without content words scores every text 0.0 (rank-bm25 itself divides by zero on
    an all-empty corpus). ``stem`` (default on) matches English words by their light stem ("governs" finds
    "governed"; ``ragtrim.text.stem``). With ``stopwords`` the query's CJK question words are cut out before its runs
    become bigrams (``query_text``).
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "k1": [Interval(float, 0.0, None)],
        "b": [Interval(float, 0.0, 1.0)],
        "stopwords": [Boolean()],
        "analyzer": [Options(ANALYZERS)],
        "stem": [Boolean()],
    }

    k1: float = 1.2
    b: float = 0.75
    stopwords: bool = True
    analyzer: Analyzer = "script"
    stem: bool = True

    @property
    def name(self) -> str:
        return "bm25" if self.analyzer == "script" else f"bm25-{self.analyzer}"

    def warm_up(self) -> None:
        """Compile the script analyzer's patterns, and load kiwipiepy's model (``analyzer="kiwi"``: seconds), now
        rather than inside the first request."""
        analyzer_warm_up()
        if self.analyzer == "kiwi":
            _kiwi_tokens("워밍업", True)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        _check_inputs(query, texts)
        if not texts:
            return []
        # Unique query terms in query order, not a set: the rows are summed in this order, and a set's order (so the
        # last digit of every score, and ties) moved with PYTHONHASHSEED.
        tokens = _tokenizer(self.analyzer, self.stem)
        q = tuple(dict.fromkeys(tokens(query_text(query) if self.stopwords else query, self.stopwords)))
        docs = [tokens(t, self.stopwords) for t in texts]
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
    _stemmed.cache_clear()
    _kiwi_tokens.cache_clear()


@named_scorer("bm25")
def _bm25() -> BM25Scorer:
    return BM25Scorer()
