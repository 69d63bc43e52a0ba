"""Cold cost of ``trim()`` per input token in each script, against English's, and its growth with the input.

  ragtrim-bench languages cost [--languages en,ko,ja,zh,zh-unpunct] [--scorers bm25,auto] [--requests 7]
                               [--growth 25000,100000,400000] [--output PATH]

Per token: ``requests`` requests per language of 20 chunks of 1,000 characters (a different text each time), budget a
quarter of the input's cl100k tokens, every call cold (``ragtrim.caches.clear_caches()`` just before it), after one
warm-up call per language and scorer (model load, imports). Languages and scorers take turns within each request
round, so machine noise falls on all alike. Wall time and CPU time (all threads of the process) per cl100k input
token (the target: at most 2x English's for Korean, Japanese and Chinese), and CPU time per character (cl100k cuts
CJK text into about one token per character, English into one per 4.5).

Growth: one chunk of each size (4x steps), cold, per language and scorer, and tiktoken's count of it alone; linear
growth is a ratio near 4 per step.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile
from ragtrim_bench.languages.corpora import LANGUAGES, QUERIES, check_languages, chunks, text

MODULE = "ragtrim_bench.languages.cost"
SCORERS = ("bm25", "auto")
BUDGET_RATIO = 4


@dataclass(frozen=True)
class CostConfig:
    languages: tuple[str, ...] = LANGUAGES
    scorers: tuple[str, ...] = SCORERS
    requests: int = 7
    chunks: int = 20
    chunk_chars: int = 1000
    growth_chars: tuple[int, ...] = (25_000, 100_000, 400_000)
    growth_languages: tuple[str, ...] = ("en", "ko", "ja", "zh-unpunct")
    output: str = ""
    """The JSON (empty: ``benchmarks/results/languages/cost.json``)."""

    def __post_init__(self) -> None:
        check_languages(self.languages)
        check_languages(self.growth_languages)
        if self.requests < 1 or self.chunks < 1 or self.chunk_chars < 1:
            raise ConfigError("requests, chunks and chunk_chars must be >= 1")
        if any(s not in SCORERS for s in self.scorers) or not self.scorers:
            raise ConfigError(f"scorers must be among {list(SCORERS)}, got {list(self.scorers)}")


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float


def cold_call(call: Callable[[], object]) -> Timing:
    """Time ``call`` with every ragtrim cache emptied just before (models stay loaded)."""
    from ragtrim.caches import clear_caches

    clear_caches()
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu)


def per_token_us(seconds: Sequence[float], tokens: Sequence[int]) -> float:
    """The median over requests of microseconds per input token."""
    if len(seconds) != len(tokens) or not seconds:
        raise ConfigError("one token count per timing is needed")
    return percentile([1e6 * s / n for s, n in zip(seconds, tokens)], 50)


def growth_steps(seconds: Sequence[float]) -> list[float]:
    """Time ratio of each size step over the one before (about 4 for a 4x step: linear growth)."""
    return [round(b / a, 2) if a > 0 else float("nan") for a, b in pairwise(seconds)]


def _trim(texts: list[str], query: str, scorer: str, budget: int) -> Callable[[], object]:
    import ragtrim

    return lambda: ragtrim.trim(texts, query=query, budget=budget, scorer=scorer)  # type: ignore[arg-type]


def measure_per_token(cfg: CostConfig) -> dict[str, Any]:
    from ragtrim.text.tokens import get_counter

    counter = get_counter(None)
    pairs = [(lang, scorer) for lang in cfg.languages for scorer in cfg.scorers]
    for lang, scorer in pairs:  # warm up: imports, model loads, ONNX sessions
        _trim(chunks(lang, 2, 200, seed=999), QUERIES[lang], scorer, 50)()
    timings: dict[tuple[str, str], list[Timing]] = {p: [] for p in pairs}
    tokens: dict[str, list[int]] = {lang: [] for lang in cfg.languages}
    for r in range(cfg.requests):
        request = {lang: chunks(lang, cfg.chunks, cfg.chunk_chars, seed=r) for lang in cfg.languages}
        for lang in cfg.languages:
            tokens[lang].append(sum(counter.count(c) for c in request[lang]))
        order = pairs if r % 2 == 0 else pairs[::-1]
        for lang, scorer in order:
            budget = tokens[lang][-1] // BUDGET_RATIO
            timings[(lang, scorer)].append(cold_call(_trim(request[lang], QUERIES[lang], scorer, budget)))
    out: dict[str, Any] = {}
    for lang in cfg.languages:
        row: dict[str, Any] = {"chars_per_request": cfg.chunks * cfg.chunk_chars,
                               "p50_cl100k_tokens_per_request": percentile(tokens[lang], 50)}
        for scorer in cfg.scorers:
            ts = timings[(lang, scorer)]
            row[f"{scorer}_p50_wall_ms"] = round(1000 * percentile([t.wall_s for t in ts], 50), 2)
            row[f"{scorer}_wall_us_per_token"] = round(per_token_us([t.wall_s for t in ts], tokens[lang]), 2)
            row[f"{scorer}_cpu_us_per_token"] = round(per_token_us([t.cpu_s for t in ts], tokens[lang]), 2)
            chars = [cfg.chunks * cfg.chunk_chars] * len(ts)
            row[f"{scorer}_cpu_us_per_char"] = round(per_token_us([t.cpu_s for t in ts], chars), 3)
        out[lang] = row
    if "en" in out:
        for lang, row in out.items():
            for scorer in cfg.scorers:
                for kind in ("wall", "cpu"):
                    en = out["en"][f"{scorer}_{kind}_us_per_token"]
                    row[f"{scorer}_{kind}_ratio_to_en"] = round(row[f"{scorer}_{kind}_us_per_token"] / en, 2)
                en_char = out["en"][f"{scorer}_cpu_us_per_char"]
                row[f"{scorer}_cpu_per_char_ratio_to_en"] = round(row[f"{scorer}_cpu_us_per_char"] / en_char, 2)
    return out


def measure_growth(cfg: CostConfig) -> dict[str, Any]:
    from ragtrim.text.tokens import get_counter

    counter = get_counter(None)
    out: dict[str, Any] = {}
    for lang in cfg.growth_languages:
        rows = []
        for n in cfg.growth_chars:
            one = text(lang, n, seed=1)
            tokens = counter.count(one)
            row: dict[str, Any] = {"chars": n, "cl100k_tokens": tokens}
            cpu = time.process_time()
            counter._count_raw(one)  # type: ignore[attr-defined]  # tiktoken alone, uncached: its share of the growth
            row["cl100k_count_cpu_s"] = round(time.process_time() - cpu, 3)
            for scorer in cfg.scorers:
                t = cold_call(_trim([one], QUERIES[lang], scorer, tokens // BUDGET_RATIO))
                row[f"{scorer}_wall_s"], row[f"{scorer}_cpu_s"] = round(t.wall_s, 3), round(t.cpu_s, 3)
            rows.append(row)
            print(lang, row, flush=True)
        summary: dict[str, Any] = {"sizes": rows}
        for scorer in cfg.scorers:
            summary[f"{scorer}_cpu_ratio_per_step"] = growth_steps([r[f"{scorer}_cpu_s"] for r in rows])
        summary["cl100k_count_cpu_ratio_per_step"] = growth_steps([r["cl100k_count_cpu_s"] for r in rows])
        out[lang] = summary
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragtrim_bench.languages.cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    d = CostConfig()
    parser.add_argument("--languages", default=",".join(d.languages))
    parser.add_argument("--scorers", default=",".join(d.scorers))
    parser.add_argument("--requests", type=int, default=d.requests)
    parser.add_argument("--growth", default=",".join(map(str, d.growth_chars)),
                        help="one-chunk sizes in characters, comma-separated (empty: skip the growth part)")
    parser.add_argument("--output", default=d.output)
    args = parser.parse_args(argv)
    cfg = CostConfig(languages=tuple(args.languages.split(",")), scorers=tuple(args.scorers.split(",")),
                     requests=args.requests, output=args.output,
                     growth_chars=tuple(int(x) for x in args.growth.split(",") if x))
    from ragtrim.scoring.auto import choose

    per_token = measure_per_token(cfg)
    for lang, row in per_token.items():
        print(lang, row, flush=True)
    growth = measure_growth(cfg) if cfg.growth_chars else {}
    out = Path(cfg.output) if cfg.output else result_path(MODULE)
    print("wrote", write_result(out, {"config": asdict(cfg), "auto": choose().to_dict(), "cold_per_token": per_token,
                                      "growth_one_chunk": growth}, command=command_line(MODULE, argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
