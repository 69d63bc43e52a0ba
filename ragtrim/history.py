"""Conversation history into state: fold older turns into a compact, question-agnostic state of preferences, goals,
decisions, named facts and open questions, keep the last turns verbatim, and fit both into a token budget.

Incremental: ``compress_history(new_or_all_messages, state=previous_state)`` folds only turns not folded before and
gives the same state as a from-scratch run (for per-turn extractors such as ``RuleBasedSummarizer``). The state's
own text is never fed back to the extractor, so nothing is ever summarized twice.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, get_args, runtime_checkable

from ragtrim._validate import Constraints, InstanceOf, Interval, Satisfies, Text, validate_params
from ragtrim.components import Component, Plugin, component, register
from ragtrim.errors import ConfigError, InputError, RagtrimError
from ragtrim.inputs import coerce_history
from ragtrim.models import Message
from ragtrim.stopwords import CONVERSATION_STOPWORDS
from ragtrim.text import normalize_text, split_sentences
from ragtrim.tokens import TokenCounter, get_counter

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
_LABEL_OF_KIND: dict[str, str] = {
    "preference": "Preferences",
    "constraint": "Constraints",
    "goal": "Goals and plans",
    "decision": "Decisions and commitments",
    "fact": "Facts",
    "question": "Open questions",
}
STATE_HEADER = "Earlier in the conversation:"


# ---------------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------------
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
class HistoryResult:
    """What ``compress_history`` returns: the new state, the verbatim recent turns and the budgeted text block.

    ``folded_turn_ids`` are the turns folded into the state by this call; ``dropped_items`` the state items left
    out of ``state_text`` to meet the budget (they stay in ``state``).
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
            lines.append(f"{_LABEL_OF_KIND[kind]}:")
            lines.extend(it.line() for it in group)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# Summarizers
# ---------------------------------------------------------------------------------------------------------------------
@runtime_checkable
class Summarizer(Protocol):
    """Turns a batch of turns to fold into state items. It sees only those turns, never the state text."""

    def extract(self, turns: Sequence[Message]) -> list[StateItem]: ...



_GREETING = re.compile(
    r"^(hi+|hey+|hello|hiya|yo|howdy|good (morning|afternoon|evening|night)|(good)?bye|see (you|ya)|talk (to you )?"
    r"(soon|later)|take care|catch you|have a (good|great|nice)|nice (to|talking|chatting)|great (to|talking|chatting)"
    r"|good (to|talking|chatting)|long time|how (are|have) you|how's it going|what's up|whats up|sup)\b",
    re.IGNORECASE,
)
_THANKS = re.compile(r"\b(thanks|thank you|thx|ty|appreciate (it|that|you))\b", re.IGNORECASE)
_JOKE = re.compile(r"\b(haha+|hehe+|lol|lmao|rofl|jk|just kidding)\b|[\U0001F602\U0001F923]", re.IGNORECASE)
_REACTION = re.compile(
    r"^(that'?s|that is|this is|it'?s|sounds|looks|you'?re|you are|what a|how|so|congrat\w*|good luck|awesome|great|"
    r"amazing|cool|nice|wow|aw+|oh|glad|sorry|i'?m (so )?(happy|glad|sorry|proud)|i bet|i hope you|you (should|must)"
    r"|keep (it|up)|go for it|way to go|you got this|same here|me too|agreed|exactly|totally|absolutely|for sure)\b",
    re.IGNORECASE,
)
_INTERJECTION = re.compile(
    r"^((wow|oh|ah|aw+|ooh|yeah|yes|yep|yup|no|nope|well|so|haha+|hehe|lol|hey|hi|hmm+|okay|ok|omg|gosh|man|dude|"
    r"honestly|totally|absolutely|definitely|sure|cool|awesome|great|nice|thanks|thank you|anyway|btw|by the way|"
    r"actually|also|and|but|plus|right|true|yay|woah|whoa|hahaha)\b[,!.:;\s-]*)+",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(i|we)\s+(really\s+|absolutely\s+|totally\s+|just\s+|also\s+|still\s+)?(like|love|prefer|hate|dislike|enjoy|"
    r"adore|can'?t stand|don'?t like|do not like|am into|'?m into|am a (big )?fan|'?m a (big )?fan|am passionate|"
    r"'?m passionate|am obsessed|'?m obsessed)\b|\bmy (favou?rite|fave)\b|\bi'?d rather\b|\bi'?m (a )?(vegan|vegetarian)\b",
    re.IGNORECASE,
)
_CONSTRAINT = re.compile(
    r"\b(i|we)\s+(can'?t|cannot|can not|don'?t eat|do not eat|must|must not|have to|need to|shouldn'?t|am allergic|"
    r"'?m allergic)\b|\b(no more than|at most|at least|budget|deadline|allergic|only on|not before|not after|by "
    r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|next))\b",
    re.IGNORECASE,
)
_GOAL = re.compile(
    r"\b(i|we)('?m| am| are|'re)\s+(planning|going to|gonna|hoping|trying|thinking (of|about)|looking (to|for|into)|"
    r"working on|aiming|saving|about to|considering)\b|\b(i|we)\s+(plan|want|wanna|hope|intend|aim|would like|'d like)"
    r"\b|\bmy (goal|plan|dream|aim|next step)\b|\bhelp me\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(i|we)\s+(('ve|have)\s+)?(decided|agreed|chose|chosen|committed|promise|signed up|booked|registered|enrolled)"
    r"\b|\b(i|we)('ll| will| shall)\b|\blet'?s\b|\bi'?m going with\b|\bwe'?re going with\b|\bdeal\b",
    re.IGNORECASE,
)
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_TIME = re.compile(
    rf"\b(\d[\d,.:/%]*|({_MONTHS})|({_WEEKDAYS})|yesterday|tomorrow|tonight|today|last (week|month|year|weekend|night)"
    r"|next (week|month|year|weekend)|this (week|month|year|weekend)|(a|one|two|three|few|couple of) (days?|weeks?|"
    r"months?|years?) ago|ago|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred|"
    r"thousand|million|first|second|third|weekend|summer|winter|spring|autumn|fall|christmas|birthday)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d[\d,.:/%]*")
