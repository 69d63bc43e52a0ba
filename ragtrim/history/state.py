"""The data of conversation-history compression: state items, the folded state with its increment bookkeeping, the
result of ``compress_history``, and how they render as prompt text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ragtrim.errors import InputError, RagtrimError
from ragtrim.inputs import coerce_history
from ragtrim.models import Message

StateKind = Literal["preference", "constraint", "goal", "decision", "fact", "question"]
"""What a state item records. ``question`` items are questions not answered yet by another speaker."""

STATE_KINDS: tuple[str, ...] = get_args(StateKind)

_FIELD_OF_KIND: dict[str, str] = {
    "preference": "preferences",
    "constraint": "constraints",
    "goal": "goals",
    "decision": "decisions",
    "fact": "facts",
    "question": "questions",
}
KIND_LABELS: dict[str, str] = {
    "preference": "Preferences",
    "constraint": "Constraints",
    "goal": "Goals and plans",
    "decision": "Decisions and commitments",
    "fact": "Facts",
    "question": "Open questions",
}
"""The heading of each kind's group in the state text block."""
STATE_HEADER = "Earlier in the conversation:"


@dataclass(frozen=True, slots=True)
class StateItem:
    """One extracted piece of the conversation: its text, kind, speaker and the turns it came from.

    ``score`` is the extractor's informativeness estimate; the budget drops low-score items first.
    """

    text: str
    kind: StateKind
    turn_ids: tuple[str, ...]
    role: str = ""
    score: float = 1.0
    seq: int = -1
    """Order of arrival in the state (set when merged; -1 before)."""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise InputError(f"state item text must be a non-empty str, got {self.text!r}")
        if self.kind not in STATE_KINDS:
            raise InputError(f"state item kind must be one of {STATE_KINDS}, got {self.kind!r}")
        if not isinstance(self.turn_ids, tuple):
            object.__setattr__(self, "turn_ids", tuple(self.turn_ids))
        if not all(isinstance(t, str) for t in self.turn_ids):
            raise InputError(f"state item turn_ids must be strs, got {self.turn_ids!r}")
        if not isinstance(self.role, str):
            raise InputError(f"state item role must be a str, got {self.role!r}")
        if isinstance(self.score, bool) or not isinstance(self.score, (int, float)) or math.isnan(self.score):
            raise InputError(f"state item score must be a number, got {self.score!r}")

    def line(self) -> str:
        """How the item appears in the state text block."""
        return f"- {self.role}: {self.text}" if self.role else f"- {self.text}"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "turn_ids": list(self.turn_ids), "role": self.role,
                "score": self.score, "seq": self.seq}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateItem:
        if not isinstance(data, Mapping):
            raise InputError(f"a state item must be a dict, got {type(data).__name__}")
        try:
            return cls(text=data["text"], kind=data["kind"], turn_ids=tuple(data.get("turn_ids", ())),
                       role=data.get("role", ""), score=data.get("score", 1.0), seq=data.get("seq", -1))
        except KeyError as exc:
            raise InputError(f"state item dict is missing key {exc.args[0]!r}; it needs 'text' and 'kind'") from None


