"""The plain baseline of the quality matrix: an independent BM25 ranks whole passages, which fill the budget in rank
order. No ragtrim stage is used, only its token counter and chunk separator, so the bar is the same for every row.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from ragtrim import TokenCounter
from ragtrim.models import CHUNK_SEPARATOR

_WORD = re.compile(r"\w+")
_CJK = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_RUNS = re.compile(f"[{_CJK}]+|[^{_CJK}]+")
_IS_CJK = re.compile(f"[{_CJK}]")


def script_tokens(text: str) -> list[str]:
    """Lower-cased word tokens; runs of Hangul, kana and CJK ideographs become character bigrams (a one-character
    run stays a unigram), as Lucene's CJK analyzer indexes them. ``"요금제의 한도"`` -> 요금, 금제, 제의, 한도."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        for run in _RUNS.findall(word):
            if _IS_CJK.match(run) and len(run) > 1:
                out.extend(run[i:i + 2] for i in range(len(run) - 1))
            else:
                out.append(run)
    return out


def bm25_scores(query: str, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of each text against the query, statistics from these texts only (Lucene's idf, never negative)."""
    docs = [Counter(script_tokens(t)) for t in texts]
    lengths = [sum(d.values()) for d in docs]
    avg = (sum(lengths) / len(docs) if docs else 0.0) or 1.0
    df = Counter(t for d in docs for t in d)
    terms = dict.fromkeys(script_tokens(query))
    idf = {t: math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5)) for t in terms if df[t]}
    return [sum(w * d[t] * (k1 + 1) / (d[t] + k1 * (1 - b + b * n / avg)) for t, w in idf.items() if t in d)
            for d, n in zip(docs, lengths)]


def plain_fill(texts: Sequence[str], query: str, budget: int, counter: TokenCounter) -> str:
    """Whole passages best-first by ``bm25_scores`` (ties: input order), each kept when the joined text still fits
    ``budget`` tokens and skipped otherwise (a later, shorter one may fit); joined by ``CHUNK_SEPARATOR``."""
    scores = bm25_scores(query, texts)
    kept: list[str] = []
    for i in sorted(range(len(texts)), key=lambda i: (-scores[i], i)):
        if counter.count(CHUNK_SEPARATOR.join([*kept, texts[i]])) <= budget:
            kept.append(texts[i])
    return CHUNK_SEPARATOR.join(kept)