_CAPITALIZED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z'’-]+|[A-Z]{2,})\b")
_NOT_ENTITY = frozenset({"I", "I'm", "I've", "I'd", "I'll", "OK", "Ok", "Oh", "Wow", "Hey", "Yeah", "Haha", "Lol",
                         "OMG", "LOL", "Mr", "Mrs", "Ms", "Dr"})
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|my|me|we|we're|we've|our|us|mine)\b", re.IGNORECASE)
# Clause delimiters with the whitespace around them. A match starts at the first blank of a run, or right at a ";"
# or "," when the previous match took the blanks before it: the plain leading ``\s*`` was retried from every blank of
# a long run (20,000 spaces in one turn took 15 s). Same splits as ``\s*(?:;|\s[-–—]\s|,\s+(?:but|so|and then)\s+)\s*``.
_CLAUSE_SPLIT = re.compile(
    r"(?<!\s)\s*(?:;|\s[-–—]\s|,\s+(?:but|so|and then)\s+)\s*|(?<=\s)(?:;|,\s+(?:but|so|and then)\s+)\s*"
)

_KIND_BONUS = {"preference": 2.0, "constraint": 2.0, "goal": 1.5, "decision": 1.5, "fact": 0.0, "question": 0.5}


def content_words(text: str) -> list[str]:
    """Lower-case words of ``text`` that carry content (not stopwords, at least 3 letters; numbers always count)."""
    out = []
    for w in _WORD.findall(text):
        lw = w.lower().replace("’", "'").strip("'-")
        norm = lw.replace("'", "")
        if lw[:1].isdigit() or (len(norm) >= 3 and norm not in CONVERSATION_STOPWORDS):
            out.append(lw)
    return out


def named_facts(text: str) -> list[str]:
    """Capitalized names (not sentence-initial, not "I"), numbers, dates and time expressions in ``text``."""
    names = [m.group(1) for m in _CAPITALIZED.finditer(text) if m.group(1) not in _NOT_ENTITY]
    times = [m.group(0) for m in _TIME.finditer(text)]
    return names + times


def _classify(clause: str, is_question: bool) -> StateKind:
    if is_question:
        return "question"
    if _PREFERENCE.search(clause):
        return "preference"
    if _CONSTRAINT.search(clause):
        return "constraint"
    if _DECISION.search(clause):
        return "decision"
    if _GOAL.search(clause):
        return "goal"
    return "fact"


def _is_small_talk(sentence: str) -> bool:
    s = sentence.strip()
    if _GREETING.match(s) and len(content_words(s)) <= 4:
        return True
    if _THANKS.search(s) and len(content_words(s)) <= 5:
        return True
    return bool(_JOKE.search(s)) and len(content_words(s)) <= 5


