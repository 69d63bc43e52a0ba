"""The arms' prompts: the same questions sent untrimmed, trimmed by a ragtrim pipeline at chosen ratios, and oracle
(gold passage only). Built on the CPU; the GPU worker only reads the resulting JSONL.

The template is the "Lost in the Middle" QA prompt; documents are numbered in the order the arm keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache, partial
from typing import Any, Literal

from ragtrim.pipeline import Pipeline
from ragtrim.text.tokens import TokenCounter
from ragtrim_bench.datasets.nq import QAInstance

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


def context_block(documents: Iterable[str], *, tag: str = "context") -> str:
    """Documents inside ``<tag>...</tag>``, a blank line between them: the chunks the gateway and the audit find."""
    return f"<{tag}>\n" + "\n\n".join(documents) + f"\n</{tag}>"


def cold_prompts(n: int, *, distinct: int = 400) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``n`` requests on the golden NQ questions (``golden_multidoc``, the first ``distinct`` used in turn), every
    passage made new by the request's number after it, so that no passage reaches a trimmer twice: cold trims in a
    warm process, its caches filling as in service. (id, prompt) pairs, untrimmed for an upstream directly, and with
    the passages in ``<context>`` for a gateway."""
    from ragtrim_bench.datasets.nq import golden_multidoc

    questions = golden_multidoc(min(n, distinct))
    direct, wrapped = [], []
    for k in range(n):
        q = questions[k % len(questions)]
        passages = [f"{p.content} ({k})" for p in q.passages]
        direct.append((f"{q.id}-{k}", format_prompt(q.question, passages)))
        wrapped.append((f"{q.id}-{k}", f"{INSTRUCTION}\n\n{context_block(passages)}\n\nQuestion: {q.question}\nAnswer:"))
    return direct, wrapped


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
    extra_arms: Mapping[str, Callable[[QAInstance], Sequence[str]]] | None = None,
) -> list[ArmPrompt]:
    """Prompts for arms ``untrimmed``, ``trimmed_<r>x`` for each ratio, each of ``extra_arms`` (name -> the documents
    that arm keeps for an instance, e.g. ``arm_documents`` with another recipe), and ``oracle``.

    A trimmed arm must have at most ``1/r`` of the untrimmed prompt's reader tokens (instruction, question and
    document labels included). Its pipeline budget (in the pipeline's own tokens) starts at the chunks' share of
    that target and is lowered proportionally, at most ``max_refits`` times, until the prompt fits (``fit="shrink"``,
    the committed H200 run; it overshoots, e.g. 4.8x for a 4x arm), or is the largest budget whose prompt fits, found
    by bisection in ``3 * max_refits`` runs (``fit="bisect"``). The arm records the budget it ended with.
    """
    from ragtrim_bench.common.answers import answer_in_text

    out: list[ArmPrompt] = []
    for inst in instances:
        docs = [p.content for p in inst.passages]
        full = format_prompt(inst.question, docs, instruction=instruction)
        full_tokens = reader_counter.count(full)
        def arm_prompt(arm: str, prompt: str, n: int, answer_in: bool, budget: int | None = None, *,
                       inst: QAInstance = inst) -> ArmPrompt:
            return ArmPrompt(id=inst.id, arm=arm, question=inst.question, answers=inst.answers, prompt=prompt,
                             prompt_tokens=n, budget_tokens=budget, is_impossible=inst.is_impossible,
                             answer_in_prompt=answer_in)

        out.append(arm_prompt("untrimmed", full, full_tokens, answer_in_text(inst.answers, "\n".join(docs))))
        chunks = [{"id": p.id, "text": p.content} for p in inst.passages]
        if ratios:  # the chunks' tokens in the pipeline's counting, and the reader tokens outside the documents
            chunk_tokens = pipeline_for_budget(10**9).run(chunks, query=inst.question).tokens_before
            frame_tokens = full_tokens - reader_counter.count("\n".join(docs))
        for r in ratios:
            target = int(full_tokens / r)
            budget = max(1, int(chunk_tokens / r) - frame_tokens)
            if fit == "bisect":
                tokens_at = partial(_arm_prompt_tokens, question=inst.question, chunks=chunks,
                                    instruction=instruction, pipeline_for_budget=pipeline_for_budget,
                                    counter=reader_counter)
                budget = _largest_fitting_budget(chunk_tokens, target, 3 * max_refits, tokens_at)
            for _ in range(max_refits + 1):
                result = pipeline_for_budget(budget).run(chunks, query=inst.question)
                prompt = format_prompt(inst.question, [c.text for c in result.chunks], instruction=instruction)
                n = reader_counter.count(prompt)
                if n <= target or budget <= 1:
                    break
                budget = max(1, int(budget * target / n) - 1)
            out.append(arm_prompt(f"trimmed_{r:g}x", prompt, n, answer_in_text(inst.answers, result.text), budget))
        for name, documents in (extra_arms or {}).items():
            kept = list(documents(inst))
            prompt = format_prompt(inst.question, kept, instruction=instruction)
            out.append(arm_prompt(name, prompt, reader_counter.count(prompt),
                                  answer_in_text(inst.answers, "\n".join(kept))))
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


TrimRecipe = Literal["default", "default_whole", "top1", "top2", "top3", "minilm_sent", "top1_sent", "top1_qlm"]
TRIM_RECIPES: tuple[str, ...] = ("default", "default_whole", "top1", "top2", "top3", "minilm_sent", "top1_sent",
                                 "top1_qlm")
