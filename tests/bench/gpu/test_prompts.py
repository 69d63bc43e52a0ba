from __future__ import annotations

import pytest

from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget
from ragtrim.text.tokens import WhitespaceCounter
from ragtrim_bench.datasets.nq import Passage, QAInstance
from ragtrim_bench.gpu.prompts import INSTRUCTION, build_arm_prompts, cut_to_tokens, format_prompt


def test_format_prompt() -> None:
    p = format_prompt("who?", ["T1\nalpha", "T2\nbeta"])
    assert p == f"{INSTRUCTION}\n\nDocument [1] T1\nalpha\nDocument [2] T2\nbeta\n\nQuestion: who?\nAnswer:"


def _instance() -> QAInstance:
    passages = tuple(
        Passage(id=str(i), title=f"T{i}", text=("Paris is the capital of France. " if i == 2 else "filler words here. ") * 10,
                is_gold=(i == 2))
        for i in range(6)
    )
    return QAInstance(id="q0", question="What is the capital of France?", answers=("Paris",), passages=passages)


def test_arms_fit_their_ratio() -> None:
    counter = WhitespaceCounter()
    rows = build_arm_prompts(
        [_instance()],
        reader_counter=counter,
        pipeline_for_budget=lambda b: Pipeline([TokenBudget(max_tokens=b, min_truncated_tokens=1)], tokenizer=counter),
        ratios=(2.0, 4.0),
    )
    by_arm = {r.arm: r for r in rows}
    assert list(by_arm) == ["untrimmed", "trimmed_2x", "trimmed_4x", "oracle"]
    full = by_arm["untrimmed"].prompt_tokens
    assert full == counter.count(by_arm["untrimmed"].prompt)
    for arm, r in (("trimmed_2x", 2), ("trimmed_4x", 4)):
        assert by_arm[arm].prompt_tokens <= full / r
        assert by_arm[arm].budget_tokens is not None
    assert "Paris is the capital" in by_arm["oracle"].prompt and by_arm["oracle"].answer_in_prompt
    assert by_arm["untrimmed"].to_dict()["answers"] == ["Paris"]


def test_bisect_fit_lands_closer_to_the_target() -> None:
    counter = WhitespaceCounter()

    def pipe(b: int) -> Pipeline:
        return Pipeline([TokenBudget(max_tokens=b, min_truncated_tokens=1)], tokenizer=counter)

    shrink = {r.arm: r for r in build_arm_prompts([_instance()], reader_counter=counter, pipeline_for_budget=pipe,
                                                  ratios=(4.0,))}
    bisect = {r.arm: r for r in build_arm_prompts([_instance()], reader_counter=counter, pipeline_for_budget=pipe,
                                                  ratios=(4.0,), fit="bisect")}
    target = shrink["untrimmed"].prompt_tokens / 4
    assert shrink["trimmed_4x"].prompt_tokens <= bisect["trimmed_4x"].prompt_tokens <= target


def test_extra_arms_come_before_oracle_and_are_counted() -> None:
    counter = WhitespaceCounter()
    rows = build_arm_prompts([_instance()], reader_counter=counter,
                             pipeline_for_budget=lambda b: Pipeline([TokenBudget(max_tokens=b)], tokenizer=counter),
                             ratios=(2.0,), extra_arms={"gold_twice": lambda inst: [inst.passages[2].content] * 2,
                                                        "first": lambda inst: [inst.passages[0].content]})
    by_arm = {r.arm: r for r in rows}
    assert [r.arm for r in rows] == ["untrimmed", "trimmed_2x", "gold_twice", "first", "oracle"]
    assert by_arm["gold_twice"].answer_in_prompt and not by_arm["first"].answer_in_prompt
    assert by_arm["first"].prompt_tokens == counter.count(by_arm["first"].prompt)
    assert by_arm["first"].budget_tokens is None


def test_cut_to_tokens_lands_at_or_below_the_length() -> None:
    counter = WhitespaceCounter()
    docs = [p.content for p in _instance().passages]
    frame_only = cut_to_tokens("who {x}?", docs, 0, counter)
    assert frame_only.endswith("Question: who {x}?\nAnswer:")
    for n in (30, 60, 90):
        prompt = cut_to_tokens("who?", docs, n, counter)
        assert n - 3 <= counter.count(prompt) <= n
    full = format_prompt("who?", docs)
    assert cut_to_tokens("who?", docs, 10**6, counter) == full


def test_qlm_recipe_reranks_with_the_reader() -> None:
    from ragtrim.errors import ConfigError
    from ragtrim.scoring.rerank import QueryLikelihoodScorer, RerankScorer
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim_bench.gpu.prompts import QLM_RERANK_K, QLM_WEIGHT, recipe_pipeline

    with pytest.raises(ConfigError, match="reader_model"):
        recipe_pipeline("top1_qlm", None)
    relevance = [s for s in recipe_pipeline("top1_qlm", None, reader_model="/models/reader").stages
                 if isinstance(s, RelevanceFilter)]
    assert len(relevance) == 1 and relevance[0].top_k == 1
    scorer = relevance[0].scorer
    assert isinstance(scorer, RerankScorer)  # built lazily: no model is loaded here
    assert (scorer.top_k, scorer.weight) == (QLM_RERANK_K, QLM_WEIGHT)
    assert isinstance(scorer.second, QueryLikelihoodScorer) and scorer.second.model == "/models/reader"
