"""Dev-only: which trimmed arm does a tiny reader (Gemma 3 270M, real weights) answer best from? (not a benchmark)

Runs the 270M model with transformers on CPU (greedy, stop at newline, the GPU harness's decoding and scoring) on
NQ 20-document sets with hard BM25 distractors, gold in the middle, for questions DISJOINT from the GPU golden set
(the golden set is the first 320 questions; the default here is questions 400-549). Each variant is a way to build
the trimmed prompt; prints accuracy, answer-in-prompt rate and prompt tokens per variant and writes JSON.

Run: HF_HUB_OFFLINE=1 ragtrim-bench tuning reader_arms --variants oracle,default_r4,top1
     (--distractors random: random distractors instead of hard ones, the easier setting)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tqdm import tqdm

from ragtrim.text.tokens import HFTokenizerCounter, TokenCounter
from ragtrim_bench.common.answers import answer_in_text, best_subspan_em
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.datasets.nq import QAInstance, build_multidoc, load_nq_open
from ragtrim_bench.gpu.prompts import arm_documents, format_prompt
from ragtrim_bench.models.gemma import build_tokenizer, find_gguf, local_reader_dir


class Reader:
    """Batched greedy decoding with the transformers model on CPU; answer = generated text up to the first newline."""

    def __init__(self, model_dir: Path, threads: int, batch: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(threads)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(str(model_dir))
        self.tok.padding_side = "left"
        model: Any = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.model = model.eval()
        self.batch = batch

    def answer(self, prompts: Sequence[str], max_tokens: int = 32) -> list[str]:
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        out: list[str] = [""] * len(prompts)
        for start in tqdm(range(0, len(order), self.batch), desc="generate", file=sys.stderr, leave=False):
            idx = order[start:start + self.batch]
            enc = self.tok([prompts[i] for i in idx], return_tensors="pt", padding=True)
            with self.torch.no_grad():
                gen = self.model.generate(**enc, max_new_tokens=max_tokens, do_sample=False, stop_strings=["\n"],
                                          tokenizer=self.tok, pad_token_id=self.tok.pad_token_id)
            for j, i in enumerate(idx):
                text = str(self.tok.decode(gen[j, enc.input_ids.shape[1]:], skip_special_tokens=True))
                out[i] = text.split("\n")[0]
        return out


def variants(counter: TokenCounter) -> dict[str, Callable[[QAInstance], list[str]]]:
    """Name -> documents for one instance. ``default_rN``: ragtrim's default pipeline, budget bisected so the prompt
    has at most 1/N of the untrimmed prompt's reader tokens, best first; ``..._last``: same documents, best last."""
    out: dict[str, Callable[[QAInstance], list[str]]] = {
        "oracle": lambda inst: [p.content for p in inst.passages if p.is_gold],
        "untrimmed": lambda inst: [p.content for p in inst.passages],
    }
    def arm(name: str, ratio: float | None, last: bool) -> Callable[[QAInstance], list[str]]:
        def documents(inst: QAInstance) -> list[str]:
            docs = arm_documents(inst, name, ratio, counter)
            return docs[::-1] if last else docs
        return documents

    for name in ("default", "top1", "top2", "top3", "minilm_sent", "top1_sent"):
        for r in (4, 8, 16, 32):
            out[f"{name}_r{r}"] = arm(name, float(r), False)
            out[f"{name}_r{r}_last"] = arm(name, float(r), True)
        out[name] = arm(name, None, False)
        out[f"{name}_last"] = arm(name, None, True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--offset", type=int, default=400)
    ap.add_argument("--limit", type=int, default=150)
    ap.add_argument("--variants", default="oracle,default_r4,default_r8,default_r16")
    ap.add_argument("--distractors", choices=["bm25", "random"], default="bm25",
                    help="hard BM25 distractors (the GPU golden set's) or random ones (the easier setting)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("-o", "--output", type=Path, default=None, help="default: results/tuning/reader_arms.json")
    args = ap.parse_args(argv)
    out = args.output or result_path(__spec__.name)
    if args.offset < 320:
        raise SystemExit("--offset must be >= 320: the first 320 questions are the GPU golden set")
    model_dir = local_reader_dir()
    counter = HFTokenizerCounter(tokenizer=build_tokenizer(find_gguf()), label="gemma-3-270m")
    pool = load_nq_open()
    instances = build_multidoc(pool[args.offset: args.offset + args.limit], n_docs=20, gold_position="middle",
                               distractors=args.distractors, pool=pool)
    reader = Reader(model_dir, args.threads, args.batch)
    table = variants(counter)
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    for key in ("command", "host"):  # recorded again for this run
        results.pop(key, None)
    for name in args.variants.split(","):
        if name not in table:
            raise SystemExit(f"unknown variant {name!r}; known: {', '.join(table)}")
        t0 = time.perf_counter()
        docs = [table[name](inst) for inst in tqdm(instances, desc=f"{name} prompts", file=sys.stderr, leave=False)]
        prompts = [format_prompt(inst.question, d) for inst, d in zip(instances, docs)]
        full = [counter.count(format_prompt(inst.question, [p.content for p in inst.passages])) for inst in instances]
        preds = reader.answer(prompts)
        n = len(instances)
        tokens = [counter.count(p) for p in prompts]
        row = {
            "questions": n, "offset": args.offset, "distractors": args.distractors,
            "accuracy": sum(best_subspan_em(p, inst.answers) for p, inst in zip(preds, instances)) / n,
            "answer_in_prompt_rate": sum(answer_in_text(inst.answers, "\n".join(d))
                                         for inst, d in zip(instances, docs)) / n,
            "mean_prompt_tokens": sum(tokens) / n,
            "prompt_token_ratio": sum(full) / max(1, sum(tokens)),
            "seconds": time.perf_counter() - t0,
        }
        suffix = "" if args.distractors == "bm25" else f"/{args.distractors}"  # keys of earlier runs stay valid
        results[f"{name}@{args.offset}+{n}{suffix}"] = row
        print(f"{name:24s} acc {row['accuracy']:.3f}  in-prompt {row['answer_in_prompt_rate']:.3f}  "
              f"tokens {row['mean_prompt_tokens']:.0f}  ratio {row['prompt_token_ratio']:.1f}x  "
              f"({row['seconds']:.0f}s)", flush=True)
        write_result(out, results, command=command_line(__spec__.name, argv), packages=["transformers", "torch"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
