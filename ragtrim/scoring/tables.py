"""Read a table where it answers: a scorer that sees a table's header rows and the rows the question names first.

A report's table is one chunk of many rows, and the row a question asks about ("What was the revenue from Canada in
2017?") is often far below the header. A model that reads a text's first word pieces then sees the header and the
first rows only, and BM25 over the whole table weighs the one matching row against every other row. Wrapped in
``TableRowsScorer``, a scorer reads each table (a text of at least ``MIN_TABLE_ROWS`` pipe or tab-separated rows) as
its header rows and caption (``ragtrim.text.structure.dependencies``) followed by the rows that hold the most
distinct query words (BM25's tokens, stopwords left out), most first, after the header and section rows they depend
on; with ``rest=True`` the other rows follow in order. Any other text is read as it is.

The view depends on the query and the text alone, never on the other texts of a call, so a prefetch computes the
same views as the scoring call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ragtrim._util.lru import bounded_cache, weigh_text_and_items
from ragtrim._util.validate import Boolean, Constraints, Interval
from ragtrim.components import component, register
from ragtrim.scoring.bm25 import tokenize_sentence
from ragtrim.scoring.registry import get_scorer
from ragtrim.scoring.views import ViewScorer
from ragtrim.text.structure import dependencies, is_table_row

MIN_TABLE_ROWS = 3
"""A text is read as a table when at least this many of its lines are table rows."""


def is_table(text: str) -> bool:
    """True when at least ``MIN_TABLE_ROWS`` lines of ``text`` are pipe or tab-separated table rows."""
    if text.count("|") + text.count("\t") < MIN_TABLE_ROWS:
        return False
    return sum(1 for line in text.split("\n") if is_table_row(line)) >= MIN_TABLE_ROWS


def table_view(query_terms: frozenset[str], text: str, *, best_rows: int = 6, rest: bool = True) -> str:
    """``text`` as a scorer should read it for a question of ``query_terms`` (see the module docstring): a table's
    header, caption and its at most ``best_rows`` rows with the most distinct query words (ties: the earlier row;
    rows with none are not chosen), each with what it depends on; then, with ``rest``, the other lines in order.
    A text that is not a table, or a table none of whose rows holds a query word, is returned unchanged."""
    if not query_terms or text.count("|") + text.count("\t") < MIN_TABLE_ROWS:
        return text
    lead = _lead_lines(text, query_terms, best_rows)
    if not lead:
        return text
    lines = text.split("\n")
    shown = set(lead)
    out = [*lead, *(i for i in range(len(lines)) if i not in shown)] if rest else lead
    return "\n".join(lines[i] for i in out)


@bounded_cache(max_entries=4096, weigh=weigh_text_and_items(16))
def _lead_lines(text: str, query_terms: frozenset[str], best_rows: int) -> tuple[int, ...]:
    """The line numbers a table's view starts with (``table_view``), or () for a text that is not a table or has no
    matching row. Cached: the prefetch and the scoring call, and each scorer of a mix, read the same view's lead."""
    if not is_table(text):
        return ()
    lines = text.split("\n")
    found = [len(query_terms.intersection(tokenize_sentence(line.strip()))) if line.strip() else 0
             for line in lines]
    ranked = [i for i in sorted(range(len(lines)), key=lambda i: (-found[i], i)) if found[i] > 0][:best_rows]
    if not ranked:
        return ()
    deps = dependencies(lines)
    head = sorted({d for i in ranked for d in deps[i]} - set(ranked))
    return (*head, *(i for i in ranked if i not in head))


def clear_table_cache() -> None:
    """Forget the memoized table views (``ragtrim.caches.clear_caches`` calls this)."""
    _lead_lines.cache_clear()


@register("scorer", "table_rows")
@component
class TableRowsScorer(ViewScorer):
    """Score each text with ``scorer`` on its table view (``table_view``): a table's header rows and caption, then
    its ``best_rows`` rows with the most distinct query words, then (``rest=True``) the other rows; any other text
    as it is. For a model that reads a text's first word pieces, keep ``rest=True``; for BM25, ``rest=False`` scores a
    table by its best rows without the length of the rest.

    The inner scorer's caches and vector store hold the views, so a table read for two different queries may be two
    entries."""

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "best_rows": [Interval(int, 1, None)],
        "rest": [Boolean()],
    }

    best_rows: int = 6
    rest: bool = True

    @property
    def name(self) -> str:
        return f"table_rows({get_scorer(self.scorer).name}{'' if self.rest else ', best only'})"

    def views(self, query: str, texts: Sequence[str]) -> list[str]:
        """What the inner scorer reads of each text."""
        terms = frozenset(tokenize_sentence(query.strip()))
        return [table_view(terms, text, best_rows=self.best_rows, rest=self.rest) for text in texts]
