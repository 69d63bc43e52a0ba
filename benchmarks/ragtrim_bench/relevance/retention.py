"""Retention mode: calibrate the relevance scores on the dev columns, then measure the retention reached and the
compression bought on held-out columns at each target.

  ragtrim-bench relevance retention calibrate [--scorers balanced,bm25] [--limit N] [--output PATH]
  ragtrim-bench relevance retention evaluate [--scorer auto] [--keeps 0.9,0.95,0.99] [--limit N] [--split heldout]

``calibrate`` ranks every dev request of every column of the quality matrix with each scorer (the default
pipeline's stages up to the relevance stage), finds the best rank of a chunk that holds an answer, and writes, per
calibration cell (``ragtrim.stages.retention.features``), the share of requests whose answer-bearing chunk ranked
k-th or better, counted with one pseudo-miss per cell (so a share never claims certainty on finite data), to
``benchmarks/results/relevance/retention_calibration.json`` by default. The library reads its packaged copy,
``ragtrim/data/retention_calibration.json``: copy the new table there once it is checked. ``evaluate`` runs
``trim(chunks, query=q, keep=t)`` on each request and records whether an answer survived and how many tokens went.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError, InputError
from ragtrim.models import CHUNK_SEPARATOR
from ragtrim_bench.common.answers import answer_substring_in_text
from ragtrim_bench.common.results import command_line, json_safe, result_path
from ragtrim_bench.common.stats import mean, percentile
from ragtrim_bench.relevance.columns import COLUMNS, Request, Split, build_column

CALIBRATION_OUTPUT = result_path("ragtrim_bench.relevance.retention", "_calibration")
"""Where ``calibrate`` writes by default; the library reads its packaged copy, ``ragtrim/data/retention_calibration.json``,
so copy a new calibration there once it is checked."""
DEFAULT_OUTPUT = result_path("ragtrim_bench.relevance.retention")
KEEPS = (0.90, 0.95, 0.99)
N_RANKS = 20


@dataclass(frozen=True, slots=True)
class Ranked:
    """One request under one scorer: its calibration cell and the best rank of a chunk holding an answer (None:
    no chunk left after dedup holds one)."""

    column: str
    request_id: str
    cell: tuple[str, str, str]
    rank: int | None
    chunks: int = N_RANKS
    """How many chunks were ranked (after duplicates left)."""
    group: str = ""
    """The request's source document where a column has several questions per document (a fold's unit)."""


def calibration_scorer(scorer: str) -> Any:
    """What ``scorer``'s table is measured with. ``balanced`` without its query adapter: the adapter was trained on
    these dev requests, so its ranks of them are a memory, not a measurement; on the long queries it maps it ranks
    the answer higher than the plain vector (cross-validated, docs/relevance.md), so the table errs toward keeping
    more there."""
    if scorer == "balanced":
        from ragtrim.scoring.auto import balanced_scorer

        return balanced_scorer(query_adapter=None)
    return scorer


def rank_request(request: Request, scorer: Any, group: str = "") -> Ranked:
    """Score ``request`` as the default pipeline does before its budget stages (``scorer``: a name or a scorer),
    and find the answer's best rank."""
    from ragtrim import Pipeline
    from ragtrim.scoring.tables import is_table
    from ragtrim.stages.dedup import DuplicateFilter
    from ragtrim.stages.html import HtmlCleaner
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim.stages.retention import features

    chunks = [{"text": t, "id": f"p{i}"} for i, t in enumerate(request.passages)]
    result = Pipeline([HtmlCleaner(), DuplicateFilter(), RelevanceFilter(scorer=scorer, top_k=None)]).run(
        chunks, query=request.question)
    kept = sorted(result.chunks, key=lambda c: -(c.score or 0.0))  # stable: ties keep input order, as score_order
    rank = next((k for k, c in enumerate(kept, start=1) if answer_substring_in_text(request.answers, c.text)), None)
    cell = features(request.question, [c.score or 0.0 for c in result.chunks],
                    tables=any(is_table(c.text) for c in result.chunks))
    return Ranked(request.column, request.id, cell, rank, len(kept), group)


