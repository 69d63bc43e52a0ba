"""Pipeline overhead: p50/p99 ms per call for 20 chunks of ~150 words through HTML cleanup + dedup + budget.

Chunks are real SQuAD paragraphs (from ../shared/data, or $RAGTRIM_DATA) cut to ~150 words; every other one is wrapped
in an HTML fragment with navigation and a footer, and two are duplicated, as a retriever over web pages returns them.
Run: ragtrim-bench pipeline overhead  -> benchmarks/results/pipeline/overhead.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget
from ragtrim.stages.dedup import DuplicateFilter
from ragtrim.stages.html import HtmlCleaner
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import summarize_ms
from ragtrim_bench.datasets import dataset_path


@dataclass(frozen=True)
class OverheadConfig:
    chunks_per_call: int = 20
    words_per_chunk: int = 150
    calls: int = 300
    warmup_calls: int = 20
    budget_tokens: int = 1500
    tokenizer: str = "cl100k_base"


def _paragraphs() -> list[str]:
    data = json.loads((dataset_path("squad-v2-dev-cs224n") / "dev-v2.0.shared.json").read_text(encoding="utf-8"))
    return [p["context"] for article in data["data"] for p in article["paragraphs"]]


def make_requests(cfg: OverheadConfig) -> list[list[str]]:
    paras = [p for p in _paragraphs() if len(p.split()) >= cfg.words_per_chunk // 2]
    requests = []
    for r in range(cfg.calls + cfg.warmup_calls):
        chunks = []
        for i in range(cfg.chunks_per_call - 2):
            words = paras[(r * cfg.chunks_per_call + i) % len(paras)].split()[: cfg.words_per_chunk]
            text = " ".join(words)
            if i % 2:
                text = (
                    "<div class='page'><nav><ul><li><a href='/'>Home</a></li><li><a href='/news'>News</a></li>"
                    "<li><a href='/about'>About</a></li></ul></nav><article><h2>Section</h2><p>"
                    + text
                    + "</p></article><footer><p>&copy; 2026 Example Media</p><a href='/privacy'>Privacy</a></footer></div>"
                )
            chunks.append(text)
        chunks += [chunks[0], chunks[2]]  # an exact duplicate and another copy
        requests.append(chunks)
    return requests


def measure(cfg: OverheadConfig) -> dict[str, Any]:
    pipeline = Pipeline(
        [HtmlCleaner(), DuplicateFilter(), TokenBudget(max_tokens=cfg.budget_tokens)], tokenizer=cfg.tokenizer
    )
    requests = make_requests(cfg)
    for chunks in requests[: cfg.warmup_calls]:  # warm-up: imports, caches, tokenizer load
        pipeline.run(chunks, query="warm up")
    per_call_ms: list[float] = []
    per_stage: dict[str, list[float]] = {}
    tokens_before = tokens_after = 0
    for chunks in requests[cfg.warmup_calls:]:
        started = time.perf_counter()
        result = pipeline.run(chunks, query="when was it built")
        per_call_ms.append((time.perf_counter() - started) * 1000)
        tokens_before += result.tokens_before
        tokens_after += result.tokens_after
        for rep in result.trace:
            per_stage.setdefault(rep.stage, []).append(rep.seconds * 1000)
    out: dict[str, Any] = {
        "benchmark": "pipeline_overhead",
        "config": asdict(cfg),
        "pipeline": pipeline.to_dict(),
        **summarize_ms(per_call_ms, "call"),
        "mean_tokens_before": tokens_before / cfg.calls,
        "mean_tokens_after": tokens_after / cfg.calls,
    }
    for stage, values in per_stage.items():
        out.update({f"{k}_{stage}": v for k, v in summarize_ms(values, "stage").items() if k.startswith(("p50", "p99"))})
    return out


def report(result: dict[str, Any]) -> None:
    print(f"pipeline overhead, {result['config']['chunks_per_call']} chunks/call, {result['config']['calls']} calls")
    for key in ("p50_call_ms", "p95_call_ms", "p99_call_ms", "mean_tokens_before", "mean_tokens_after"):
        print(f"  {key:24s} {result[key]:.2f}")
    for key, value in result.items():
        if key.startswith(("p50_stage", "p99_stage")):
            print(f"  {key:24s} {value:.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=OverheadConfig.calls)
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/pipeline/overhead.json")
    args = parser.parse_args(argv)
    result = measure(OverheadConfig(calls=args.calls))
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    report(result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
