"""A light English stemmer for BM25: the question's "governs" finds the clause's "governed", "laws" finds "law".

Suffix stripping in the spirit of Harman's S-stemmer with the commonest verb endings added (no dictionary, no
model): plurals, ``-ing``/``-ed`` (a doubled final consonant undone), ``-ly`` and a final ``e``. Both sides of a match
go through it, so what matters is that related forms meet, not that a stem is a word ("agreed" and "agree" both
become "agre"). Only lower-case ASCII words of four letters or more are touched; numbers and other scripts pass
unchanged. On the quality matrix's dev requests it moved the gold passage's reciprocal rank under BM25 from 0.71 to
0.76 on TAT-QA and from 0.75 to 0.78 on NQ without titles (Porter's stemmer: 0.76 and 0.78).
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiouy")
_KEEP_DOUBLE = frozenset("lsz")  # "fall", "pass", "buzz" keep their double letter
_VERB_ENDINGS = ("ingly", "edly", "ing", "ed")


@lru_cache(maxsize=65536)
def light_stem(word: str) -> str:
    """The stem of one lower-cased word (see the module docstring); anything that is not an ASCII word of four
    letters or more is returned as it is."""
    if len(word) < 4 or not (word.isascii() and word.isalpha() and word.islower()):
        return word
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for ending in _VERB_ENDINGS:
        stem = w[: -len(ending)]
        if w.endswith(ending) and len(stem) >= 3 and any(c in _VOWELS for c in stem):
            w = stem
            if len(w) > 2 and w[-1] == w[-2] and w[-1] not in _KEEP_DOUBLE and w[-1] not in _VOWELS:
                w = w[:-1]
            break
    if w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w