@register("summarizer", "rule_based")
@component
class RuleBasedSummarizer(Component):
    """The offline default: keeps clauses with named facts, preferences, constraints, goals, decisions and open
    questions; drops greetings, thanks, jokes and reactions. Deterministic and per-turn, so increments equal a
    from-scratch run.

    Rules, per sentence of each turn: small talk (greetings, thanks, laughter, with few content words) is dropped;
    leading interjections ("Wow,", "Yeah,") are cut; the sentence is split at ``;``, dashes and ", but/so"; a clause
    is kept if it has a named fact (a capitalized non-initial word, a number, a date or time phrase), matches a
    preference/constraint/goal/decision pattern, or is a first-person statement with at least ``min_content_words``
    content words; reactions ("That's awesome!") without such a signal are dropped. Questions become ``question``
    items when they carry a named fact or at least ``min_content_words`` content words.
    ``score`` = (named facts + kind bonus + 0.5 for first person) / (1 + content words / 10).
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "min_content_words": [Interval(int, 0, None)],
        "max_item_words": [Interval(int, 3, None)],
    }

    min_content_words: int = 3
    max_item_words: int = 40

    def extract(self, turns: Sequence[Message]) -> list[StateItem]:
        items: list[StateItem] = []
        for turn in turns:
            items.extend(self.extract_turn(turn))
        return items

    def extract_turn(self, turn: Message) -> list[StateItem]:
        items: list[StateItem] = []
        for sentence in split_sentences(turn.content):
            if _is_small_talk(sentence):
                continue
            body = _INTERJECTION.sub("", sentence).strip()
            if not body:
                continue
            is_question = body.endswith("?")
            clauses = [c.strip(" ,") for c in _CLAUSE_SPLIT.split(body) if c.strip(" ,")]
            for clause in clauses:
                item = self._clause_item(clause, is_question and clause is clauses[-1], turn)
                if item is not None:
                    items.append(item)
        return items

    def _clause_item(self, clause: str, is_question: bool, turn: Message) -> StateItem | None:
        clause = _INTERJECTION.sub("", clause).strip(" ,")
        if not clause:
            return None
        words = content_words(clause)
        facts = named_facts(clause)
        kind = _classify(clause, is_question)
        first_person = bool(_FIRST_PERSON.search(clause))
        patterned = kind in ("preference", "constraint", "goal", "decision")
        if is_question:
            if not facts and len(words) < self.min_content_words:
                return None
        elif not facts and not patterned:
            if not first_person or len(words) < self.min_content_words or _REACTION.match(clause):
                return None
        elif not facts and _REACTION.match(clause) and len(words) < self.min_content_words:
            return None
        if _REACTION.match(clause) and not first_person and not facts:
            return None
        tokens = clause.split()
        if len(tokens) > self.max_item_words:
            clause = " ".join(tokens[: self.max_item_words]) + " …"
        text = clause[0].upper() + clause[1:] if clause[0].islower() else clause
        text = text.rstrip(" !.")
        if is_question and not text.endswith("?"):
            text += "?"
        score = (len(facts) + _KIND_BONUS[kind] + (0.5 if first_person else 0.0)) / (1.0 + len(words) / 10.0)
        return StateItem(text=text, kind=kind, turn_ids=(turn.turn_id,), role=turn.role, score=round(score, 4))


@register("summarizer", "scripted")
@component
class ScriptedSummarizer(Component):
    """A fake for tests and demos: returns the items scripted for each turn id, and records every call.

    ``script`` maps a turn id to ``(kind, text)`` pairs; turns not in it give nothing. ``calls`` lists the turn ids
    of every batch it was asked about, so a test can check that nothing was folded twice.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "script": [InstanceOf(Mapping, "a dict of turn id -> [(kind, text)]")],
    }

    script: Mapping[str, Sequence[tuple[str, str]]]
    calls: list[tuple[str, ...]] = field(default_factory=list, init=False)

    def _check_params(self) -> None:
        for turn_id, pairs in self.script.items():
            for pair in pairs:
                if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and pair[0] in STATE_KINDS):
                    raise ConfigError(
                        f"script[{turn_id!r}] entries must be (kind, text) with kind in {STATE_KINDS}, got {pair!r}"
                    )

    def extract(self, turns: Sequence[Message]) -> list[StateItem]:
        self.calls.append(tuple(t.turn_id for t in turns))
        return [
            StateItem(text=text, kind=kind, turn_ids=(t.turn_id,), role=t.role)  # type: ignore[arg-type]
            for t in turns
            for kind, text in self.script.get(t.turn_id, ())
        ]


_LLM_PROMPT = """You maintain the memory of a conversation. From the turns below, extract only what a later answer may
need: the speakers' preferences and constraints, goals or tasks, decisions and commitments, named facts (names,
dates, numbers, places, events) and questions still open. Skip greetings, thanks, jokes and small talk. Keep each
item short (one clause) and self-contained (resolve "it"/"there" to the named thing).
Answer with a JSON array only, each element {"kind": one of %s, "text": "...", "role": speaker, "turn_ids": [...]}.

Turns:
%s"""