QLM_RERANK_K = 2
QLM_WEIGHT = 0.3
"""``top1_qlm``: MiniLM's best 2 passages rescored as cosine + 0.3 x the reader's mean log P(question | passage)
(the best mean top-1 gold rate over dev questions 400-599 and 1062-1261, benchmarks/dev/qlm_rerank.py)."""


@lru_cache(maxsize=1)
def _shared_embedding_scorer() -> Any:
    from ragtrim.scoring.embedding import EmbeddingScorer

    return EmbeddingScorer()


@lru_cache(maxsize=2)
def _shared_qlm_scorer(reader_model: str) -> Any:
    from ragtrim.scoring.rerank import QueryLikelihoodScorer, RerankScorer

    return RerankScorer(_shared_embedding_scorer(), QueryLikelihoodScorer(reader_model), top_k=QLM_RERANK_K,
                        weight=QLM_WEIGHT)


def recipe_pipeline(recipe: str, budget: int | None, *, reader_model: str | None = None) -> Pipeline:
    """A trimming pipeline for the GPU arms (one shared MiniLM scorer, so passage embeddings are computed once).

    ``default``: ragtrim's default pipeline. ``default_whole``: the same, but the budget cuts whole sentences only
    (no truncated tail). ``topK``: the K best passages by MiniLM, then (with a budget) BM25 sentence selection inside
    them. ``minilm_sent``: the default with sentences also scored by MiniLM. ``top1_sent``: the best passage, its
    sentences scored by MiniLM. ``top1_qlm``: the best passage after reranking MiniLM's best two by the reader's
    query likelihood (``reader_model``: a local transformers directory of the reader). All put the best chunk first.
    """
    from ragtrim.errors import ConfigError
    from ragtrim.stages.base import Stage
    from ragtrim.stages.budget import TokenBudget
    from ragtrim.stages.compress import SentenceCompressor
    from ragtrim.stages.dedup import DuplicateFilter
    from ragtrim.stages.html import HtmlCleaner
    from ragtrim.stages.order import Reorder
    from ragtrim.stages.relevance import RelevanceFilter

    if recipe not in TRIM_RECIPES:
        raise ConfigError(f"recipe must be one of {TRIM_RECIPES}, got {recipe!r}")
    emb = _shared_embedding_scorer()
    top_k = int(recipe[3]) if recipe.startswith("top") else None
    passage_scorer = emb
    if recipe.endswith("_qlm"):
        if reader_model is None:
            raise ConfigError(f"recipe {recipe!r} needs reader_model, the reader's local transformers directory")
        passage_scorer = _shared_qlm_scorer(str(reader_model))
    stages: list[Stage] = [HtmlCleaner(), DuplicateFilter(), RelevanceFilter(scorer=passage_scorer, top_k=top_k)]
    if budget is not None:
        sent_scorer: Any = emb if recipe in ("minilm_sent", "top1_sent") else "bm25"
        stages += [SentenceCompressor(scorer=sent_scorer, max_tokens=budget),
                   TokenBudget(max_tokens=budget, truncate=recipe != "default_whole")]
    stages.append(Reorder(strategy="score"))
    return Pipeline(stages)


def arm_documents(inst: QAInstance, recipe: str, ratio: float | None, counter: TokenCounter,
                  *, instruction: str = INSTRUCTION, steps: int = 12, reader_model: str | None = None) -> list[str]:
    """The documents a trimmed arm keeps for one instance: ``recipe`` with no budget when ``ratio`` is None, else
    with the largest budget (bisection, ``steps`` runs) whose prompt has at most 1/``ratio`` of the untrimmed
    prompt's reader tokens."""
    chunks = [{"id": p.id, "text": p.content} for p in inst.passages]
    if ratio is None:
        return [c.text for c in recipe_pipeline(recipe, None, reader_model=reader_model).run(
            chunks, query=inst.question).chunks]
    full = counter.count(format_prompt(inst.question, [p.content for p in inst.passages], instruction=instruction))
    upper = recipe_pipeline(recipe, 10**9, reader_model=reader_model).run(chunks, query=inst.question).tokens_before

    def pipeline(b: int) -> Pipeline:
        return recipe_pipeline(recipe, b, reader_model=reader_model)

    best = _largest_fitting_budget(upper, int(full / ratio), steps, lambda b: _arm_prompt_tokens(
        b, inst.question, chunks, instruction, pipeline, counter))
    return [c.text for c in pipeline(best).run(chunks, query=inst.question).chunks]


def cut_to_tokens(question: str, documents: Sequence[str], n_tokens: int, counter: TokenCounter,
                  *, instruction: str = INSTRUCTION) -> str:
    """A prompt of about ``n_tokens`` reader tokens (never more, unless the frame alone is longer): the documents'
    text cut at a word boundary, for TTFT-versus-prompt-length sweeps. Answers are not the point of these prompts."""
    text = "\n".join(f"Document [{i}] {d.strip()}" for i, d in enumerate(documents, 1))
    head, tail = f"{instruction}\n\n", f"\n\nQuestion: {question}\nAnswer:"
    lo, hi, best = 0, len(text), 0
    while lo <= hi:
        mid = (lo + hi) // 2
        cut = text[:mid].rsplit(" ", 1)[0] if mid < len(text) else text
        if counter.count(head + cut + tail) <= n_tokens:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    cut = text[:best].rsplit(" ", 1)[0] if best < len(text) else text
    return head + cut + tail
