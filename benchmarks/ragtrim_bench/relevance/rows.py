"""The rows of the quality matrix: a row is a name and a callable ``(chunks, query, budget) -> text``.

``chunks`` are ``trim()``'s dict input (``{"text", "id"}``, plus ``"score"``, the retriever's, for a row with
``uses_retrieval_score``). Built in: ``default`` (``trim()`` with no scorer argument), one row per named scorer
(``ragtrim.scoring.registry.SCORER_NAMES``), ``given`` and the plain baseline. A tuning experiment adds a candidate
with ``register_row(Row(...))`` in code, or names ``module:attribute`` (a Row, or a function returning one) in
``--rows``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim.text.answer_kind import AnswerKind

Chunks = Sequence[Mapping[str, Any]]
RowTrim = Callable[[Chunks, str, int], str]


@dataclass(frozen=True)
class Row:
    """One recipe under test. ``uses_retrieval_score``: it ranks by the chunks' ``score`` (the retriever's), so it
    runs only on columns that have one. ``clear``: empties the caches of what the row built itself (a scorer object
    of its own: ``clear_caches()`` reaches only the named scorers), called before each timed call, so its cost is
    cold too (``scorer_clearer`` makes one)."""

    name: str
    trim: RowTrim
    description: str = ""
    uses_retrieval_score: bool = False
    clear: Callable[[], None] | None = None


def scorer_clearer(*scorers: Any) -> Callable[[], None]:
    """A ``Row.clear`` that empties these scorers' caches, with their parts (a hybrid's scorers, a cascade's
    stages), as ``ragtrim.caches.clear_caches`` does for the named ones."""
    from ragtrim.caches import _clear_scorer  # the one walk over a scorer's parts; not public API

    def clear() -> None:
        for scorer in scorers:
            _clear_scorer(scorer)

    return clear


def _trim_with(scorer: str | None) -> RowTrim:
    def run(chunks: Chunks, query: str, budget: int) -> str:
        from ragtrim import trim

        if scorer is None:  # the default exactly as a user calls it: no scorer argument
            return trim(chunks, query=query, budget=budget).text
        return trim(chunks, query=query, budget=budget, scorer=scorer).text  # type: ignore[arg-type]

    return run


def _plain_bm25(chunks: Chunks, query: str, budget: int) -> str:
    from ragtrim import get_counter
    from ragtrim_bench.relevance.baseline import plain_fill

    return plain_fill([str(c["text"]) for c in chunks], query, budget, get_counter(None))


def builtin_rows() -> dict[str, Row]:
    """``default``, every named scorer, ``given`` and ``plain-bm25``, in report order."""
    from ragtrim.scoring.registry import SCORER_NAMES

    rows = [Row("default", _trim_with(None), 'trim() with no scorer argument (scorer="auto")')]
    rows += [Row(name, _trim_with(name), f'trim(scorer="{name}")') for name in SCORER_NAMES]
    rows.append(Row("given", _trim_with("given"), 'trim(scorer="given"): the retriever\'s score of each chunk',
                    uses_retrieval_score=True))
    rows.append(Row("plain-bm25", _plain_bm25, "plain baseline, no ragtrim stage: an independent BM25 (words; "
                    "character bigrams for Hangul/CJK) ranks whole passages, filled in rank order while they fit"))
    return {r.name: r for r in rows}


_EXTRA: dict[str, Row] = {}


def register_row(row: Row) -> Row:
    """Make ``row`` nameable in ``--rows`` (a candidate recipe of a tuning experiment); returns it."""
    if not isinstance(row, Row):
        raise ConfigError(f"register_row takes a Row, got {type(row).__name__}")
    _EXTRA[row.name] = row
    return row


def available_rows() -> dict[str, Row]:
    return {**builtin_rows(), **_EXTRA}


def resolve_rows(names: Sequence[str]) -> list[Row]:
    """Rows by name (``available_rows``) or ``module:attribute`` (a Row, or a function of no arguments returning
    one); ConfigError naming the choices otherwise."""
    table = available_rows()
    out: list[Row] = []
    for name in names:
        if name in table:
            out.append(table[name])
            continue
        if ":" not in name:
            raise ConfigError(f"unknown row {name!r}; choose from {list(table)} or name module:attribute")
        module, _, attr = name.partition(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"row {name!r} not found: {exc}") from None
        row = found if isinstance(found, Row) else found() if callable(found) else None
        if not isinstance(row, Row):
            raise ConfigError(f"row {name!r} must be a Row or a function returning one, got {type(row).__name__}")
        out.append(row)
    if len({r.name for r in out}) != len(out):
        raise ConfigError(f"row names must be unique, got {[r.name for r in out]}")
    return out


DEFAULT_ROWS: tuple[str, ...] = tuple(builtin_rows())


def _default_with(scorer: Any, name: str, about: str) -> Row:
    """The default pipeline with ``scorer`` in its relevance stage."""

    def run(chunks: Chunks, query: str, budget: int) -> str:
        from ragtrim import Pipeline, RelevanceFilter, trim
        from ragtrim.api import default_stages

        stages: list[Any] = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
                             for s in default_stages(budget=budget)]
        return trim(chunks, query=query, pipeline=Pipeline(stages)).text

    return Row(name, run, about, clear=scorer_clearer(scorer))


def plain_query() -> Row:
    """The default with MiniLM's plain query vector on every query (no query adapter, even on long queries): the
    default as it was before it mapped long queries. Name it as ``ragtrim_bench.relevance.rows:plain_query``."""
    from ragtrim.scoring.auto import balanced_scorer

    return _default_with(balanced_scorer(query_adapter=None), "plain-query",
                         "the default without the query adapter: MiniLM's plain vector on every query")


def whole_tables() -> Row:
    """The default reading a table from its first row, as any other passage (no table view): the default as it was
    before it read a table's header and the rows the question names first. Name it as
    ``ragtrim_bench.relevance.rows:whole_tables``."""
    from ragtrim.scoring.auto import balanced_scorer

    return _default_with(balanced_scorer(tables=False), "whole-tables",
                         "the default without the table view: tables read from their first row")


def _default_with_compressor(compressor: type[Any], name: str, about: str, **params: Any) -> Row:
    """The default pipeline with its compression stage made by ``compressor`` (a ``SentenceCompressor`` subclass)
    from the same parameters, ``params`` replacing some of them."""
    from ragtrim import Pipeline, trim
    from ragtrim.api import default_stages
    from ragtrim.stages.compress import SentenceCompressor

    def run(chunks: Chunks, query: str, budget: int) -> str:
        stages = [compressor(**(s.get_params() | params)) if isinstance(s, SentenceCompressor) else s
                  for s in default_stages(budget=budget)]
        return trim(chunks, query=query, pipeline=Pipeline(stages)).text

    return Row(name, run, about)


def own_text_hint() -> Row:
    """The default with the compressor's answer hint read on a unit's own text (a table row without its header's
    years) and "which year" recognised only at the question's very start (not "In which year ..."); the rest of
    the hint as the default's, without the table lookup (``lookup_weight=0``) and the reason kind, which came
    later. Name it as ``ragtrim_bench.relevance.rows:own_text_hint``."""
    import re

    from ragtrim.stages.compress import SentenceCompressor
    from ragtrim.text.answer_kind import answer_kind

    old_when = re.compile(r"^\s*(when\b|what (year|date|day|time|century)|which year|how long ago)", re.IGNORECASE)

    class OwnTextHint(SentenceCompressor):
        @staticmethod
        def _hint_texts(sentences: list[Any], with_dependencies: list[str]) -> list[str]:
            return [s.text for s in sentences]

        @staticmethod
        def _answer_kind(query: str) -> AnswerKind | None:
            kind = answer_kind(query, kinds=_BEFORE_REASON)
            if kind == "date" and not old_when.search(query):  # "In which year ...": the old rule's next question
                return answer_kind(query, kinds=_NUMBER)
            return kind

    return _default_with_compressor(OwnTextHint, "own-text-hint", "the default with the answer hint read on a "
                                    "unit's own text, \"which year\" only at the question's start",
                                    lookup_weight=0.0)


def no_year_figure_hint() -> Row:
    """The default without the number hint on "What was the ... in <year>?" questions (no kind for them, as before
    it) and without the table lookup, which came later (``lookup_weight=0``). Name it as
    ``ragtrim_bench.relevance.rows:no_year_figure_hint``."""
    from ragtrim.stages.compress import SentenceCompressor
    from ragtrim.text.answer_kind import _HOW_MANY, _WHAT_IN_YEAR, answer_kind

    class NoYearFigureHint(SentenceCompressor):
        @staticmethod
        def _answer_kind(query: str) -> AnswerKind | None:
            kind = answer_kind(query, kinds=_BEFORE_REASON)
            if kind == "number" and _WHAT_IN_YEAR.search(query) and not _HOW_MANY.search(query):
                return None
            return kind

    return _default_with_compressor(NoYearFigureHint, "no-year-figure-hint",
                                    "the default without the number hint on \"What was the ... in <year>?\"",
                                    lookup_weight=0.0)


def no_lookup() -> Row:
    """The default without the compressor's lookup bonus (``lookup_weight=0``: a question naming a year lifts no
    table row); the reason kind of the hint, which came after the bonus, stays. Name it as
    ``ragtrim_bench.relevance.rows:no_lookup``."""
    from ragtrim.stages.compress import SentenceCompressor

    return _default_with_compressor(SentenceCompressor, "no-lookup", "the default without the table lookup bonus "
                                    "(lookup_weight=0)", lookup_weight=0.0)


def lookup_per_table() -> Row:
    """The default with the compressor's lookup bonus as it first was: every table's best row keeps its value,
    however far below the request's best match (``margin=1.0``), and "FY19" names no year. Name it as
    ``ragtrim_bench.relevance.rows:lookup_per_table``."""
    from ragtrim.stages.compress import SentenceCompressor
    from ragtrim.text.answer_kind import LookupQuestion, lookup_question

    class LookupPerTable(SentenceCompressor):
        @staticmethod
        def _lookup_question(query: str, *, fiscal_years: bool = False, margin: float = 1.0) -> LookupQuestion | None:
            return lookup_question(query, fiscal_years=fiscal_years, margin=margin)

    return _default_with_compressor(LookupPerTable, "lookup-per-table", "the default with the lookup bonus on "
                                    "every table's best row and no fiscal years")


_BEFORE_REASON: tuple[AnswerKind, ...] = ("date", "number")
"""The answer hint's kinds before the reason kind: a "why" question gets the kind its other words give."""
_NUMBER: tuple[AnswerKind, ...] = ("number",)


def no_reason_hint() -> Row:
    """The default without the reason kind of the answer hint ("why ...", "what caused ..." get the kind their other
    words give, as before it). Name it as ``ragtrim_bench.relevance.rows:no_reason_hint``."""
    from ragtrim.stages.compress import SentenceCompressor
    from ragtrim.text.answer_kind import answer_kind

    class NoReasonHint(SentenceCompressor):
        @staticmethod
        def _answer_kind(query: str) -> AnswerKind | None:
            return answer_kind(query, kinds=_BEFORE_REASON)

    return _default_with_compressor(NoReasonHint, "no-reason-hint", "the default without the reason kind of the "
                                    "answer hint")