@dataclass(frozen=True, slots=True)
class HistoryState:
    """The compact memory of the folded turns, one tuple of items per kind, plus the bookkeeping for increments.

    ``pending`` holds turns seen but not folded yet (they were kept verbatim), so a later call may pass only new
    turns. ``last_seen_turn_id`` lets a later call pass the whole conversation instead.
    """

    preferences: tuple[StateItem, ...] = ()
    constraints: tuple[StateItem, ...] = ()
    goals: tuple[StateItem, ...] = ()
    decisions: tuple[StateItem, ...] = ()
    facts: tuple[StateItem, ...] = ()
    questions: tuple[StateItem, ...] = ()
    folded_count: int = 0
    last_folded_turn_id: str | None = None
    last_seen_turn_id: str | None = None
    pending: tuple[Message, ...] = ()
    next_seq: int = 0

    @property
    def items(self) -> tuple[StateItem, ...]:
        """All items, kind by kind (in ``STATE_KINDS`` order), each kind in conversation order."""
        return tuple(it for kind in STATE_KINDS for it in getattr(self, _FIELD_OF_KIND[kind]))

    def __len__(self) -> int:
        return len(self.items)

    def items_in_order(self) -> list[StateItem]:
        """All items in the order they entered the state (conversation order)."""
        return sorted(self.items, key=lambda it: it.seq)

    def to_text(self) -> str:
        """The whole state as a prompt block (no budget; ``compress_history`` gives the budgeted one)."""
        return render_state(self.items)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: ``{kind_field: [item dicts]}`` plus the increment bookkeeping."""
        out: dict[str, Any] = {f: [it.to_dict() for it in getattr(self, f)] for f in _FIELD_OF_KIND.values()}
        out.update(folded_count=self.folded_count, last_folded_turn_id=self.last_folded_turn_id,
                   last_seen_turn_id=self.last_seen_turn_id, pending=[m.to_dict() for m in self.pending],
                   next_seq=self.next_seq)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HistoryState:
        """Rebuild a state saved with ``to_dict`` (e.g. kept in a session store between requests)."""
        if not isinstance(data, Mapping):
            raise InputError(f"a history state must be a dict, got {type(data).__name__}")
        def load(name: str) -> tuple[StateItem, ...]:
            raw = data.get(name, ())
            if not isinstance(raw, (list, tuple)):
                raise InputError(f"state field {name!r} must be a list of item dicts, got {type(raw).__name__}")
            return tuple(StateItem.from_dict(d) for d in raw)

        folded = data.get("folded_count", 0)
        if isinstance(folded, bool) or not isinstance(folded, int) or folded < 0:
            raise InputError(f"state folded_count must be an int >= 0, got {folded!r}")
        next_seq = data.get("next_seq", 0)
        if isinstance(next_seq, bool) or not isinstance(next_seq, int) or next_seq < 0:
            raise InputError(f"state next_seq must be an int >= 0, got {next_seq!r}")
        try:
            return cls(preferences=load("preferences"), constraints=load("constraints"), goals=load("goals"),
                       decisions=load("decisions"), facts=load("facts"), questions=load("questions"), folded_count=folded, last_folded_turn_id=data.get("last_folded_turn_id"),
                       last_seen_turn_id=data.get("last_seen_turn_id"),
                       pending=coerce_history(data.get("pending", ())), next_seq=next_seq)
        except (TypeError, ValueError) as exc:  # a field of the wrong shape (turn_ids: 5, pending: 5): typed
            if isinstance(exc, RagtrimError):
                raise
            raise InputError(f"history state is malformed ({type(exc).__name__}: {exc}); pass a saved to_dict()") from None


@dataclass(frozen=True, slots=True)
class EmptyTurn:
    """A turn folded into the state that yielded no state item, and why (the summarizer's ``why_empty(turn)`` when
    it has one: "small talk", "no rules for its script (thai)", ...)."""

    turn_id: str
    role: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"turn_id": self.turn_id, "role": self.role, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class HistoryResult:
    """What ``compress_history`` returns: the new state, the verbatim recent turns and the budgeted text block.

    ``folded_turn_ids`` are the turns folded into the state by this call; ``empty_turns`` those of them that yielded
    no state item, with the reason (a note sums them up, so no turn disappears silently); ``dropped_items`` the state
    items left out of ``state_text`` to meet the budget (they stay in ``state``).
    """

    state: HistoryState
    recent: tuple[Message, ...]
    state_text: str
    folded_turn_ids: tuple[str, ...]
    dropped_items: tuple[StateItem, ...]
    tokens_before: int
    tokens_after: int
    state_tokens: int
    recent_tokens: int
    max_tokens: int | None = None
    notes: tuple[str, ...] = ()
    empty_turns: tuple[EmptyTurn, ...] = ()

    @property
    def text(self) -> str:
        """State block then the recent turns, ready to paste into a prompt."""
        return "\n\n".join(p for p in (self.state_text, format_turns(self.recent)) if p)

    @property
    def ratio(self) -> float:
        if self.tokens_after == 0:
            return 1.0 if self.tokens_before == 0 else math.inf
        return self.tokens_before / self.tokens_after

    def as_messages(self, *, state_role: str = "system") -> list[dict[str, str]]:
        """Chat-API messages: the state block (if any) as one ``state_role`` message, then the recent turns."""
        out = [{"role": state_role, "content": self.state_text}] if self.state_text else []
        return out + [{"role": m.role, "content": m.content} for m in self.recent]

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.to_dict(),
            "recent": [m.to_dict() for m in self.recent],
            "state_text": self.state_text,
            "folded_turn_ids": list(self.folded_turn_ids),
            "dropped_items": [it.to_dict() for it in self.dropped_items],
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "state_tokens": self.state_tokens,
            "recent_tokens": self.recent_tokens,
            "max_tokens": self.max_tokens,
            "notes": list(self.notes),
            "empty_turns": [t.to_dict() for t in self.empty_turns],
        }


def format_turns(messages: Iterable[Message]) -> str:
    """Turns as ``role: content`` lines, the form whose tokens the budget counts."""
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


def render_state(items: Sequence[StateItem]) -> str:
    """The state text block: a header, then one labelled group per kind, items in the given order."""
    if not items:
        return ""
    lines = [STATE_HEADER]
    for kind in STATE_KINDS:
        group = [it for it in items if it.kind == kind]
        if group:
            lines.append(f"{KIND_LABELS[kind]}:")
            lines.extend(it.line() for it in group)
    return "\n".join(lines)
