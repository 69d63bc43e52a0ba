"""Read each passage where it answers: a model scorer that sees, instead of a passage's first word pieces, the
stretch that starts at the sentence holding most of the query's words.

Where the model pass is the cost (a CPU), it reads fewer pieces per passage; a fixed lead of few pieces then misses
an answer that sits further in, while the sentence BM25 would point to is read whole. The window depends on the
query and the passage alone (not on the other passages of a call), so a prefetch computes the same windows as the
scoring call after earlier stages dropped some passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ragtrim._util.validate import Constraints, Interval
from ragtrim.components import component, register
from ragtrim.scoring.bm25 import tokenize_sentence
from ragtrim.scoring.registry import get_scorer
from ragtrim.scoring.views import ViewScorer
from ragtrim.text.sentences import sentence_spans


def best_sentence_start(query_terms: frozenset[str], text: str, spans: Sequence[tuple[int, int]]) -> int:
    """Where the sentence holding the most distinct ``query_terms`` starts (the first such sentence on a tie; 0 when
    no sentence holds one)."""
    best, start = 0, 0
    for a, b in spans:
        piece = text[a:b].strip()
        if not piece:
            continue
        found = len(query_terms.intersection(tokenize_sentence(piece)))
        if found > best:
            best, start = found, a + (len(text[a:b]) - len(text[a:b].lstrip()))
    return start


def window_start(query_terms: frozenset[str], text: str, fill_chars: int) -> int:
    """The character where a passage's window starts: the start of its best sentence (``best_sentence_start``), moved
    back to earlier sentence starts while fewer than ``fill_chars`` characters follow it, so that a window near the
    end is still full; 0 for a text of at most ``fill_chars`` characters."""
    if len(text) <= fill_chars or not query_terms:
        return 0
    spans = sentence_spans(text)
    start = best_sentence_start(query_terms, text, spans)
    if start == 0 or len(text) - start >= fill_chars:
        return start
    earlier = [a for a, _ in spans if a < start and len(text) - a >= fill_chars]
    return earlier[-1] if earlier else 0


@register("scorer", "window")
@component
class WindowScorer(ViewScorer):
    """Score each text with ``scorer`` (a model that reads a text's first ``max_seq_length`` word pieces) on its
    window: the text's first sentence (cut to ``lead_chars`` characters at a word; what the passage is about, often
    its title), then the text from the start of the sentence that holds the most distinct query words (BM25's
    tokens, stopwords left out), moved back to an earlier sentence when fewer than ``fill_chars`` characters would
    follow. A text whose best sentence is its first, or that is no longer than ``fill_chars``, is read from its
    start. ``lead_chars=0`` reads the best sentence's stretch alone.

    The inner scorer's caches and vector store hold the windows, so a passage read for two different queries may be
    two entries."""

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "fill_chars": [Interval(int, 1, None)],
        "lead_chars": [Interval(int, 0, None)],
    }

    fill_chars: int = 320
    lead_chars: int = 160

    @property
    def name(self) -> str:
        return f"window({get_scorer(self.scorer).name})"

    def windows(self, query: str, texts: Sequence[str]) -> list[str]:
        """What the inner scorer reads of each text."""
        terms = frozenset(tokenize_sentence(query))
        out = []
        for text in texts:
            start = window_start(terms, text, self.fill_chars)
            lead = _lead(text, self.lead_chars) if start > 0 and self.lead_chars else ""
            if lead and start > len(lead):  # the lead fills part of the window: the stretch after it needs less
                start = window_start(terms, text, max(1, self.fill_chars - len(lead)))
            if start == 0 or start <= len(lead):
                out.append(text)
            else:
                out.append(f"{lead} {text[start:]}" if lead else text[start:])
        return out

    def views(self, query: str, texts: Sequence[str]) -> list[str]:
        return self.windows(query, texts)


def _lead(text: str, max_chars: int) -> str:
    """The text's first sentence, cut at the last space within ``max_chars`` when it is longer."""
    spans = sentence_spans(text)
    first = text[: spans[0][1]].strip() if spans else text.strip()
    if len(first) <= max_chars:
        return first
    cut = first.rfind(" ", 0, max_chars + 1)
    return first[:cut] if cut > 0 else first[:max_chars]
