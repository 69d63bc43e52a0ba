"""Where each lost answer went: for one recipe on the quality matrix's requests, the stage and reason behind every
answer that did not survive a trim, with the gold chunk's rank under the recipe's chunk scores.

  ragtrim-bench relevance losses [--columns tatqa,cuad] [--split dev] [--limit 150] [--scorer auto|module:function]
                                 [--ratios 4,8,16] [--output PATH] [--no-progress]

Each lost answer gets one cause, read from the trim's trace:

- ``ranked out``: the gold chunk left at the relevance stage (``below_top_k`` / ``low_relevance``);
- ``compressed out``: sentence compression dropped every sentence of the gold chunk;
- ``budget dropped``: the gold chunk reached the budget stage and was dropped there;
- ``answer cut``: the gold chunk stayed, shortened, without the answer's sentence;
- ``other``: the gold chunk stayed whole (a duplicate kept elsewhere, or the answer spans chunks).

The default keeps every chunk past the relevance stage (it ranks, the budget cuts), so a gold ranked low shows as
``compressed out``: the gold's rank tells a ranking loss (rank far down) from a packing one (among the top 3).

Development requests only by default: this is the tool for finding what to fix, and held-out records stay out of it.
The result JSON (``benchmarks/results/relevance/losses.json`` by default) has every lost request with its question,
its cause, the gold's rank, the removal record's detail and the share of the question's content words the gold holds
(``question_words_in_gold``: 0 for a question that names nothing of its gold, which no lexical ranker can place),
and a count by column, ratio and cause.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim.errors import ConfigError
from ragtrim.stages.compress import SentenceCompressor
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.relevance.columns import COLUMNS, Request, build_column
from ragtrim_bench.relevance.matrix import answer_kept, budget_for, context_tokens, trim_input

CAUSES = ("ranked out", "compressed out", "budget dropped", "answer cut", "other")


def gold_rank(scorer: Any, request: Request) -> int:
    """1-based rank of the gold passage under ``scorer``'s scores of the whole request (ties: earlier first)."""
    scores = [float(s) for s in scorer.score(request.question, list(request.passages))]
    gold = scores[request.gold_index]
    return 1 + sum(1 for i, s in enumerate(scores) if s > gold or (s == gold and i < request.gold_index))


def question_words_in_gold(question: str, gold: str) -> float:
    """The share of the question's content words (BM25's tokens, stopwords out, stemmed) that the gold chunk holds:
    0.0 for a question that names nothing of its gold ("What does the table show?" against "Loans payable are
    summarized as follows:"), which no lexical ranker can place first and any other chunk can answer as well."""
    from ragtrim.scoring.bm25 import tokenize

    words = set(tokenize(question, stem=True))
    return len(words & set(tokenize(gold, stem=True))) / len(words) if words else 0.0


def classify(result: Any, gold_id: str) -> tuple[str, str]:
    """The cause of a lost answer and the removal detail behind it (see the module docstring)."""
    for removal in result.removals:
        if removal.chunk_id != gold_id:
            continue
        if removal.reason in ("below_top_k", "low_relevance"):
            return "ranked out", removal.detail
        if removal.action == "dropped" and removal.stage == SentenceCompressor.name:
            return "compressed out", removal.detail
        if removal.action == "dropped":
            return "budget dropped", f"{removal.stage}: {removal.detail}"
    if any(c.id == gold_id for c in result.chunks):
        shortened = [r for r in result.removals if r.chunk_id == gold_id and r.action == "shortened"]
        if shortened:
            return "answer cut", "; ".join(f"{r.stage}: {r.detail}" for r in shortened)[:300]
    return "other", ""


def resolve_scorer(name: str) -> tuple[Any, Any]:
    """The scorer ``name`` stands for (``auto``, a registered name, or ``module:function`` returning a Scorer, as a
    tuning row's recipe) and what to hand ``trim(scorer=...)``: the name where there is one, else the object."""
    if ":" in name:
        module, _, function = name.partition(":")
        scorer = getattr(importlib.import_module(module), function)()
        return scorer, scorer
    from ragtrim.scoring.auto import choose
    from ragtrim.scoring.registry import get_scorer

    return get_scorer(choose().scorer if name == "auto" else name), name


