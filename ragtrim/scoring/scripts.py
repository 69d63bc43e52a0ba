"""Which texts a model scorer can read, and the gate the fused scorers apply: a model never votes on a query or a
passage written mostly in scripts it was not trained on (the bundled all-MiniLM-L6-v2 reads Latin-script text: its
uncased normalizer turns every Hangul syllable into jamo, and on Korean it ranks near chance).
"""

from __future__ import annotations

from typing import Any

from ragtrim.text.scripts import share_in

LATIN = frozenset({"latin"})
"""What the bundled all-MiniLM-L6-v2 reads."""
MIN_READABLE_SHARE = 0.5
"""A text is readable when at least this share of its letters (over its first ``PREFIX_CHARS``) is in a script the
model reads; a text without letters (numbers, symbols) is readable."""
PREFIX_CHARS = 512


def scripts_read(scorer: Any) -> frozenset[str] | None:
    """The scripts ``scorer``'s model reads (its ``scripts_read()``), or None: every script, or not a model."""
    read = getattr(scorer, "scripts_read", None)
    if not callable(read):
        return None
    scripts = read()
    return frozenset(scripts) if scripts is not None else None


def readable(scripts: frozenset[str] | None, text: str) -> bool:
    """True when a model that reads ``scripts`` (None: all) can read ``text`` (see ``MIN_READABLE_SHARE``)."""
    if scripts is None:
        return True
    share = share_in(text, scripts, PREFIX_CHARS)
    return share is None or share >= MIN_READABLE_SHARE
