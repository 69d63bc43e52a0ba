"""The rows of the peer comparison: a row is a name and a callable ``(passages, question, budget) -> PeerOutput``.

A peer returns what its own component produced and, when that is over the budget, the same cut for every peer:
ragtrim's ``TokenBudget`` (whole pieces in the peer's priority, the last one cut at a sentence boundary), so every
row sends at most the budget and the JSON says how often, and by how much, the peer itself overshot. Built in:
ragtrim's ``default`` and the ``plain-bm25`` fill of the quality matrix; the peers live in ``lingua`` and
``frameworks``; ``UNAVAILABLE`` lists the peers that cannot run offline, kept as rows of the report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim.models import CHUNK_SEPARATOR

PeerTrim = Callable[[Sequence[str], str, int], "PeerOutput"]


@dataclass(frozen=True, slots=True)
class PeerOutput:
    """What one row sent for one request at one budget.

    ``text``: the context the reader gets (at most the budget). ``produced_tokens``: the row's own output before the
    budget cut, joined as ``text`` is. ``cut``: the shared ``TokenBudget`` had to cut it.
    """

    text: str
    produced_tokens: int
    cut: bool = False


@dataclass(frozen=True)
class PeerRow:
    """One method under test.

    ``settings`` and ``sources``: the parameters it runs with and the documentation or code they come from
    (recorded in the JSON). ``clear``: empties what the row caches across calls, called just before each timed call
    so that its cost is cold. ``slow``: it runs only on the first ``--slow-limit`` requests of each column and split
    (its paired tests use those requests).
    """

    name: str
    trim: PeerTrim
    description: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    clear: Callable[[], None] | None = None
    slow: bool = False


@dataclass(frozen=True)
class UnavailablePeer:
    """A peer that cannot run here, kept as a row of the report with the reason."""

    name: str
    description: str
    reason: str
    sources: tuple[str, ...] = ()


UNAVAILABLE: tuple[UnavailablePeer, ...] = (
    UnavailablePeer(
        "llmlingua-2",
        "LLMLingua-2: a token classifier (XLM-RoBERTa large or multilingual BERT) trained to keep or drop each token",
        "cannot run offline: its weights (microsoft/llmlingua-2-xlm-roberta-large-meetingbank, "
        "microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank) come only from the Hugging Face hub; no "
        "package on PyPI ships them",
        ("llmlingua 0.2.2 PromptCompressor(use_llmlingua2=True) docstring",),
    ),
    UnavailablePeer(
        "provence",
        "Provence: a DeBERTa-v3 cross-encoder that prunes sentences and reranks in one pass",
        "cannot run offline: its weights (naver/provence-reranker-debertav3-v1) come only from the Hugging Face "
        "hub; no package on PyPI ships them",
        ("naver/provence-reranker-debertav3-v1 model card",),
    ),
)


def cut_to_budget(pieces: Sequence[str], budget: int, counter: Any, *,
                  scores: Sequence[float] | None = None) -> PeerOutput:
    """The pieces a peer produced, in its output order, joined by ``CHUNK_SEPARATOR``; when that is over ``budget``,
    ragtrim's ``TokenBudget`` cuts it: pieces admitted by ``scores`` (higher first) or, without scores, in output
    order, the one that does not fit cut at a sentence boundary; the output order is kept. Blank pieces are dropped
    (they carry nothing and would only add separators)."""
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.budget import TokenBudget

    if budget < 0:
        raise ConfigError(f"budget must be >= 0, got {budget}")
    if scores is not None and len(scores) != len(pieces):
        raise ConfigError(f"scores must have one value per piece: {len(scores)} scores for {len(pieces)} pieces")
    kept = [(i, p.strip()) for i, p in enumerate(pieces) if p.strip()]
    text = CHUNK_SEPARATOR.join(p for _, p in kept)
    produced = int(counter.count(text)) if text else 0
    if produced <= budget:
        return PeerOutput(text, produced)
    chunks = [{"text": p, "id": f"piece{i}", **({"score": float(scores[i])} if scores is not None else {})}
              for i, p in kept]
    stage = TokenBudget(max_tokens=budget, policy="score" if scores is not None else "position", truncate=True)
    result = Pipeline([stage], tokenizer=counter).run(chunks)
    return PeerOutput(result.text, produced, cut=True)


def ragtrim_rows() -> dict[str, PeerRow]:
    """ragtrim's default (``trim()`` with no scorer argument) and the matrix's plain BM25 fill; neither can
    overshoot, so their ``produced_tokens`` is what they sent."""
    from ragtrim import get_counter
    from ragtrim_bench.relevance.rows import builtin_rows

    counter = get_counter(None)
    matrix_rows = builtin_rows()

    def wrap(name: str) -> PeerTrim:
        run = matrix_rows[name].trim

        def trim(passages: Sequence[str], question: str, budget: int) -> PeerOutput:
            chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate(passages)]
            text = run(chunks, question, budget)
            return PeerOutput(text, int(counter.count(text)) if text else 0)

        return trim

    return {
        "default": PeerRow("default", wrap("default"), "ragtrim: trim() with no scorer argument (the default "
                           "recipe)", {"call": "trim(chunks, query=question, budget=budget)"}),
        "plain-bm25": PeerRow("plain-bm25", wrap("plain-bm25"), matrix_rows["plain-bm25"].description,
                              {"call": "ragtrim_bench.relevance.baseline.plain_fill"}),
    }


def available_rows() -> dict[str, Callable[[], PeerRow]]:
    """Every runnable row by name, as a factory (a peer loads its models only when chosen), in report order."""
    from ragtrim_bench.peers import frameworks, lingua

    ours = ragtrim_rows()
    return {
        "default": lambda: ours["default"],
        "plain-bm25": lambda: ours["plain-bm25"],
        "longllmlingua": lingua.longllmlingua_row,
        "longllmlingua-coarse": lingua.coarse_row,
        "langchain": frameworks.langchain_row,
        "llamaindex": frameworks.llamaindex_row,
        "haystack": frameworks.haystack_row,
    }


DEFAULT_ROWS = ("default", "plain-bm25", "longllmlingua", "longllmlingua-coarse", "langchain", "llamaindex",
                "haystack")
REFERENCE_ROW = "default"
"""Every other row is compared with this one, request by request."""


def resolve_rows(names: Sequence[str]) -> tuple[list[PeerRow], list[dict[str, str]]]:
    """The rows named, built (models load here), and ``{"row", "error"}`` for each that failed to build (a missing
    package, a model that will not load): the run goes on without it and the result says why. ConfigError naming
    the choices for an unknown name."""
    table = available_rows()
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ConfigError(f"unknown rows {unknown}; choose from {list(table)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"row names must be unique, got {list(names)}")
    rows: list[PeerRow] = []
    failed: list[dict[str, str]] = []
    for name in names:
        try:
            rows.append(table[name]())
        except Exception as exc:  # noqa: BLE001 - one peer that cannot load must not stop the others
            failed.append({"row": name, "error": f"{type(exc).__name__}: {exc}"[:500]})
    return rows, failed
