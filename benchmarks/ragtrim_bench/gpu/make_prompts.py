"""Build the GPU arms' prompts on the CPU (the GPU machine needs only vLLM and this JSONL).

NQ golden set: the first N questions of ../shared/data/nq-multidoc, 20 documents with hard BM25 distractors, gold
in the middle; arms untrimmed / trimmed_4x / trimmed_8x (ragtrim's default pipeline, budget bisected to the ratio) /
candidate arms (other recipes, ``cand_*``) / oracle. NQ dev set: questions from --dev-offset (disjoint from the
golden set), same arms without trimmed_8x: the GPU run picks the candidate arm with the best dev accuracy among
those with >= 4x fewer tokens (gpu report), and the golden set reports it. Length sweep: golden
untrimmed prompts cut to fixed token counts (arms ``len_<N>``) for TTFT vs prompt length. SQuAD: a fixed sample of
answerable and unanswerable questions with all paragraphs of their article, arms untrimmed / trimmed_4x, with an
instruction to answer "unanswerable". Prompt tokens are counted with the Gemma 3 tokenizer rebuilt from the GGUF.
Writes .gpu/prompts/*.jsonl (git-ignored: derived from shared data) and benchmarks/results/gpu/prompts_summary.json.
Run from the repository root: HF_HUB_OFFLINE=1 ragtrim-bench gpu make_prompts --fit bisect --workers 2
Extra candidate arms only (e.g. the reader-reranked top passage), written beside the main files:
     HF_HUB_OFFLINE=1 ragtrim-bench gpu make_prompts --candidates top1,top1_qlm --only-candidates qlm
The easier setting (random distractors) on the same questions, with the default pipeline's 4x arm:
     HF_HUB_OFFLINE=1 ragtrim-bench gpu make_prompts --distractors random --only-candidates random \
         --candidates top1,top2 --trim-ratios 4
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ragtrim.text.tokens import HFTokenizerCounter
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import mean
from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open
from ragtrim_bench.datasets.squad import load_squad, squad_instances
from ragtrim_bench.gpu.prompts import (
    INSTRUCTION,
    REFUSAL_INSTRUCTION,
    TRIM_RECIPES,
    ArmPrompt,
    arm_documents,
    build_arm_prompts,
    cut_to_tokens,
    recipe_pipeline,
)
from ragtrim_bench.gpu.worker import load_prompts
from ragtrim_bench.models.gemma import build_tokenizer, find_gguf, local_reader_dir


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


def candidate_arms(spec: str) -> dict[str, tuple[str, float | None]]:
    """``"top1,default@16"`` -> {"cand_top1": ("top1", None), "cand_default_16x": ("default", 16.0)}."""
    out: dict[str, tuple[str, float | None]] = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        recipe, _, r = item.partition("@")
        if recipe not in TRIM_RECIPES:
            raise SystemExit(f"unknown recipe {recipe!r} in --candidates; known: {', '.join(TRIM_RECIPES)}")
        ratio = float(r) if r else None
        out[f"cand_{recipe}" + (f"_{ratio:g}x" if ratio else "")] = (recipe, ratio)
    return out


_COUNTER: HFTokenizerCounter | None = None


def _counter() -> HFTokenizerCounter:
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = HFTokenizerCounter(tokenizer=build_tokenizer(find_gguf()), label="gemma-3-270m")
    return _COUNTER


def _build(job: tuple[list[Any], tuple[float, ...], dict[str, tuple[str, float | None]], str, str, str | None]
           ) -> list[ArmPrompt]:
    """Arm prompts for one slice of instances (runs in a worker process; MiniLM loads once per process)."""
    instances, ratios, cands, instruction, fit, reader_model = job
    counter = _counter()
    extra = {name: (lambda inst, rc=rc, r=r: arm_documents(inst, rc, r, counter, instruction=instruction,
                                                           reader_model=reader_model))
             for name, (rc, r) in cands.items()}
    return build_arm_prompts(instances, reader_counter=counter,
                             pipeline_for_budget=lambda b: recipe_pipeline("default", b), ratios=ratios,
                             instruction=instruction, fit=fit, extra_arms=extra)  # type: ignore[arg-type]


def build_parallel(instances: Sequence[Any], *, workers: int, desc: str, **kw: Any) -> list[ArmPrompt]:
    slices = [list(instances[i: i + 8]) for i in range(0, len(instances), 8)]
    jobs = [(sl, kw["ratios"], kw.get("cands", {}), kw.get("instruction", INSTRUCTION), kw["fit"],
             kw.get("reader_model")) for sl in slices]
    rows: list[ArmPrompt] = []
    if workers <= 1:
        for job in tqdm(jobs, desc=desc, file=sys.stderr):
            rows += _build(job)
        return rows
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for part in tqdm(pool.map(_build, jobs), total=len(jobs), desc=desc, file=sys.stderr):
            rows += part
    return rows


def sweep_rows(golden: Sequence[ArmPrompt], instances: Sequence[Any], lengths: Sequence[int], per_length: int,
               counter: HFTokenizerCounter) -> list[ArmPrompt]:
    """``len_<N>`` rows: untrimmed golden prompts at least N tokens long, cut to N tokens."""
    by_id = {inst.id: inst for inst in instances}
    out: list[ArmPrompt] = []
    for n in lengths:
        long_enough = [r for r in golden if r.arm == "untrimmed" and r.prompt_tokens >= n][:per_length]
        for r in long_enough:
            inst = by_id[r.id]
            prompt = cut_to_tokens(inst.question, [p.content for p in inst.passages], n, counter)
            out.append(ArmPrompt(id=r.id, arm=f"len_{n}", question=r.question, answers=r.answers, prompt=prompt,
                                 prompt_tokens=counter.count(prompt), answer_in_prompt=False))
    return out


def write_jsonl(path: Path, rows: Sequence[ArmPrompt]) -> None:
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=320, help="golden set: the first N NQ questions")
    parser.add_argument("--dev-offset", type=int, default=400)
    parser.add_argument("--dev-questions", type=int, default=200)
    parser.add_argument("--candidates", default="top1,top2,default@16,default_whole@12,minilm_sent@16",
                        help="candidate arms, recipe[@ratio], comma-separated")
    parser.add_argument("--squad", type=int, default=100,
                        help="answerable and unanswerable questions each; 0 keeps the existing squad.jsonl")
    parser.add_argument("--sweep-lengths", default="64,128,192,256,384,512,640,768,1024,1536,2048")
    parser.add_argument("--sweep-per-length", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(".gpu") / "prompts",
                        help="the prompt files' folder (default: .gpu/prompts in the working directory)")
    parser.add_argument("--fit", choices=["shrink", "bisect"], default="bisect",
                        help="how trimmed arms meet their ratio (the first H200 run used shrink)")
    parser.add_argument("--reader-model", type=Path, default=None,
                        help="the reader as a transformers directory, for *_qlm recipes (default: "
                             "$RAGTRIM_CPU_MODEL_DIR or ~/.cache/ragtrim-gemma-270m-hf, written from the GGUF if missing)")
    parser.add_argument("--only-candidates", default=None, metavar="SUFFIX",
                        help="write only the --candidates arms (with untrimmed and oracle) for the golden and dev "
                             "sets, to nq20_middle_SUFFIX.jsonl and nq20_middle_SUFFIX_dev.jsonl")
    parser.add_argument("--distractors", choices=["bm25", "random"], default="bm25",
                        help="hard BM25 distractors (the golden set's) or random ones (the easier setting); "
                             "random needs --only-candidates")
    parser.add_argument("--trim-ratios", default="",
                        help="with --only-candidates: also the default pipeline's trimmed_<R>x arms, e.g. 4")
    args = parser.parse_args(argv)
    command = command_line(__spec__.name, argv)
    if args.distractors != "bm25" and not args.only_candidates:
        raise SystemExit("--distractors random writes its own files: give --only-candidates SUFFIX")
    if args.dev_offset < args.questions:
        raise SystemExit("--dev-offset must be >= --questions: the dev set must not overlap the golden set")
    args.out.mkdir(parents=True, exist_ok=True)
    counter = _counter()
    cands = candidate_arms(args.candidates)
    reader_model = None
    if any(rc.endswith("_qlm") for rc, _ in cands.values()):
        reader_model = str(args.reader_model or local_reader_dir())

    pool = load_nq_open()
    golden = build_multidoc(pool[: args.questions], n_docs=20, gold_position="middle", distractors=args.distractors,
                            pool=pool)
    dev = build_multidoc(pool[args.dev_offset: args.dev_offset + args.dev_questions], n_docs=20,
                         gold_position="middle", distractors=args.distractors, pool=pool)
    if args.only_candidates:
        sets = {}
        for name, insts in ((f"nq20_middle_{args.only_candidates}", golden),
                            (f"nq20_middle_{args.only_candidates}_dev", dev)):
            rows = build_parallel(insts, workers=args.workers, desc=name, cands=cands, fit=args.fit,
                                  ratios=tuple(float(r) for r in args.trim_ratios.split(",") if r),
                                  reader_model=reader_model)
            write_jsonl(args.out / f"{name}.jsonl", rows)
            sets[name] = summarize(rows)
        summary = {"reader_tokenizer": counter.name, "distractors": args.distractors,
                   "golden_questions": [0, args.questions],
                   "dev_questions": [args.dev_offset, args.dev_offset + args.dev_questions],
                   "candidates": {k: {"recipe": rc, "ratio": r} for k, (rc, r) in cands.items()}, **sets}
        write_result(result_path(__spec__.name).with_name(f"prompts_summary_{args.only_candidates}.json"), summary,
                     command=command, packages=["tokenizers"])
        print(json.dumps(summary, indent=1))
        return 0
    nq_rows = build_parallel(golden, workers=args.workers, desc="nq golden arms", ratios=(4.0, 8.0), cands=cands,
                             fit=args.fit)
    write_jsonl(args.out / "nq20_middle.jsonl", nq_rows)
    dev_rows = build_parallel(dev, workers=args.workers, desc="nq dev arms", ratios=(4.0,), cands=cands, fit=args.fit)
    write_jsonl(args.out / "nq20_middle_dev.jsonl", dev_rows)
    lengths = [int(x) for x in args.sweep_lengths.split(",") if x]
    sweep = sweep_rows(nq_rows, golden, lengths, args.sweep_per_length, counter)
    write_jsonl(args.out / "nq20_sweep.jsonl", sweep)

    if args.squad:
        squad = squad_instances(load_squad())
        answerable = [q for q in squad if not q.is_impossible][: args.squad]
        impossible = [q for q in squad if q.is_impossible][: args.squad]
        squad_rows = build_parallel(answerable + impossible, workers=args.workers, desc="squad arms", ratios=(4.0,),
                                    instruction=REFUSAL_INSTRUCTION, fit=args.fit)
        write_jsonl(args.out / "squad.jsonl", squad_rows)
    else:  # --squad 0 keeps the existing file (summarized below, so the summary matches what the GPU reads)
        squad_rows = [ArmPrompt(**(d | {"answers": tuple(d["answers"])}))
                      for d in load_prompts(str(args.out / "squad.jsonl"))]

    summary = {"reader_tokenizer": counter.name, "fit": args.fit, "golden_questions": [0, args.questions],
               "dev_questions": [args.dev_offset, args.dev_offset + args.dev_questions],
               "candidates": {k: {"recipe": rc, "ratio": r} for k, (rc, r) in cands.items()},
               "pipeline": recipe_pipeline("default", 1000).to_dict(),
               "nq20_middle": summarize(nq_rows), "nq20_middle_dev": summarize(dev_rows),
               "nq20_sweep": summarize(sweep), "squad": summarize(squad_rows)}
    write_result(result_path(__spec__.name).with_name("prompts_summary.json"), summary, command=command,
                 packages=["tokenizers"])
    print(json.dumps({k: v for k, v in summary.items() if k != "pipeline"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
