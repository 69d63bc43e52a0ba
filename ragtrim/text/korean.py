"""Korean morphemes for BM25 through kiwipiepy (the ``ko`` extra: ``pip install 'ragtrim[ko]'``).

Kiwi splits ``요금제의`` into ``요금제`` + the particle ``의`` and ``한도는`` into ``한도`` + ``는``; particles (tags J*),
endings (E*) and punctuation are dropped, so a question and a passage meet on their content morphemes. The analyzer
loads its model once per process (seconds), then costs many times the core's character bigrams per paragraph, for a
small gain on KorQuAD (docs/languages.md gives both from benchmarks/results/languages/).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from ragtrim._util.forks import fork_safe_lock
from ragtrim.errors import MissingDependencyError
from ragtrim.text.stopwords import QUESTION_WORDS, STOPWORDS

_DROPPED_TAGS = ("J", "E", "SF", "SP", "SS", "SE", "SO", "SW")
"""Particles, endings, punctuation and symbols."""
_KIWI: Any = None
_LOCK = fork_safe_lock()


def kiwi() -> Any:
    """The process's one ``kiwipiepy.Kiwi`` (loaded on first use; MissingDependencyError without the extra)."""
    global _KIWI
    with _LOCK:
        if _KIWI is None:
            try:
                from kiwipiepy import Kiwi
            except ImportError as exc:
                raise MissingDependencyError("kiwipiepy", "ko", "the Korean morpheme analyzer") from exc
            _KIWI = Kiwi()
        return _KIWI


def morphemes(text: str, *, stopwords: bool) -> list[str]:
    """The content morphemes of ``text`` (NFKC, lower-cased), in order; with ``stopwords`` the question words
    (``무엇``, ``언제``, ...) and English stopwords written in Latin letters are left out too."""
    analyzer = kiwi()
    with _LOCK:  # one model, shared: calls are serialised
        tokens = analyzer.tokenize(unicodedata.normalize("NFKC", text))
    out: list[str] = []
    for t in tokens:
        if t.tag.startswith(_DROPPED_TAGS):
            continue
        form = str(t.form).lower()
        if stopwords and (form in QUESTION_WORDS["ko"] or (t.tag == "SL" and form in STOPWORDS)):
            continue
        out.append(form)
    return out