def cell_table(ranked: Sequence[Ranked]) -> dict[str, dict[str, Any]]:
    """Per cell name (``kind/length/decisiveness``, ``kind/length``, ``kind``, ``all``): how many requests
    and ``cdf[k - 1]``, the share whose answer ranked k-th or better, with one pseudo-miss (``count / (n + 1)``)."""
    from ragtrim.stages.retention import cell_names

    groups: dict[str, list[int | None]] = {}
    for r in ranked:
        for name in cell_names(r.cell):
            groups.setdefault(name, []).append(r.rank)
    return {name: {"n": len(ranks), "cdf": [round(sum(1 for x in ranks if x is not None and x <= k)
                                                  / (len(ranks) + 1), 4) for k in range(1, N_RANKS + 1)]}
            for name, ranks in sorted(groups.items())}


Z_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
"""The margins ``calibrate`` tries (``ragtrim.stages.retention.SHARE_Z``), smallest first."""
FOLDS = 5
CV_SLACK = 0.01
"""A margin holds a column when its cross-validated retention is at least ``keep - CV_SLACK`` at every target."""
MIN_CV_REQUESTS = 40
"""A column judges a kind's margin only with at least this many requests of that kind."""


def _documents() -> dict[str, str]:
    """The source document of each dev request of the columns with several questions per document."""
    from ragtrim_bench.datasets.cuad import cuad_questions
    from ragtrim_bench.datasets.tatqa import tatqa_questions

    docs = {f"cuad/{q.id}": q.document for q in cuad_questions("dev", 0)}
    docs.update({f"tatqa/{q.id}": q.document for q in tatqa_questions("dev", 0)})
    return docs


def _fold(r: Ranked) -> int:
    key = r.group or f"{r.column}/{r.request_id}"
    return hashlib.sha256(key.encode("utf-8")).digest()[0] % FOLDS


def cross_validate(ranked: Sequence[Ranked], keeps: Sequence[float], z: float) -> dict[str, dict[str, Any]]:
    """Per kind (the first part of a cell: ``tables``, ``cjk``, ``other``) and column, the share of the column's
    requests of that kind whose answer the stage would keep at each target, with a table built from the other folds (by
    document: a report or a contract is never on both sides) and margin ``z``; ``n`` the requests."""
    from ragtrim.stages.retention import chunks_needed, lookup

    kept: dict[tuple[str, str], dict[float, list[bool]]] = {}
    for fold in range(FOLDS):
        table = cell_table([r for r in ranked if _fold(r) != fold])
        for r in (r for r in ranked if _fold(r) == fold):
            cell = lookup(table, r.cell, z)
            for keep in keeps:
                k = r.chunks if cell is None else chunks_needed(cell, keep, r.chunks)[0]
                kept.setdefault((r.cell[0], r.column), {}).setdefault(keep, []).append(
                    r.rank is not None and r.rank <= k)
    out: dict[str, dict[str, Any]] = {}
    for (kind, column), by_keep in sorted(kept.items()):
        out.setdefault(kind, {})[column] = {"n": len(next(iter(by_keep.values()))),
                                              **{f"{keep:g}": round(sum(b) / len(b), 4) for keep, b in by_keep.items()}}
    return out


