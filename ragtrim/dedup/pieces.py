"""The whole-text operations of near-duplicate detection, done a piece at a time on a long text: NFKC with lower
case, the exact-duplicate key, a line's words and its Han/Kana characters.

One C call over a 12 MB chunk (``str.lower``, ``re.findall``, ``str.split``) held the GIL for up to seconds and
``findall`` made millions of strings; here no call sees more than about ``PIECE_CHARS`` characters. Each text is cut
only where the operation cannot see across the cut, so every result equals the whole-text one (the tests compare
them on texts built to sit on the cuts).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterator

PIECE_CHARS = 1 << 14
"""Characters per piece (the first cut point at or after this many): a pass over one takes well under a
millisecond."""

# NFKC never composes a character with what precedes an ASCII letter, digit or blank, a Han ideograph, a kana letter
# or a Hangul syllable: none of them is the second half of a canonical composition.
_NFKC_CUT = re.compile("[0-9A-Za-z \t\n\r\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff\uac00-\ud7a3]")
_NON_WORD = re.compile(r"\W")
_CAPITAL_SIGMA = "\u03a3"  # the one character whose lower case depends on its neighbours (final sigma)


def pieces(text: str, cut: re.Pattern[str], size: int | None = None) -> Iterator[str]:
    """``text`` in consecutive pieces: each ends just before the first match of ``cut`` that lies ``size`` (default
    ``PIECE_CHARS``) or more characters after its start; without such a match the rest is one piece."""
    step = PIECE_CHARS if size is None else size
    i, n = 0, len(text)
    while i < n:
        found = cut.search(text, i + step) if n - i > step else None
        if found is None:
            yield text[i:]
            return
        yield text[i:found.start()]
        i = found.start()


def _join_nonempty(parts: Iterator[str]) -> str:
    return " ".join(p for p in parts if p)


def nfkc_lower(text: str) -> str:
    """NFKC, then lower case, as one call on the whole text would give them."""
    if len(text) <= PIECE_CHARS:
        return unicodedata.normalize("NFKC", text).lower()
    normalized = "".join(unicodedata.normalize("NFKC", p) for p in pieces(text, _NFKC_CUT))
    if _CAPITAL_SIGMA in normalized:  # its lower case looks across any cut: the whole text at once
        return normalized.lower()
    return "".join(normalized[i:i + PIECE_CHARS].lower() for i in range(0, len(normalized), PIECE_CHARS))


def exact_key(folded: str) -> bytes:
    """The key under which two texts are exact duplicates: a 128-bit BLAKE2b digest of ``" ".join(folded.split())``
    (the normalized text), fed a slice at a time; a word cut by a slice's end is joined again."""
    h = hashlib.blake2b(digest_size=16, person=b"ragtrim-exact")
    started = inside_word = False
    for i in range(0, len(folded), PIECE_CHARS) if folded else ():
        piece = folded[i:i + PIECE_CHARS]
        words = piece.split()
        if words:
            if started and not (inside_word and not piece[0].isspace()):
                h.update(b" ")
            h.update(" ".join(words).encode("utf-8", "surrogatepass"))
            started = True
        inside_word = not piece[-1].isspace()
    return h.digest()


def tokens_joined(line: str, token: re.Pattern[str], cut: re.Pattern[str] | None = None) -> str:
    """``" ".join(token.findall(line))`` a piece at a time; ``cut`` (default: a non-word character) must match only
    where no token can continue across, e.g. before a character that is a token of its own."""
    if len(line) <= PIECE_CHARS:
        return " ".join(token.findall(line))
    find: Callable[[str], list[str]] = token.findall
    return _join_nonempty(" ".join(find(p)) for p in pieces(line, cut if cut is not None else _NON_WORD))


def translated(text: str, table: dict[int, str]) -> str:
    """``text.translate(table)`` a piece at a time (a translation maps each character on its own)."""
    if len(text) <= PIECE_CHARS:
        return text.translate(table)
    return "".join(text[i:i + PIECE_CHARS].translate(table) for i in range(0, len(text), PIECE_CHARS))