def run(columns: Sequence[str], split: str, limit: int, scorer_name: str, ratios: Sequence[int],
        progress: bool) -> dict[str, Any]:
    from ragtrim import get_counter, trim

    counter = get_counter(None)
    scorer, passed = resolve_scorer(scorer_name)
    lost: list[dict[str, Any]] = []
    totals: dict[str, int] = {}
    ranks: dict[str, list[int]] = {}
    requests = {c: build_column(c, split, limit=limit) for c in columns}  # type: ignore[arg-type]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(len(r) for r in requests.values()), desc="losses", unit="request")
    for column, reqs in requests.items():
        totals[column] = len(reqs)
        ranks[column] = []
        for request in reqs:
            rank = gold_rank(scorer, request)
            ranks[column].append(rank)
            chunks = trim_input(request, with_scores=False)
            tokens = context_tokens(request, counter)
            for ratio in ratios:
                result = trim(chunks, query=request.question, budget=budget_for(tokens, ratio),
                              scorer=passed)
                if answer_kept(request.answers, result.text):
                    continue
                cause, detail = classify(result, f"p{request.gold_index}")
                lost.append({"column": column, "ratio": ratio, "request_id": request.id, "question": request.question,
                             "cause": cause, "gold_rank": rank, "detail": detail,
                             "question_words_in_gold": round(question_words_in_gold(
                                 request.question, str(request.passages[request.gold_index])), 3)})
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for column in columns:
        counts[column] = {}
        for ratio in ratios:
            here = [x for x in lost if x["column"] == column and x["ratio"] == ratio]
            c = Counter(x["cause"] for x in here)
            counts[column][f"{ratio}x"] = ({cause: c.get(cause, 0) for cause in CAUSES}
                                           | {"gold_in_top_3": sum(1 for x in here if x["gold_rank"] <= 3),
                                              "no_question_word_in_gold": sum(
                                                  1 for x in here if x["question_words_in_gold"] == 0),
                                              "requests": totals[column]})
    rank_summary = {c: {"median": statistics.median(r), "top1": sum(x == 1 for x in r) / len(r),
                        "top3": sum(x <= 3 for x in r) / len(r), "top5": sum(x <= 5 for x in r) / len(r)}
                    for c, r in ranks.items() if r}
    return {"benchmark": "relevance losses", "config": {"columns": list(columns), "split": split, "limit": limit,
                                                         "scorer": scorer_name, "resolved": scorer.name,
                                                         "ratios": list(ratios)},
            "counts": counts, "gold_rank": rank_summary, "lost": lost}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragtrim-bench relevance losses", description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", default="tatqa,cuad", help=f"comma-separated subset of {list(COLUMNS)}")
    parser.add_argument("--split", choices=("dev", "heldout"), default="dev")
    parser.add_argument("--limit", type=int, default=150, help="requests per column (the matrix's seeded sample)")
    parser.add_argument("--scorer", default="auto",
                        help="a scorer name, or module:function returning a Scorer "
                             "(e.g. ragtrim_bench.tuning.cpu_recipes:distilled3_scorer)")
    parser.add_argument("--ratios", default="4,8,16")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/relevance/losses.json")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ConfigError(f"unknown columns {unknown}; choose from {list(COLUMNS)}")
    ratios = [int(r) for r in args.ratios.split(",")]
    result = run(columns, args.split, args.limit, args.scorer, ratios, not args.no_progress)
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv))
    for column, by_ratio in result["counts"].items():
        for ratio, c in by_ratio.items():
            shown = ", ".join(f"{k} {c[k]}" for k in CAUSES if c[k])
            print(f"{column:10s} {ratio:>4s}: lost {sum(c[k] for k in CAUSES)} of {c['requests']} "
                  f"({shown or 'none'}; the gold among the top 3 chunks in {c['gold_in_top_3']}; "
                  f"no question word in the gold in {c['no_question_word_in_gold']})")
        print(f"{column:10s} gold rank: {result['gold_rank'].get(column)}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
