"""Retention mode: keep the fewest best-ranked chunks that hold the answer with a stated probability, instead of a
blind ratio.

The probability comes from a calibration of the relevance scores on the dev part of every column of the quality
matrix (``ragtrim/data/retention_calibration.json``, written by ``ragtrim-bench relevance retention calibrate``):
for requests that look alike (whether a chunk is a table, else the query's script; the query's length; how decisive
the scores are), how often the answer-bearing chunk was among the k best. The stage keeps the k best whole, for the
smallest k whose calibrated share, read with a margin for requests unlike the dev ones (``SHARE_Z``), reaches
``keep``; where ranking is unsure (long legal questions, scores without a clear leader) that k is large, and the
stage says so (``info["unsure"]``) instead of losing the answer. The chunks kept are not compressed: the
compressor's sentence choice is not part of the calibration.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, ClassVar

import numpy as np

from ragtrim._util.stats import wilson_interval
from ragtrim._util.validate import Constraints, Interval, Text
from ragtrim.components import component
from ragtrim.errors import ConfigError
from ragtrim.models import Removal, StageOutput, TrimContext
from ragtrim.scoring.hybrid import decisiveness
from ragtrim.scoring.tables import is_table
from ragtrim.stages.base import Stage, chunk_tokens, register_stage, score_order
from ragtrim.text.scripts import CJK_SCRIPTS, query_length, share_in
from ragtrim.text.tokens import TokenCounter

CALIBRATION_FILE = "retention_calibration.json"
CALIBRATION_CHUNKS = 20
"""The calibration's requests have 20 chunks; a request of n chunks scales the k it needs by n / 20."""
MIN_CELL_REQUESTS = 40
"""A calibration cell with fewer dev requests than this gives way to its parent (kind and length, then kind)."""
SHARE_Z = 1.0
"""A cell's share is read as the lower end of its Wilson interval at ``z`` standard errors: the dev requests are a
sample, and documents unlike them (another company's reports, another firm's contracts) rank their answers lower
than the cell's average, so the stage keeps the k whose share is at least ``keep`` with that margin. The calibration
file holds the ``z`` chosen for it per kind of request (``share_z``: the smallest that held the target of every
column's requests of that kind when the calibration was cross-validated by document on dev); this is the margin of a file
without one."""
CELL_KINDS: tuple[str, ...] = ("tables", "cjk", "other")
"""The first part of a calibration cell (``features``); the calibration gives each its own margin (``share_z``)."""
_LENGTH_EDGES = (12, 25)
_DECISIVE_EDGES = (0.2, 0.4, 0.6)


def features(query: str, scores: list[float], *, tables: bool = False) -> tuple[str, str, str]:
    """The calibration cell of a request: its kind (``tables`` when a chunk is a table, ``ragtrim.scoring.tables.
    is_table``, whatever the query's script: a report's tables rank their answers lower than prose does; else the
    query's script, ``cjk`` or ``other``), the query's length (``ragtrim.text.scripts.query_length``: ``short`` up to
    12, ``medium`` up to 25, ``long``) and the scores' decisiveness bucket (``ragtrim.scoring.hybrid.decisiveness``:
    ``d0`` below 0.2, ``d1``, ``d2``, ``d3`` from 0.6)."""
    cjk = (share_in(query, CJK_SCRIPTS) or 0.0) >= 0.5
    length = query_length(query)
    size = "short" if length <= _LENGTH_EDGES[0] else "medium" if length <= _LENGTH_EDGES[1] else "long"
    d = decisiveness(np.asarray(scores, dtype=np.float64))
    bucket = sum(1 for edge in _DECISIVE_EDGES if d >= edge)
    return ("tables" if tables else "cjk" if cjk else "other"), size, f"d{bucket}"


@dataclass(frozen=True, slots=True)
class Cell:
    """One calibration cell: its name, how many dev requests it holds, and ``cdf[k - 1]``: the share of them whose
    answer-bearing chunk ranked k-th or better (with the calibration's one pseudo-miss: count / (n + 1))."""

    name: str
    n: int
    cdf: tuple[float, ...]
    z: float = SHARE_Z

    def share(self, k: int) -> float:
        """The share the stage relies on for the k best chunks: the lower end of ``cdf[k - 1]``'s Wilson interval
        at ``z`` standard errors (``n + 1`` trials, the pseudo-miss included; ``z = 0``: the share itself)."""
        if self.z <= 0:
            return self.cdf[k - 1]
        trials = self.n + 1
        return wilson_interval(round(self.cdf[k - 1] * trials), trials, z=self.z)[0]