def choose_z(cv: dict[float, dict[str, dict[str, Any]]], keeps: Sequence[float], kind: str) -> float:
    """The smallest margin under which, for every column with at least ``MIN_CV_REQUESTS`` requests of ``kind``,
    their cross-validated retention reaches ``keep - CV_SLACK`` at every target; the largest tried when none does."""
    for z in sorted(cv):
        columns = [c for c in cv[z].get(kind, {}).values() if c["n"] >= MIN_CV_REQUESTS]
        if all(c[f"{keep:g}"] >= keep - CV_SLACK for c in columns for keep in keeps):
            return z
    return max(cv)


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def calibrate(scorers: Sequence[str], limit: int, columns: Sequence[str], command: str) -> dict[str, Any]:
    """Every scorer's table, and the margin (``share_z``): the smallest of ``Z_GRID`` under which every scorer's
    cross-validated retention holds on every column (``choose_z``)."""
    from ragtrim.stages.retention import CELL_KINDS

    tables: dict[str, Any] = {}
    per_column: dict[str, Any] = {}
    cv: dict[str, dict[float, Any]] = {}
    docs = _documents()
    for scorer in scorers:
        measured = calibration_scorer(scorer)
        ranked = [rank_request(r, measured, docs.get(f"{c}/{r.id}", "")) for c in columns
                  for r in build_column(c, "dev", limit=limit)]
        tables[scorer] = cell_table(ranked)
        per_column[scorer] = {c: cell_table([r for r in ranked if r.column == c])["all"] for c in columns}
        cv[scorer] = {z: cross_validate(ranked, KEEPS, z) for z in Z_GRID}
    share_z = {kind: max(choose_z(by_z, KEEPS, kind) for by_z in cv.values()) for kind in CELL_KINDS}
    return {"about": "share of dev requests of the quality matrix whose answer-bearing chunk ranked k-th or better "
                     "(cdf[k-1]), per calibration cell of ragtrim.stages.retention.features, one pseudo-miss per "
                     "cell; share_z: per kind, the margin the stage reads each share with (the lower end of its "
                     f"Wilson interval), the smallest under which the {FOLDS}-fold cross-validated retention (folds "
                     f"by document) of every column's requests of that kind reached keep - {CV_SLACK} at every "
                     f"keep of {list(KEEPS)}",
            "command": command, "git_commit": _commit(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "split": "dev",
            "limit": limit, "columns": list(columns), "share_z": share_z, "tables": tables,
            "per_column": per_column,
            "cross_validated": {s: {f"{z:g}": v for z, v in by_z.items()} for s, by_z in cv.items()}}


def evaluate(scorer: str, keeps: Sequence[float], split: Split, limit: int, columns: Sequence[str],
             command: str) -> dict[str, Any]:
    from ragtrim import get_counter, trim

    counter = get_counter(None)
    records: list[dict[str, Any]] = []
    for column in columns:
        requests = build_column(column, split, limit=limit)
        for keep in keeps:
            kept, ratios, estimates, unsure = [], [], [], []
            for r in requests:
                before = counter.count(CHUNK_SEPARATOR.join(r.passages))
                res = trim([{"text": t, "id": f"p{i}"} for i, t in enumerate(r.passages)], query=r.question,
                           keep=keep, scorer=scorer)  # type: ignore[arg-type]
                info = next(x.info for x in res.trace if x.stage == "retention")
                kept.append(answer_substring_in_text(r.answers, res.text))
                ratios.append(before / max(1, counter.count(res.text)))
                estimates.append(float(info["estimate"]))
                unsure.append(bool(info.get("unsure")))
            records.append({"column": column, "split": split, "keep": keep, "n": len(requests),
                            "retention": mean([float(x) for x in kept]), "mean_estimate": mean(estimates),
                            "compression_mean": mean(ratios), "compression_p50": percentile(ratios, 50),
                            "unsure_share": mean([float(x) for x in unsure]),
                            "kept_bits": "".join("1" if x else "0" for x in kept)})
    return {"benchmark": "retention", "command": command, "git_commit": _commit(), "scorer": scorer,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "split": split,
            "limit": limit, "retention_test": "a gold answer, normalized, is a substring of the normalized output",
            "compression": "untrimmed context cl100k tokens / output tokens", "records": records}


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(prog="ragtrim-bench relevance retention",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("action", choices=("calibrate", "evaluate"))
    parser.add_argument("--scorers", default="balanced,bm25", help="calibrate: the scorers to calibrate")
    parser.add_argument("--scorer", default="auto", help="evaluate: trim(scorer=...)")
    parser.add_argument("--keeps", default=",".join(map(str, KEEPS)))
    parser.add_argument("--split", choices=("dev", "heldout"), default="heldout", help="evaluate: the split")
    parser.add_argument("--columns", default=",".join(COLUMNS))
    parser.add_argument("--limit", type=int, default=150)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    command = command_line("ragtrim_bench.relevance.retention", sys.argv[1:] if argv is None else argv)
    try:
        if args.action == "calibrate":
            result = calibrate([s.strip() for s in args.scorers.split(",") if s.strip()], args.limit, columns,
                               command)
            out = Path(args.output) if args.output else CALIBRATION_OUTPUT
        else:
            keeps = [float(k) for k in args.keeps.split(",")]
            result = evaluate(args.scorer, keeps, args.split, args.limit, columns, command)
            out = Path(args.output) if args.output else DEFAULT_OUTPUT
    except (ConfigError, InputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(json_safe(result), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.action == "evaluate":
        for rec in result["records"]:
            print(f"{rec['column']:14s} keep {rec['keep']:.2f}: retention {rec['retention']:.3f} (estimate "
                  f"{rec['mean_estimate']:.3f}), compression p50 {rec['compression_p50']:.1f}x mean "
                  f"{rec['compression_mean']:.1f}x, unsure {rec['unsure_share']:.2f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
