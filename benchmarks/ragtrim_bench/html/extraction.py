"""Main-content extraction quality and speed: ragtrim's extractor vs trafilatura on the article-extraction pages.

Scores each page's extracted text against the gold ``articleBody`` with multiset shingle precision/recall/F1, both
with 4-character shingles over whitespace-normalized text (the project's acceptance metric) and with 4-word shingles
(the metric of the upstream benchmark's evaluate.py, comparable to its published numbers). Writes
``benchmarks/results/html/extraction.json``. Run: ``ragtrim-bench html extraction [ragtrim|trafilatura ...]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim.html.extract import extract_main_content
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import mean
from ragtrim_bench.datasets import dataset_path

Extractor = Callable[[str], str]


@dataclass(frozen=True)
class HtmlBenchConfig:
    dataset: str = "html-extraction"
    extractors: tuple[str, ...] = ("ragtrim", "trafilatura")
    warmup_pages: int = 3
    limit_pages: int | None = None


# -- metrics (pure) ---------------------------------------------------------------------------------------------------
_WORD = re.compile(r"\w+")


def char_shingles(text: str, n: int = 4) -> Counter[str]:
    norm = " ".join(text.split())
    return Counter(norm[i: i + n] for i in range(max(0, len(norm) - n + 1)))


def word_shingles(text: str, n: int = 4) -> Counter[tuple[str, ...]]:
    toks = _WORD.findall(text)
    return Counter(tuple(toks[i: i + n]) for i in range(max(1, len(toks) - n + 1)) if toks[i: i + n])


def prf(true: Counter[Any], pred: Counter[Any]) -> tuple[float, float, float, int, int, int]:
    """Precision, recall, F1 and (tp, fp, fn) of multiset overlap; empty vs empty counts as perfect."""
    tp = sum((true & pred).values())
    fp = sum(pred.values()) - tp
    fn = sum(true.values()) - tp
    if fp == fn == 0:
        return 1.0, 1.0, 1.0, tp, fp, fn
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f, tp, fp, fn


def aggregate(rows: Sequence[dict[str, Any]], prefix: str) -> dict[str, float]:
    """Mean-over-pages P/R, their harmonic F1 (the upstream convention), mean per-page F1, and micro P/R/F1."""
    p = mean([r[f"{prefix}_precision"] for r in rows])
    rc = mean([r[f"{prefix}_recall"] for r in rows])
    tp = sum(r[f"{prefix}_tp"] for r in rows)
    fp = sum(r[f"{prefix}_fp"] for r in rows)
    fn = sum(r[f"{prefix}_fn"] for r in rows)
    mp = tp / (tp + fp) if tp + fp else 0.0
    mr = tp / (tp + fn) if tp + fn else 0.0
    return {
        f"{prefix}_precision_mean": p,
        f"{prefix}_recall_mean": rc,
        f"{prefix}_f1": 2 * p * rc / (p + rc) if p + rc else 0.0,
        f"{prefix}_f1_mean_per_page": mean([r[f"{prefix}_f1"] for r in rows]),
        f"{prefix}_precision_micro": mp,
        f"{prefix}_recall_micro": mr,
        f"{prefix}_f1_micro": 2 * mp * mr / (mp + mr) if mp + mr else 0.0,
    }


# -- extractors -----------------------------------------------------------------------------------------------------
def _ragtrim(html: str) -> str:
    return extract_main_content(html).text


def _trafilatura(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html) or ""


EXTRACTORS: dict[str, Extractor] = {"ragtrim": _ragtrim, "trafilatura": _trafilatura}


# -- measurement ----------------------------------------------------------------------------------------------------
def load_pages(config: HtmlBenchConfig) -> list[tuple[str, str, str]]:
    """``(page_id, html, gold)`` sorted by id."""
    root = dataset_path(config.dataset)
    gold = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for path in sorted((root / "html").glob("*.html.gz")):
        pid = path.name.removesuffix(".html.gz")
        html = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
        pages.append((pid, html, gold[pid]["articleBody"]))
    return pages[: config.limit_pages] if config.limit_pages else pages


def measure(config: HtmlBenchConfig) -> dict[str, Any]:
    pages = load_pages(config)
    result: dict[str, Any] = {"dataset": config.dataset, "pages": len(pages)}
    per_page: dict[str, dict[str, Any]] = {pid: {"id": pid} for pid, _, _ in pages}
    for name in config.extractors:
        fn = EXTRACTORS[name]
        for _, html, _ in pages[: config.warmup_pages]:
            fn(html)
        rows = []
        total_s = 0.0
        for pid, html, gold in pages:
            t0 = time.perf_counter()
            try:
                text, error = fn(html), ""
            except Exception as exc:  # noqa: BLE001 - a per-page failure is a data point, not a crash
                text, error = "", f"{type(exc).__name__}: {exc}"
            total_s += time.perf_counter() - t0
            row: dict[str, Any] = {}
            for prefix, shingle in (("char4", char_shingles), ("word4", word_shingles)):
                p, r, f, tp, fp, fn_ = prf(shingle(gold), shingle(text))
                row.update({f"{prefix}_precision": p, f"{prefix}_recall": r, f"{prefix}_f1": f,
                            f"{prefix}_tp": tp, f"{prefix}_fp": fp, f"{prefix}_fn": fn_})
            rows.append(row)
            per_page[pid].update({f"{name}_{k}": v for k, v in row.items() if not k.endswith(("_tp", "_fp", "_fn"))})
            per_page[pid][f"{name}_chars"] = len(text)
            per_page[pid][f"{name}_error"] = error
        for prefix in ("char4", "word4"):
            result.update({f"{name}_{k}": v for k, v in aggregate(rows, prefix).items()})
        result[f"{name}_pages_per_second"] = len(pages) / total_s if total_s else 0.0
        result[f"{name}_errors"] = sum(1 for r in per_page.values() if r[f"{name}_error"])
    result["per_page"] = list(per_page.values())
    return result


def report(result: dict[str, Any], config: HtmlBenchConfig) -> None:
    print(f"{result['pages']} pages from {result['dataset']}")
    print(f"{'extractor':<12} {'metric':<6} {'P':>6} {'R':>6} {'F1':>6} {'F1/page':>8} {'F1micro':>8} {'pages/s':>8}")
    for name in config.extractors:
        for prefix in ("char4", "word4"):
            print(f"{name:<12} {prefix:<6} {result[f'{name}_{prefix}_precision_mean']:6.3f} "
                  f"{result[f'{name}_{prefix}_recall_mean']:6.3f} {result[f'{name}_{prefix}_f1']:6.3f} "
                  f"{result[f'{name}_{prefix}_f1_mean_per_page']:8.3f} {result[f'{name}_{prefix}_f1_micro']:8.3f} "
                  f"{result[f'{name}_pages_per_second']:8.1f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extractors", nargs="*", help=f"some of {', '.join(EXTRACTORS)} (default: all)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/html/extraction.json")
    args = parser.parse_args(argv)
    if unknown := sorted(set(args.extractors) - set(EXTRACTORS)):
        parser.error(f"unknown extractors {unknown}; choose from {', '.join(EXTRACTORS)}")
    config = HtmlBenchConfig(extractors=tuple(args.extractors) or HtmlBenchConfig.extractors)
    result = measure(config)
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=["trafilatura", "lxml"])
    report(result, config)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
