from __future__ import annotations

from ragtrim.bench.gpu.prompts import INSTRUCTION, build_arm_prompts, format_prompt
from ragtrim.datasets.nq import Passage, QAInstance
from ragtrim.pipeline import Pipeline
from ragtrim.stages.budget import TokenBudget
from ragtrim.tokens import WhitespaceCounter


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
