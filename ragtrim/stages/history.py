"""The history stage: folds older conversation turns into a compact state and keeps the last turns verbatim.

It works on ``TrimContext.history`` and ``.state`` only; chunks pass through untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

from ragtrim._util.validate import Constraints
from ragtrim.components import component
from ragtrim.errors import InputError
from ragtrim.history.fold import HISTORY_CONSTRAINTS, compress_history
from ragtrim.history.state import HistoryState
from ragtrim.history.summarizers import Summarizer
from ragtrim.models import StageOutput, TrimContext
from ragtrim.stages.base import Stage, register_stage
from ragtrim.text.tokens import TokenCounter


@register_stage
@component
class HistoryCompressor(Stage):
    """Replace the history with its last turns and put the folded turns into a ``HistoryState``.

    Parameters:
        keep_last_turns: how many of the last turns stay verbatim in ``context.history``.
        keep_last_tokens: optionally, keep only as many of those as fit this many tokens.
        max_tokens: budget for state text + kept turns (``None``: no budget for history).
        summarizer: the extractor (default ``RuleBasedSummarizer()``); ``to_dict`` writes it as a nested config.
        recency_weight: how much later state items are favoured when the budget forces a choice.

    Output: ``context.history`` = the verbatim recent turns, ``context.state`` = the new ``HistoryState`` (pass it
    back on the next call to fold incrementally). ``info`` holds ``folded_turn_ids``, ``history_tokens_before``,
    ``history_tokens_after``, ``state_text`` (the budgeted block to put in the prompt), ``state_items``,
    ``dropped_state_items``, ``notes`` and ``empty_turns`` (every folded turn that yielded no state item, with why).
    """

    name = "history"
    _parameter_constraints: ClassVar[dict[str, Constraints]] = HISTORY_CONSTRAINTS

    keep_last_turns: int = 4
    keep_last_tokens: int | None = None
    max_tokens: int | None = None
    summarizer: Summarizer | None = None
    recency_weight: float = 1.0

    def run(self, context: TrimContext, *, counter: TokenCounter) -> StageOutput:
        state = context.state
        if state is not None and not isinstance(state, (HistoryState, Mapping)):
            raise InputError(
                f"the history stage needs context.state to be a HistoryState, its to_dict() or None, got "
                f"{type(state).__name__}; do not share the state slot with another component"
            )
        if not context.history and state is None:
            return StageOutput(context=context, info={
                "folded_turn_ids": [], "history_tokens_before": 0, "history_tokens_after": 0, "state_text": "",
                "state_items": 0, "dropped_state_items": 0, "notes": [], "empty_turns": [],
            })
        result = compress_history(
            context.history,
            state=state,
            keep_last_turns=self.keep_last_turns,
            keep_last_tokens=self.keep_last_tokens,
            max_tokens=self.max_tokens,
            counter=counter,
            summarizer=self.summarizer,
            recency_weight=self.recency_weight,
        )
        new_context = dataclasses.replace(context, history=result.recent, state=result.state)
        return StageOutput(
            context=new_context,
            info={
                "folded_turn_ids": list(result.folded_turn_ids),
                "history_tokens_before": result.tokens_before,
                "history_tokens_after": result.tokens_after,
                "state_tokens": result.state_tokens,
                "recent_tokens": result.recent_tokens,
                "state_text": result.state_text,
                "state_items": len(result.state),
                "dropped_state_items": len(result.dropped_items),
                "notes": list(result.notes),
                "empty_turns": [t.to_dict() for t in result.empty_turns],
            },
        )