PostFn = Callable[[str, bytes, Mapping[str, str], float], bytes]
"""``post(url, body, headers, timeout_s) -> response body``: the transport, swappable in tests."""


def _urllib_post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> bytes:
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        data: bytes = response.read()
        return data


@register("summarizer", "openai_compatible")
@component
class OpenAICompatibleSummarizer(Component):
    """An LLM extractor that calls an OpenAI-compatible ``/chat/completions`` endpoint (vLLM, llama.cpp server,
    OpenAI) with the standard library only. One request per batch of folded turns.

    Increments equal a from-scratch run only if the model is deterministic and batches are the same; the state
    text is never sent, so the model never summarizes its own summary. ``to_dict`` describes it (without the API
    key), but a config never builds it: a config is data, and this would send conversation text to a URL.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "base_url": [Satisfies(lambda v: isinstance(v, str) and v.startswith(("http://", "https://")),
                               "an http(s) URL like 'http://localhost:8000/v1'", invalid="localhost:8000")],
        "model": [Text("a non-empty str (the served model name)")],
        "api_key": [Text("a str", allow_empty=True), None],
        "timeout_s": [Interval(float, 0.0, None, closed="right")],
        "max_output_tokens": [Interval(int, 1, None)],
        "temperature": [Interval(float, 0.0, None)],
        "post": [Satisfies(callable, "a function post(url, body, headers, timeout_s) -> bytes", invalid=5), None],
    }
    _secret_params: ClassVar[frozenset[str]] = frozenset({"api_key"})
    _not_from_config: ClassVar[str] = "it sends conversation text to the URL it names"

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0
    max_output_tokens: int = 1024
    temperature: float = 0.0
    post: PostFn | None = None

    def request_body(self, turns: Sequence[Message]) -> dict[str, Any]:
        lines = "\n".join(f"[{m.turn_id}] {m.role}: {m.content}" for m in turns)
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": _LLM_PROMPT % (list(STATE_KINDS), lines)}],
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
        }

    def extract(self, turns: Sequence[Message]) -> list[StateItem]:
        if not turns:
            return []
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = json.dumps(self.request_body(turns)).encode("utf-8")
        try:
            raw = (self.post or _urllib_post)(url, body, headers, self.timeout_s)
        except (urllib.error.URLError, OSError) as exc:
            raise RagtrimError(f"summarizer request to {url} failed: {exc}; is the server running?") from exc
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise InputError(f"summarizer response from {url} is not a chat completion: {raw[:200]!r}") from exc
        return parse_llm_items(content, turns)


def parse_llm_items(content: str, turns: Sequence[Message]) -> list[StateItem]:
    """Parse the model's JSON array into items; elements with an unknown kind or no text are skipped, turn ids not in
    the batch are dropped (an item citing none gets the batch's last turn)."""
    start, end = content.find("["), content.rfind("]")
    if start < 0 or end <= start:
        raise InputError(f"summarizer output has no JSON array: {content[:200]!r}")
    try:
        data = json.loads(content[start : end + 1])
    except ValueError as exc:
        raise InputError(f"summarizer output is not valid JSON ({exc}): {content[:200]!r}") from None
    known = {m.turn_id: m for m in turns}
    items: list[StateItem] = []
    for element in data if isinstance(data, list) else []:
        if not isinstance(element, Mapping):
            continue
        kind, text = element.get("kind"), element.get("text")
        if kind not in STATE_KINDS or not isinstance(text, str) or not text.strip():
            continue
        ids = tuple(str(t) for t in element.get("turn_ids", ()) if str(t) in known) or (turns[-1].turn_id,)
        role = element.get("role")
        role = role if isinstance(role, str) else known[ids[0]].role
        items.append(StateItem(text=text.strip(), kind=kind, turn_ids=ids, role=role))
    return items


# ---------------------------------------------------------------------------------------------------------------------
# compress_history
# ---------------------------------------------------------------------------------------------------------------------
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
            cost += counter.count(_LABEL_OF_KIND[it.kind] + ":") + 1
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
    if to_fold:
        extracted = summarizer.extract(to_fold)
        if not isinstance(extracted, list) or not all(isinstance(it, StateItem) for it in extracted):
            raise InputError("summarizer.extract must return a list of StateItem")
        items, next_seq = _merge(items, extracted, to_fold, next_seq)
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
    )