@cache
def calibration() -> dict[str, Any]:
    """The packaged calibration (``{"tables": {scorer: {cell name: {"n", "cdf"}}}, ...}``)."""
    text = resources.files("ragtrim").joinpath("data", CALIBRATION_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def calibrated_scorers() -> tuple[str, ...]:
    return tuple(sorted(calibration()["tables"]))


def cell_names(cell: tuple[str, str, str]) -> tuple[str, ...]:
    """A request's cell (``features``) and its parents, most specific first: kind/length/decisiveness,
    kind/length, kind, every request."""
    kind, size, bucket = cell
    return f"{kind}/{size}/{bucket}", f"{kind}/{size}", kind, "all"


def lookup(table: dict[str, Any], cell: tuple[str, str, str], z: float) -> Cell | None:
    """The most specific of ``cell_names(cell)`` with at least ``MIN_CELL_REQUESTS`` requests in ``table``."""
    for name in cell_names(cell):
        entry = table.get(name)
        if entry is not None and entry["n"] >= MIN_CELL_REQUESTS:
            return Cell(name, int(entry["n"]), tuple(float(x) for x in entry["cdf"]), z)
    return None


def share_z(data: dict[str, Any], kind: str) -> float:
    """The margin a calibration file gives requests of ``kind`` (``tables``, ``cjk`` or ``other``): its
    ``share_z``, one number or one per kind (a kind it does not name takes ``other``'s); ``SHARE_Z`` where it names
    none."""
    z = data.get("share_z", SHARE_Z)
    if not isinstance(z, dict):
        return float(z)
    return float(z[kind] if kind in z else z.get("other", SHARE_Z))


def cell_for(scorer: str, query: str, scores: list[float], *, tables: bool = False) -> Cell:
    """The most specific cell with at least ``MIN_CELL_REQUESTS`` dev requests: kind/length/decisiveness, else
    kind/length, else kind, else every request (``features``; ``tables``: a chunk is a table); its shares read with
    the calibration's ``share_z`` for that kind."""
    data = calibration()
    table = data["tables"].get(scorer)
    if table is None:
        raise ConfigError(f"no retention calibration for scorer {scorer!r}; calibrated: {list(calibrated_scorers())}")
    cell = lookup(table, (found := features(query, scores, tables=tables)), share_z(data, found[0]))
    if cell is None:
        raise ConfigError(f"the retention calibration of {scorer!r} has no cell 'all'")
    return cell


def chunks_needed(cell: Cell, keep: float, n_chunks: int) -> tuple[int, float]:
    """The fewest best chunks (of ``n_chunks``) whose calibrated share (``Cell.share``) reaches ``keep``, and that
    share; all of them (share 1.0, nothing dropped) when no k of the calibration reaches it."""
    for k in range(1, len(cell.cdf) + 1):
        share = cell.share(k)
        if share >= keep:
            return min(n_chunks, math.ceil(k * n_chunks / CALIBRATION_CHUNKS)), share
    return n_chunks, 1.0


@register_stage
@component
class RetentionFilter(Stage):
    """Keep the fewest best-scored chunks that hold the answer with probability ``keep`` (calibrated), whole.

    Parameters:
        keep: the target probability that the answer survives, in (0, 1).
        calibration: which scorer's calibration to read (the scorer that set the chunks' scores: the default
            pipeline passes the relevance stage's resolved scorer).
        max_tokens: a cap: when the chunks the target needs do not fit it, fewer are kept and the estimate says
            what that costs (a later budget stage enforces the cap exactly).

    Needs scores from an earlier relevance stage; without them (an empty query, one chunk) everything is kept.
    Pinned chunks are always kept and not counted. Trace: every chunk left out gets ``low_relevance`` ("outside
    the 4 best chunks that hold the answer with estimated probability 0.953, target 0.95"); ``info`` holds the
    estimate, the cell of the calibration that decided it and how many dev requests it rests on, ``unsure`` (the
    target needed more than half the chunks) and ``capped`` (``max_tokens`` kept fewer than the target needed).
    """

    name = "retention"
    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "keep": [Interval(float, 0.0, 1.0, closed="neither")],
        "calibration": [Text("a scorer name")],
        "max_tokens": [Interval(int, 0, None), None],
    }

    keep: float = 0.95
    calibration: str = "balanced"
    max_tokens: int | None = None

    def _check_params(self) -> None:
        if self.calibration not in calibration()["tables"]:
            raise ConfigError(f"no retention calibration for scorer {self.calibration!r}; calibrated: "
                              f"{list(calibrated_scorers())} (retention mode needs one of them as the scorer)")

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        chunks = context.chunks
        candidates = [i for i, c in enumerate(chunks) if not c.pinned]
        if len(candidates) < 2 or any(chunks[i].score is None for i in candidates) or not context.query.strip():
            return StageOutput(context, info={"keep": self.keep, "estimate": 1.0, "chunks_kept": len(chunks),
                                              "reason": "nothing ranked: every chunk kept"})
        order = [i for i in score_order(chunks) if not chunks[i].pinned]
        scores = [float(chunks[i].score or 0.0) for i in candidates]
        cell = cell_for(self.calibration, context.query, scores,
                        tables=any(is_table(chunks[i].text) for i in candidates))
        k, estimate = chunks_needed(cell, self.keep, len(order))
        capped = False
        if self.max_tokens is not None:
            room = self.max_tokens - sum(chunk_tokens(c, counter) for c in chunks if c.pinned)
            used, fits = 0, 0
            for i in order[:k]:
                used += chunk_tokens(chunks[i], counter)
                if used > room:
                    break
                fits += 1
            if fits < k:
                capped = True
                k = max(fits, 1)
                estimate = cell.share(min(len(cell.cdf), math.ceil(k * CALIBRATION_CHUNKS / len(order))))
        kept = set(order[:k]) | {i for i, c in enumerate(chunks) if c.pinned}
        why = (f"outside the {k} best chunks that hold the answer with estimated probability {estimate:.3f}, "
               f"target {self.keep}" + (" (capped by max_tokens)" if capped else ""))
        removals = tuple(Removal(chunks[i].id, self.name, "low_relevance", 0, why) for i in order[k:])
        unsure = k > len(order) / 2
        info: dict[str, Any] = {
            "keep": self.keep, "estimate": estimate, "chunks_kept": k, "chunks": len(order), "cell": cell.name,
            "calibration_requests": cell.n, "unsure": unsure, "capped": capped,
            "reason": (f"ranking unsure ({cell.name}): kept {k} of {len(order)} chunks to reach {self.keep}"
                       if unsure and not capped else
                       f"the budget holds {k} chunks: estimated {estimate:.3f}, below the target {self.keep}"
                       if capped else f"kept the {k} best of {len(order)} chunks: estimated {estimate:.3f}"),
        }
        return StageOutput(context.with_chunks(tuple(c for i, c in enumerate(chunks) if i in kept)), removals,
                           info=info)
