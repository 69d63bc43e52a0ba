"""Build the GPU arms' prompts on the CPU (the GPU machine needs only vLLM and this JSONL).

NQ: the first N questions of ../shared/data/nq-multidoc, 20 documents with hard BM25 distractors, gold in the
middle; arms untrimmed / trimmed_4x / trimmed_8x (ragtrim's default pipeline) / oracle. SQuAD: a fixed sample of
answerable and unanswerable questions with all paragraphs of their article, arms untrimmed / trimmed_4x, with an
instruction to answer "unanswerable". Prompt tokens are counted with the Gemma 3 tokenizer rebuilt from the GGUF.
Writes .gpu/prompts/*.jsonl (git-ignored: derived from shared data) and benchmarks/results/gpu/prompts_summary.json.
Run: .venv/bin/python benchmarks/gpu/make_prompts.py --questions 400
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ragtrim.api import default_pipeline  # noqa: E402
from ragtrim.bench.gpu.prompts import REFUSAL_INSTRUCTION, ArmPrompt, build_arm_prompts  # noqa: E402
from ragtrim.bench.model_prep import build_tokenizer, find_gguf  # noqa: E402
from ragtrim.bench.stats import mean  # noqa: E402
from ragtrim.datasets.nq import build_multidoc, load_nq_open  # noqa: E402
from ragtrim.datasets.squad import load_squad, squad_instances  # noqa: E402
from ragtrim.tokens import HFTokenizerCounter  # noqa: E402


def summarize(rows: list[ArmPrompt]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for arm in dict.fromkeys(r.arm for r in rows):
        sel = [r for r in rows if r.arm == arm]
        out[arm] = {
            "questions": len(sel),
            "mean_prompt_tokens": mean([r.prompt_tokens for r in sel]),
            "answer_in_prompt_rate": mean([float(r.answer_in_prompt) for r in sel if not r.is_impossible]),
        }
    base = out.get("untrimmed", {}).get("mean_prompt_tokens")
    for arm, s in out.items():
        s["prompt_token_ratio"] = base / s["mean_prompt_tokens"] if base else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--squad", type=int, default=100, help="answerable and unanswerable questions each")
    parser.add_argument("--out", type=Path, default=REPO / ".gpu" / "prompts")
    parser.add_argument("--fit", choices=["shrink", "bisect"], default="shrink",
                        help="how trimmed arms meet their ratio (the committed H200 run used shrink)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    counter = HFTokenizerCounter(tokenizer=build_tokenizer(find_gguf()), label="gemma-3-270m")

    def pipeline_for(budget: int):  # type: ignore[no-untyped-def]
        return default_pipeline(budget=budget)

    pool = load_nq_open()
    instances = build_multidoc(pool[: args.questions], n_docs=20, gold_position="middle", distractors="bm25",
                               pool=pool)
    nq_rows = build_arm_prompts(tqdm(instances, desc="nq arms", file=sys.stderr), reader_counter=counter,
                                pipeline_for_budget=pipeline_for, ratios=(4.0, 8.0), fit=args.fit)
    (args.out / "nq20_middle.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in nq_rows))

    squad = squad_instances(load_squad())
    answerable = [q for q in squad if not q.is_impossible][: args.squad]
    impossible = [q for q in squad if q.is_impossible][: args.squad]
    squad_rows = build_arm_prompts(tqdm(answerable + impossible, desc="squad arms", file=sys.stderr),
                                   reader_counter=counter, pipeline_for_budget=pipeline_for, ratios=(4.0,),
                                   instruction=REFUSAL_INSTRUCTION, fit=args.fit)
    (args.out / "squad.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in squad_rows))

    summary = {"reader_tokenizer": counter.name, "pipeline": default_pipeline(budget=1000).to_dict(),
               "nq20_middle": summarize(nq_rows), "squad": summarize(squad_rows)}
    dest = REPO / "benchmarks" / "results" / "gpu" / "prompts_summary.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
