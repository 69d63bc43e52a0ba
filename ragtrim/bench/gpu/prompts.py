"""The arms' prompts: the same questions sent untrimmed, trimmed by a ragtrim pipeline at chosen ratios, and oracle
(gold passage only). Built on the CPU; the GPU worker only reads the resulting JSONL.

The template is the "Lost in the Middle" QA prompt; documents are numbered in the order the arm keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ragtrim.datasets.nq import QAInstance
from ragtrim.pipeline import Pipeline
from ragtrim.tokens import TokenCounter

INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant)."
)
REFUSAL_INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results. "
    "If the search results do not contain the answer, answer \"unanswerable\"."
)


def format_prompt(question: str, documents: Sequence[str], *, instruction: str = INSTRUCTION) -> str:
    docs = "\n".join(f"Document [{i}] {d.strip()}" for i, d in enumerate(documents, 1))
    return f"{instruction}\n\n{docs}\n\nQuestion: {question}\nAnswer:"


@dataclass(frozen=True)
class ArmPrompt:
    """One request of one arm: the prompt and what is needed to score the answer."""

    id: str
    arm: str
    question: str
    answers: tuple[str, ...]
    prompt: str
    prompt_tokens: int
    """Counted with the reader's tokenizer (the counter passed to ``build_arm_prompts``)."""
    budget_tokens: int | None = None
    is_impossible: bool = False
    answer_in_prompt: bool = True

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["answers"] = list(self.answers)
        return d


def build_arm_prompts(
    instances: Iterable[QAInstance],
    *,
    reader_counter: TokenCounter,
    pipeline_for_budget: Callable[[int], Pipeline],
    ratios: Sequence[float] = (4.0, 8.0),
    instruction: str = INSTRUCTION,
    max_refits: int = 4,
    fit: Literal["shrink", "bisect"] = "shrink",
) -> list[ArmPrompt]:
    """Prompts for arms ``untrimmed``, ``trimmed_<r>x`` for each ratio, and ``oracle``.

    A trimmed arm must have at most ``1/r`` of the untrimmed prompt's reader tokens (instruction, question and
    document labels included). Its pipeline budget (in the pipeline's own tokens) starts at the chunks' share of
    that target and is lowered proportionally, at most ``max_refits`` times, until the prompt fits (``fit="shrink"``,
    the committed H200 run; it overshoots, e.g. 4.8x for a 4x arm), or is the largest budget whose prompt fits, found
    by bisection in ``3 * max_refits`` runs (``fit="bisect"``). The arm records the budget it ended with.
    """
    from ragtrim.qa_metrics import answer_in_text

    out: list[ArmPrompt] = []
    for inst in instances:
        docs = [p.content for p in inst.passages]
        full = format_prompt(inst.question, docs, instruction=instruction)
        full_tokens = reader_counter.count(full)
        def arm_prompt(arm: str, prompt: str, n: int, answer_in: bool, budget: int | None = None) -> ArmPrompt:
            return ArmPrompt(id=inst.id, arm=arm, question=inst.question, answers=inst.answers, prompt=prompt,
                             prompt_tokens=n, budget_tokens=budget, is_impossible=inst.is_impossible,
                             answer_in_prompt=answer_in)

        out.append(arm_prompt("untrimmed", full, full_tokens, answer_in_text(inst.answers, "\n".join(docs))))
        chunks = [{"id": p.id, "text": p.content} for p in inst.passages]
        for r in ratios:
            target = int(full_tokens / r)
            probe = pipeline_for_budget(10**9)
            chunk_tokens = probe.run(chunks, query=inst.question).tokens_before
            budget = max(1, int(chunk_tokens / r) - (full_tokens - reader_counter.count("\n".join(docs))))
            if fit == "bisect":
                budget = _largest_fitting_budget(chunk_tokens, target, 3 * max_refits,
                                                 lambda b: _arm_prompt_tokens(b, inst.question, chunks, instruction,
                                                                              pipeline_for_budget, reader_counter))
            for _ in range(max_refits + 1):
                result = pipeline_for_budget(budget).run(chunks, query=inst.question)
                prompt = format_prompt(inst.question, [c.text for c in result.chunks], instruction=instruction)
                n = reader_counter.count(prompt)
                if n <= target or budget <= 1:
                    break
                budget = max(1, int(budget * target / n) - 1)
            out.append(arm_prompt(f"trimmed_{r:g}x", prompt, n, answer_in_text(inst.answers, result.text), budget))
        gold = [p.content for p in inst.passages if p.is_gold]
        if gold:
            oracle = format_prompt(inst.question, gold, instruction=instruction)
            out.append(arm_prompt("oracle", oracle, reader_counter.count(oracle),
                                  answer_in_text(inst.answers, "\n".join(gold))))
    return out


def _arm_prompt_tokens(budget: int, question: str, chunks: list[dict[str, str]], instruction: str,
                       pipeline_for_budget: Callable[[int], Pipeline], counter: TokenCounter) -> int:
    result = pipeline_for_budget(budget).run(chunks, query=question)
    return counter.count(format_prompt(question, [c.text for c in result.chunks], instruction=instruction))


def _largest_fitting_budget(upper: int, target: int, steps: int, prompt_tokens: Callable[[int], int]) -> int:
    """The largest budget in [1, upper] whose prompt has at most ``target`` tokens (1 when none fits)."""
    lo, hi, best = 1, max(1, upper), 1
    for _ in range(steps):
        if lo > hi:
            break
        mid = (lo + hi) // 2
        if prompt_tokens(mid) <= target:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best
