"""Conversation history into state: fold older turns into a compact, question-agnostic state of preferences, goals,
decisions, named facts and open questions, keep the last turns verbatim, and fit both into a token budget.

Incremental: ``compress_history(new_or_all_messages, state=previous_state)`` folds only turns not folded before and
gives the same state as a from-scratch run (for per-turn extractors such as ``RuleBasedSummarizer``). The state's
own text is never fed back to the extractor, so nothing is ever summarized twice.

This module is the engine (which turns to fold, merging, the budget); the state and result types are in
``ragtrim.history.state`` and the extractors in ``ragtrim.history.summarizers``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragtrim._util.validate import Constraints, Interval, validate_params
from ragtrim.components import Plugin
from ragtrim.errors import InputError, RagtrimError
from ragtrim.history.state import (
    KIND_LABELS,
    STATE_HEADER,
    EmptyTurn,
    HistoryResult,
    HistoryState,
    StateItem,
    format_turns,
    render_state,
)
from ragtrim.history.summarizers import RuleBasedSummarizer, Summarizer
from ragtrim.inputs import coerce_history
from ragtrim.models import Message
from ragtrim.text.sentences import normalize_text
from ragtrim.text.tokens import TokenCounter, get_counter


def _item_key(item: StateItem) -> tuple[str, str]:
    return item.role, normalize_text(item.text).rstrip("?.! ")


def _merge(
    state_items: list[StateItem], new_items: Sequence[StateItem], folded: Sequence[Message], next_seq: int
) -> tuple[list[StateItem], int]:
    """Add ``new_items`` turn by turn: a turn from another speaker answers (removes) earlier open questions; an
    item equal to a kept one (same speaker, same normalized text) only adds its turn ids.

    Linear in turns and items: answered questions leave a hole instead of a rebuilt list and index, open questions
    are tracked per speaker, and turn ids added to an item are collected in a set and applied once at the end
    (rebuilding per turn took 26 s for 16k turns)."""
    position = {m.turn_id: i for i, m in enumerate(folded)}
    by_turn: dict[int, list[StateItem]] = {}
    for it in new_items:
        at = max((position[t] for t in it.turn_ids if t in position), default=len(folded))
        by_turn.setdefault(at, []).append(it)
    items: list[StateItem | None] = list(state_items)
    keys = [_item_key(it) for it in state_items]
    # Live items by key, in list order; the last one is the one a repeated item merges into.
    live: dict[tuple[str, str], list[int]] = {}
    questions: dict[str, list[int]] = {}  # speaker -> live question items
    for j, it in enumerate(state_items):
        live.setdefault(keys[j], []).append(j)
        if it.kind == "question":
            questions.setdefault(it.role, []).append(j)
    added_ids: dict[int, tuple[list[str], set[str]]] = {}
    for i in range(len(folded) + 1):
        if i < len(folded):
            for role in [r for r, open_ in questions.items() if open_ and r != folded[i].role]:
                for j in questions.pop(role):
                    items[j] = None
                    live[keys[j]].remove(j)
                    added_ids.pop(j, None)
        for it in by_turn.get(i, ()):
            key = _item_key(it)
            same = live.get(key)
            if same:
                j = same[-1]
                ids, seen = added_ids.get(j) or added_ids.setdefault(j, ([], set(_present(items[j]).turn_ids)))
                fresh = [t for t in it.turn_ids if t not in seen]  # as before: checked against the item only
                ids.extend(fresh)
                seen.update(fresh)
            else:
                j = len(items)
                items.append(dataclasses.replace(it, seq=next_seq))
                keys.append(key)
                live.setdefault(key, []).append(j)
                if it.kind == "question":
                    questions.setdefault(it.role, []).append(j)
                next_seq += 1
    for j, (ids, _) in added_ids.items():
        if ids:
            old = _present(items[j])
            items[j] = dataclasses.replace(old, turn_ids=old.turn_ids + tuple(ids))
    return [it for it in items if it is not None], next_seq


def _present(item: StateItem | None) -> StateItem:
    if item is None:  # pragma: no cover - live indices never point at a removed item
        raise RagtrimError("internal error: a merged state item was removed")
    return item


def _state_from_items(items: Sequence[StateItem], bookkeeping: HistoryState) -> HistoryState:
    def of(kind: str) -> tuple[StateItem, ...]:
        return tuple(it for it in items if it.kind == kind)

    return dataclasses.replace(bookkeeping, preferences=of("preference"), constraints=of("constraint"),
                               goals=of("goal"), decisions=of("decision"), facts=of("fact"), questions=of("question"))


def _new_messages(messages: tuple[Message, ...], state: HistoryState) -> tuple[Message, ...]:
    if state.last_seen_turn_id is None:
        return messages
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].turn_id == state.last_seen_turn_id:
            return messages[i + 1 :]
    return messages


def _recent_window(unfolded: Sequence[Message], keep_last_turns: int, limit_tokens: int | None,
                   counter: TokenCounter) -> int:
    """How many of the last turns stay verbatim: at most ``keep_last_turns`` and, with a limit, as many as fit."""
    n = min(keep_last_turns, len(unfolded))
    if limit_tokens is None:
        return n
    kept = 0
    used = 0
    for m in reversed(unfolded[len(unfolded) - n :]):
        cost = counter.count(f"{m.role}: {m.content}") + (1 if kept else 0)
        if used + cost > limit_tokens:
            break
        used += cost
        kept += 1
    return kept


def select_items(items: Sequence[StateItem], max_tokens: int | None, counter: TokenCounter,
                 *, recency_weight: float = 1.0) -> tuple[list[StateItem], list[StateItem]]:
    """Pick the items whose rendered block fits ``max_tokens``; return (kept in original order, dropped).

    Rule: items are ranked by ``score * (1 + recency_weight * position / n)`` (later items weigh up to
    ``1 + recency_weight`` times more; ties keep the later one) and admitted greedily while their line fits; the
    block is then rendered and, if the exact count still exceeds the budget, the lowest-ranked kept items go.
    """
    if max_tokens is None:
        return list(items), []
    n = max(1, len(items))
    rank = sorted(range(len(items)), key=lambda i: (-(items[i].score * (1 + recency_weight * i / n)), -i))
    remaining = max_tokens - counter.count(STATE_HEADER) - 1
    kinds_open: set[str] = set()
    chosen: list[int] = []
    for i in rank:
        it = items[i]
        cost = counter.count(it.line()) + 1
        if it.kind not in kinds_open:
            cost += counter.count(KIND_LABELS[it.kind] + ":") + 1
        if cost <= remaining:
            remaining -= cost
            chosen.append(i)
            kinds_open.add(it.kind)
    chosen = chosen[: _fitting_prefix(len(chosen), lambda k: counter.count(
        render_state([items[i] for i in sorted(chosen[:k])])) <= max_tokens)]
    keep = set(chosen)
    return [items[i] for i in sorted(keep)], [items[i] for i in range(len(items)) if i not in keep]


_PREFIX_STEPS = 16
"""``_fitting_prefix`` shortens one item at a time this often before it bisects."""


def _fitting_prefix(n: int, fits: Callable[[int], bool]) -> int:
    """The longest prefix length ``k <= n`` reached by dropping the last item while ``fits(k)`` is false: one at a
    time for ``_PREFIX_STEPS`` steps (the usual case: a join added a token or two), then by bisection, so thousands of
    items that each overshoot cost O(log n) renders instead of one per item. 0 when nothing fits."""
    k = n
    for _ in range(_PREFIX_STEPS):
        if k == 0 or fits(k):
            return k
        k -= 1
    lo, hi = 0, k  # fits(lo) is assumed (nothing rendered fits any budget >= 0); hi is unknown
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


_NOTE_IDS = 12
"""A note names at most this many turns of one reason; ``HistoryResult.empty_turns`` lists every one."""


def _empty_turns(folded: Sequence[Message], extracted: Sequence[StateItem], summarizer: Summarizer) -> list[EmptyTurn]:
    """The folded turns no extracted item cites, with the summarizer's reason (``why_empty(turn)``) when it gives
    one."""
    cited = {t for it in extracted for t in it.turn_ids}
    why = getattr(summarizer, "why_empty", None)
    out = []
    for m in folded:
        if m.turn_id in cited:
            continue
        reason = why(m) if callable(why) else None
        out.append(EmptyTurn(m.turn_id, m.role, reason if isinstance(reason, str) and reason else
                             "the summarizer returned no item for it"))
    return out


def _empty_turn_notes(empty: Sequence[EmptyTurn], folded: int) -> list[str]:
    """One note per reason: "3 of 12 folded turns yielded no state item (small talk): turns 1, 6, 12"."""
    by_reason: dict[str, list[str]] = {}
    for t in empty:
        by_reason.setdefault(t.reason, []).append(t.turn_id)
    notes = []
    for reason, ids in by_reason.items():
        shown = ", ".join(ids[:_NOTE_IDS]) + (f" and {len(ids) - _NOTE_IDS} more" if len(ids) > _NOTE_IDS else "")
        notes.append(f"{len(ids)} of {folded} folded turns yielded no state item ({reason}): "
                     f"turn{'s' if len(ids) > 1 else ''} {shown}")
    return notes


HISTORY_CONSTRAINTS: dict[str, Constraints] = {
    "keep_last_turns": [Interval(int, 0, None)],
    "keep_last_tokens": [Interval(int, 0, None), None],
    "max_tokens": [Interval(int, 0, None), None],
    "summarizer": [Plugin("summarizer", Summarizer, describe="an object with an extract(turns) method",
                          rule="have an extract(turns) -> list[StateItem] method"), None],
    "recency_weight": [Interval(float, 0.0, None)],
}
"""The parameters ``compress_history`` and the history stage share, with their constraints."""


def compress_history(
    messages: Iterable[Any] | None,
    *,
    state: HistoryState | Mapping[str, Any] | None = None,
    keep_last_turns: int = 4,
    keep_last_tokens: int | None = None,
    max_tokens: int | None = None,
    counter: TokenCounter | str | None = None,
    summarizer: Summarizer | None = None,
    recency_weight: float = 1.0,
) -> HistoryResult:
    """Fold all but the last turns of ``messages`` into a state; keep the last turns verbatim.

    Args:
        messages: dicts ``{role|speaker, content|text, turn_id|id|dia_id}``, ``Message`` objects or chat-message
            look-alikes. Either the whole conversation or only the turns since ``state`` was made. Missing role
            or non-string content raise ``InputError``; an empty list gives an empty result.
        state: the ``HistoryState`` (or its ``to_dict()``) of a previous call; only turns it has not folded are
            folded now. Turn ids must be unique (give explicit ids when passing only new turns).
        keep_last_turns: how many of the last turns stay verbatim (never folded in this call).
        keep_last_tokens: optionally, keep only as many of those turns as fit this many tokens.
        max_tokens: budget for state text + recent turns. Recent turns come first (oldest of them folded when they
            alone exceed it); the state text gets the rest, low-score items left out first (see ``select_items``).
        counter: the token counter (default tiktoken cl100k_base); use the pipeline's for consistent numbers.
        summarizer: the extractor (default ``RuleBasedSummarizer()``). It only ever sees the turns being folded.
        recency_weight: how much later items are favoured when the budget forces a choice.
    """
    validate_params(HISTORY_CONSTRAINTS, {"keep_last_turns": keep_last_turns, "keep_last_tokens": keep_last_tokens,
                                          "max_tokens": max_tokens, "summarizer": summarizer,
                                          "recency_weight": recency_weight})
    if summarizer is None:
        summarizer = RuleBasedSummarizer()
    tok = get_counter(counter) if not isinstance(counter, TokenCounter) else counter
    if state is None:
        prior = HistoryState()
    elif isinstance(state, HistoryState):
        prior = state
    elif isinstance(state, Mapping):
        prior = HistoryState.from_dict(state)
    else:
        raise InputError(f"state must be a HistoryState, its to_dict() or None, got {type(state).__name__}")
    given = coerce_history(messages if messages is not None else ())

    new = _new_messages(given, prior)
    unfolded = prior.pending + new
    seen: set[str] = set()
    for m in unfolded:
        if m.turn_id in seen:
            raise InputError(
                f"turn id {m.turn_id!r} appears twice among the turns not folded yet; give every turn a unique "
                "turn_id (when passing only new turns with a state, number them yourself)"
            )
        seen.add(m.turn_id)

    notes: list[str] = []
    limit = keep_last_tokens
    if max_tokens is not None:
        limit = max_tokens if limit is None else min(limit, max_tokens)
    n_recent = _recent_window(unfolded, keep_last_turns, limit, tok)
    if n_recent < min(keep_last_turns, len(unfolded)):
        notes.append(f"kept {n_recent} of the last {keep_last_turns} turns verbatim: the others exceed the token limit")
    to_fold = unfolded[: len(unfolded) - n_recent]
    recent = unfolded[len(unfolded) - n_recent :]

    items = prior.items_in_order()
    next_seq = prior.next_seq
    empty: list[EmptyTurn] = []
    if to_fold:
        extracted = summarizer.extract(to_fold)
        if not isinstance(extracted, list) or not all(isinstance(it, StateItem) for it in extracted):
            raise InputError("summarizer.extract must return a list of StateItem")
        items, next_seq = _merge(items, extracted, to_fold, next_seq)
        empty = _empty_turns(to_fold, extracted, summarizer)
        notes.extend(_empty_turn_notes(empty, len(to_fold)))
    new_state = _state_from_items(items, HistoryState(
        folded_count=prior.folded_count + len(to_fold),
        last_folded_turn_id=to_fold[-1].turn_id if to_fold else prior.last_folded_turn_id,
        last_seen_turn_id=unfolded[-1].turn_id if unfolded else prior.last_seen_turn_id,
        pending=tuple(recent),
        next_seq=next_seq,
    ))

    recent_text = format_turns(recent)
    recent_tokens = tok.count(recent_text)
    state_budget = None
    if max_tokens is not None:
        state_budget = max(0, max_tokens - recent_tokens - (2 if recent else 0))
    kept, dropped = select_items(items, state_budget, tok, recency_weight=recency_weight)
    if dropped:
        notes.append(f"left {len(dropped)} of {len(items)} state items out of the text to fit {state_budget} tokens")
    state_text = render_state(kept)
    state_tokens = tok.count(state_text)
    after_text = "\n\n".join(p for p in (state_text, recent_text) if p)
    return HistoryResult(
        state=new_state,
        recent=tuple(recent),
        state_text=state_text,
        folded_turn_ids=tuple(m.turn_id for m in to_fold),
        dropped_items=tuple(dropped),
        tokens_before=tok.count(format_turns(given)),
        tokens_after=tok.count(after_text),
        state_tokens=state_tokens,
        recent_tokens=recent_tokens,
        max_tokens=max_tokens,
        notes=tuple(notes),
        empty_turns=tuple(empty),
    )
