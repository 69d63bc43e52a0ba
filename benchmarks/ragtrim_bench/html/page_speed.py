"""Whole HTML pages through ``trim()`` against ``trafilatura.extract``: pages per second, wall and CPU.

  ragtrim-bench html page_speed [--limit N] [--query TEXT]

Each page of the article-extraction set goes once through each, in alternating order (a page's turn starts with
trafilatura on even pages, with ``trim()`` on odd ones), after both warmed up on the first ``--warmup`` pages.
``trim([page], query=...)`` is the library's default pipeline as a user calls it (no budget: the page is cleaned,
checked for duplicates, and counted: ``tokens_before`` is the raw page's exact count); ragtrim's caches are cleared
before every call, so no count is reused. Wall time is what a caller waits; CPU time (all threads of the process) is
what the host pays: ``trim()`` counts the raw page on worker threads while it extracts the content.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim_bench.common.results import write_and_report
from ragtrim_bench.common.stats import mean, percentile
from ragtrim_bench.html.extraction import HtmlBenchConfig, load_pages

PACKAGES = ("ragtrim", "trafilatura", "lxml", "tiktoken")


@dataclass(frozen=True)
class PageSpeedConfig:
    limit: int | None = None
    warmup: int = 3
    query: str = ""


def _trim(query: str) -> Callable[[str], Any]:
    def run(page: str) -> Any:
        from ragtrim import trim
        from ragtrim.caches import clear_caches

        clear_caches()
        return trim([page], query=query)

    return run


def _trafilatura(page: str) -> Any:
    import trafilatura

    return trafilatura.extract(page)


def _timed(fn: Callable[[str], Any], page: str) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn(page)
    return time.perf_counter() - w, time.process_time() - c


def rate(seconds: Sequence[float]) -> float:
    """Pages per second over the whole run (0 for none)."""
    total = sum(seconds)
    return len(seconds) / total if total > 0 else 0.0


def measure(config: PageSpeedConfig) -> dict[str, Any]:
    pages = [html for _, html, _ in load_pages(HtmlBenchConfig(limit_pages=config.limit))]
    extractors = {"trim": _trim(config.query), "trafilatura": _trafilatura}
    for page in pages[: config.warmup]:
        for fn in extractors.values():
            fn(page)
    wall: dict[str, list[float]] = {k: [] for k in extractors}
    cpu: dict[str, list[float]] = {k: [] for k in extractors}
    for k, page in enumerate(pages):
        order = list(extractors) if k % 2 == 0 else list(reversed(extractors))
        for name in order:
            w, c = _timed(extractors[name], page)
            wall[name].append(w)
            cpu[name].append(c)
    out: dict[str, Any] = {"pages": len(pages), "mean_page_chars": mean([len(p) for p in pages])}
    for name in extractors:
        out[name] = {"pages_per_second": rate(wall[name]), "cpu_pages_per_second": rate(cpu[name]),
                     "p50_ms": percentile([w * 1000 for w in wall[name]], 50),
                     "p50_cpu_ms": percentile([c * 1000 for c in cpu[name]], 50)}
    out["trim_vs_trafilatura_speed"] = out["trim"]["pages_per_second"] / out["trafilatura"]["pages_per_second"]
    out["trim_vs_trafilatura_cpu"] = out["trim"]["cpu_pages_per_second"] / out["trafilatura"]["cpu_pages_per_second"]
    return out


def report(result: dict[str, Any]) -> str:
    lines = [f"{result['pages']} pages, {result['mean_page_chars']:.0f} characters on average"]
    for name in ("trim", "trafilatura"):
        r = result[name]
        lines.append(f"  {name:12s} {r['pages_per_second']:7.1f} pages/s (p50 {r['p50_ms']:.1f} ms), CPU "
                     f"{r['cpu_pages_per_second']:7.1f} pages/s (p50 {r['p50_cpu_ms']:.1f} ms)")
    lines.append(f"  trim() / trafilatura: {result['trim_vs_trafilatura_speed']:.2f}x wall, "
                 f"{result['trim_vs_trafilatura_cpu']:.2f}x CPU")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="pages (default: all)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--query", default="", help="the query trim() gets (default: none)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/html/page_speed.json")
    args = parser.parse_args(argv)
    config = PageSpeedConfig(limit=args.limit, warmup=args.warmup, query=args.query)
    result = {"benchmark": "page_speed", "config": config.__dict__, **measure(config)}
    write_and_report(__spec__.name, argv, args.output, result, report=report(result), packages=PACKAGES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
