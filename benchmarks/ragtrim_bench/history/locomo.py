"""History compression on LoCoMo: tokens, evidence recall and time of ``compress_history`` against "last N turns"
and "full history" at the same token budgets. Writes benchmarks/results/history/locomo.json and locomo_recall.png.

Evaluation points: the end of every session k >= ``min_session``; at a point, the questions asked are those
(category 1-4; adversarial category 5 is skipped) whose evidence turns all lie in sessions <= k. The state is
question-agnostic: it is computed before the question is known. Budgets are fractions of the full history at that
point (ratio r means budget = full tokens / r). Metrics, per (point, question):
  answer recall   - the normalized answer occurs as whole words in the normalized output text (state text + recent
                    turns), normalized as everywhere else (``ragtrim_bench.common.answers``: SQuAD's lower-case,
                    punctuation deleted, no articles); questions whose answer is not in the full history cannot be
                    recalled by any method, so "full history" is the ceiling.
  evidence recall - every evidence turn's key content is retained: all its named-fact words (capitalized names,
                    numbers, dates) and at least half of its content words occur among the output's fact and content
                    words (the same extraction on both sides, each word normalized as answers are).
Run: ``ragtrim-bench history locomo`` (``--quick`` for two conversations).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragtrim.history.fold import compress_history
from ragtrim.history.state import HistoryState, format_turns
from ragtrim.history.summarizers import content_words, named_facts
from ragtrim.models import Message
from ragtrim.text.tokens import TokenCounter, get_counter
from ragtrim_bench.common.answers import normalize_answer
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import mean, summarize_ms
from ragtrim_bench.datasets import dataset_path


@dataclass(frozen=True)
class HistoryBenchConfig:
    ratios: tuple[float, ...] = (2.0, 3.0, 5.0, 8.0, 10.0, 20.0)
    keep_last_turns: int = 4
    min_session: int = 2
    tokenizer: str = "cl100k_base"
    max_conversations: int | None = None
    content_share: float = 0.5
    methods: tuple[str, ...] = field(default=("state", "last_n"))


# -- data ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Conversation:
    name: str
    turns: tuple[Message, ...]
    session_ends: tuple[int, ...]  # number of turns after each session
    questions: tuple[dict[str, Any], ...]


def load_conversations(limit: int | None = None) -> list[Conversation]:
    folder = dataset_path("locomo")
    out = []
    for path in sorted(folder.glob("*.json"))[: limit or None]:
        data = json.loads(path.read_text(encoding="utf-8"))
        turns: list[Message] = []
        ends: list[int] = []
        k = 1
        while f"session_{k}" in data:
            for t in data[f"session_{k}"]:
                turns.append(Message(role=t["speaker"], content=t["text"], turn_id=t["dia_id"]))
            ends.append(len(turns))
            k += 1
        out.append(Conversation(path.stem, tuple(turns), tuple(ends), tuple(data["qa"])))
    return out


def session_of(turn_id: str) -> int:
    m = re.match(r"D(\d+):", turn_id)
    return int(m.group(1)) if m else 10**9


# -- metrics (pure) -----------------------------------------------------------------------------------------------
def answer_present(answer: str, normalized_output: str) -> bool:
    a = normalize_answer(str(answer))
    return bool(a) and f" {a} " in f" {normalized_output} "


def key_words(text: str) -> tuple[set[str], set[str]]:
    """The named-fact words and the content words of ``text``, each normalized as answers are. The same extraction
    runs on a turn and on an output, so a turn the output holds verbatim is always retained (punctuation is deleted,
    so "5-star" is one word "5star" in a whole-text normalisation but "5" and "star" to the fact extractor)."""
    facts = {w for f in named_facts(text) for w in normalize_answer(f).split()}
    words = {normalize_answer(w) for w in content_words(text)} - {""}
    return facts, words


def turn_retained(turn_text: str, output_words: set[str], content_share: float) -> bool:
    """All of the turn's fact words and at least ``content_share`` of its content words are among ``output_words``
    (an output's ``key_words``, together)."""
    facts, words = key_words(turn_text)
    if not facts <= output_words:
        return False
    if not words:
        return True
    return len(words & output_words) >= content_share * len(words)


# -- methods -------------------------------------------------------------------------------------------------------
def last_n_text(turns: Sequence[Message], budget: int, counter: TokenCounter) -> str:
    """As many of the last turns as fit ``budget`` (``role: content`` lines)."""
    used, kept = 0, 0
    for m in reversed(turns):
        cost = counter.count(f"{m.role}: {m.content}") + (1 if kept else 0)
        if used + cost > budget:
            break
        used += cost
        kept += 1
    return format_turns(turns[len(turns) - kept :])


def run(config: HistoryBenchConfig) -> dict[str, Any]:
    counter = get_counter(config.tokenizer)
    conversations = load_conversations(config.max_conversations)
    # warm-up: tokenizer load and regex compilation before anything is timed
    compress_history(list(conversations[0].turns[:20]), keep_last_turns=2, counter=counter)

    hits: dict[tuple[str, float, str], list[int]] = {}
    hits_end: dict[tuple[str, float, str], list[int]] = {}
    tokens_full: list[int] = []
    tokens_out: dict[tuple[str, float], list[int]] = {}
    times_ms: list[float] = []
    scratch_ms: list[float] = []
    n_pairs = 0
    n_pairs_end = 0
    for conv in conversations:
        texts = {m.turn_id: m.content for m in conv.turns}
        states: dict[float, HistoryState | None] = {r: None for r in config.ratios}
        qs = [q for q in conv.questions if q.get("category") != 5 and "answer" in q and q.get("evidence")
              and all(e in texts for e in q["evidence"])]
        for k, end in enumerate(conv.session_ends, start=1):
            if k < config.min_session:
                continue
            history = conv.turns[:end]
            asked = [q for q in qs if max(session_of(e) for e in q["evidence"]) <= k]
            is_end = k == len(conv.session_ends)
            full_text = format_turns(history)
            full_tokens = counter.count(full_text)
            tokens_full.append(full_tokens)
            outputs: dict[tuple[str, float], str] = {("full", 1.0): full_text}
            for r in config.ratios:
                budget = int(full_tokens / r)
                if "last_n" in config.methods:
                    outputs[("last_n", r)] = last_n_text(history, budget, counter)
                if "state" in config.methods:
                    started = time.perf_counter()
                    res = compress_history(history, state=states[r], keep_last_turns=config.keep_last_turns,
                                           max_tokens=budget, counter=counter)
                    times_ms.append((time.perf_counter() - started) * 1000)
                    states[r] = res.state
                    outputs[("state", r)] = res.text
                    if is_end and r == 5.0:
                        started = time.perf_counter()
                        compress_history(history, keep_last_turns=config.keep_last_turns, max_tokens=budget,
                                         counter=counter)
                        scratch_ms.append((time.perf_counter() - started) * 1000)
            n_pairs += len(asked)
            n_pairs_end += len(asked) if is_end else 0
            for (method, r), text in outputs.items():
                tokens_out.setdefault((method, r), []).append(counter.count(text))
                norm = normalize_answer(text)
                words = set().union(*key_words(text))
                for q in asked:
                    a = int(answer_present(str(q["answer"]), norm))
                    e = int(all(turn_retained(texts[x], words, config.content_share) for x in q["evidence"]))
                    for store, use in ((hits, True), (hits_end, is_end)):
                        if use:
                            store.setdefault((method, r, "answer"), []).append(a)
                            store.setdefault((method, r, "evidence"), []).append(e)

    result: dict[str, Any] = {"config_" + k: (list(v) if isinstance(v, tuple) else v)
                              for k, v in asdict(config).items()}
    result.update(
        conversations=len(conversations),
        question_points=n_pairs,
        question_points_end=n_pairs_end,
        mean_full_history_tokens=mean(tokens_full),
        tokenizer_name=counter.name,
    )
    for (method, r, metric), values in sorted(hits.items()):
        tag = "full" if method == "full" else f"{method}_{r:g}x"
        result[f"{metric}_recall_{tag}"] = mean(values)
        result[f"{metric}_recall_end_{tag}"] = mean(hits_end.get((method, r, metric), []))
    for (method, r), values in sorted(tokens_out.items()):
        tag = "full" if method == "full" else f"{method}_{r:g}x"
        result[f"mean_tokens_{tag}"] = mean(values)
        result[f"mean_ratio_{tag}"] = mean([f / max(1, v) for f, v in zip(tokens_full, values, strict=True)])
    result.update(summarize_ms(times_ms, "compress_incremental"))
    result.update(summarize_ms(scratch_ms, "compress_from_scratch_end"))
    return result


def plot(result: dict[str, Any], config: HistoryBenchConfig, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric in zip(axes, ("answer", "evidence"), strict=True):
        for method, label in (("state", "state + last turns (ours)"), ("last_n", "last N turns")):
            ys = [result.get(f"{metric}_recall_{method}_{r:g}x", math.nan) for r in config.ratios]
            ax.plot(config.ratios, ys, marker="o", label=label)
        ax.axhline(result[f"{metric}_recall_full"], color="grey", linestyle="--", label="full history (1x)")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(list(config.ratios), [f"{r:g}x" for r in config.ratios])
        ax.set_xlabel("compression (full history tokens / budget)")
        ax.set_ylabel(f"{metric} recall")
        ax.set_title(f"LoCoMo: {metric} recall vs budget")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def report(result: dict[str, Any], config: HistoryBenchConfig) -> None:
    print(f"LoCoMo history compression: {result['conversations']} conversations, "
          f"{result['question_points']} (point, question) pairs, mean full history "
          f"{result['mean_full_history_tokens']:.0f} tokens ({result['tokenizer_name']})")
    print(f"{'budget':>8} {'method':>8} {'tokens':>8} {'ratio':>6} {'ans':>6} {'ans_end':>7} {'evid':>6} "
          f"{'evid_end':>8}")
    rows = [("full", "1x")] + [(m, f"{r:g}x") for r in config.ratios for m in ("state", "last_n")]
    for method, tag in rows:
        key = "full" if method == "full" else f"{method}_{tag}"
        if f"answer_recall_{key}" not in result:
            continue
        print(f"{tag:>8} {method:>8} {result[f'mean_tokens_{key}']:8.0f} {result[f'mean_ratio_{key}']:6.2f} "
              f"{result[f'answer_recall_{key}']:6.3f} {result[f'answer_recall_end_{key}']:7.3f} "
              f"{result[f'evidence_recall_{key}']:6.3f} {result[f'evidence_recall_end_{key}']:8.3f}")
    for r in config.ratios:
        s, b = result.get(f"answer_recall_state_{r:g}x"), result.get(f"answer_recall_last_n_{r:g}x")
        if s is not None and b:
            print(f"{r:g}x: answer recall ours / last-N = {s / b:.2f}; evidence recall ours / last-N = "
                  f"{result[f'evidence_recall_state_{r:g}x'] / max(1e-9, result[f'evidence_recall_last_n_{r:g}x']):.2f}")
    print(f"compression time (incremental call): median {result['p50_compress_incremental_ms']:.1f} ms, "
          f"p95 {result['p95_compress_incremental_ms']:.1f} ms; from scratch at conversation end: median "
          f"{result['p50_compress_from_scratch_end_ms']:.1f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two conversations only")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from the saved JSON")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="default: results/history/locomo.json (the plot beside it, *_recall.png)")
    args = parser.parse_args(argv)
    config = HistoryBenchConfig(max_conversations=2 if args.quick else None)
    out = args.output or result_path(__spec__.name)
    png = out.with_name(f"{out.stem}_recall.png")
    if args.plot_only:
        saved = json.loads(out.read_text(encoding="utf-8"))
        plot(saved, config, png)
        report(saved, config)
        return 0
    result = run(config)
    write_result(out, result, command=command_line(__spec__.name, argv))
    plot(result, config, png)
    report(result, config)
    print(f"wrote {out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
