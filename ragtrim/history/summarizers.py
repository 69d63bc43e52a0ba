"""Summarizers for conversation history: what turns a batch of folded turns into state items.

``RuleBasedSummarizer`` is the offline, deterministic default (``ragtrim.testing.ScriptedSummarizer`` is the fake);
``OpenAICompatibleSummarizer`` asks an LLM behind an OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
import re
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from ragtrim._util.validate import Constraints, Interval, Satisfies, Text
from ragtrim.components import Component, component, register
from ragtrim.errors import InputError, RagtrimError
from ragtrim.history import cjk
from ragtrim.history.state import STATE_KINDS, StateItem, StateKind
from ragtrim.models import Message
from ragtrim.text.sentences import split_sentences
from ragtrim.text.stopwords import CONVERSATION_STOPWORDS


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
            if cjk.is_cjk_sentence(sentence):
                items.extend(self._cjk_items(sentence, turn))
                continue
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


    def _cjk_items(self, text: str, turn: Message) -> list[StateItem]:
        """Items of a Korean, Japanese or Chinese sentence (``ragtrim.history.cjk``): kept when a clause has a kind or
        a named fact (no content-word test: text without spaces has no words); questions need a fact or 8 characters.
        """
        items: list[StateItem] = []
        max_chars = 2 * self.max_item_words  # a Han/Kana character is about half an English word
        for sentence in cjk.sentences(text):
            if cjk.is_small_talk(sentence):
                continue
            body = cjk.strip_interjection(sentence)
            question = cjk.is_question(body)
            for clause in cjk.clauses(body):
                kind = "question" if question else cjk.classify(clause)
                facts = cjk.named_facts(clause)
                if not facts and (kind == "fact" or (kind == "question" and len(clause) < 8)):
                    continue
                item_text = clause.rstrip(" .。!！")
                if len(item_text) > max_chars:
                    item_text = item_text[:max_chars] + " …"
                if question and not item_text.endswith(("?", "？")):
                    item_text += "?"
                first_person = cjk.has_first_person(clause)
                score = (len(facts) + _KIND_BONUS[kind] + (0.5 if first_person else 0.0)) / (1.0 + len(clause) / 25.0)
                items.append(StateItem(text=item_text, kind=cast(StateKind, kind), turn_ids=(turn.turn_id,),
                                       role=turn.role, score=round(score, 4)))
        return items

    def why_empty(self, turn: Message) -> str:
        """Why ``extract_turn`` found nothing in ``turn`` (for the history fold's notes): small talk, a script these
        rules do not read, or no signal."""
        text = turn.content.strip()
        if not text:
            return "empty"
        script = _unread_script(text)
        if script:
            return f"no rules for its script ({script})"
        parts = [s for s in split_sentences(text) for s in (cjk.sentences(s) if cjk.is_cjk_sentence(s) else [s])]
        if parts and all(cjk.is_small_talk(s) if cjk.is_cjk_sentence(s) else _is_small_talk(s) for s in parts):
            return "small talk"
        return "no fact, preference, constraint, goal, decision or question found"


def _unread_script(text: str) -> str:
    """The script most letters of ``text`` are written in when the rules read neither it (Latin and CJK are read),
    else ""."""
    counts: dict[str, int] = {}
    for ch in text[:400]:
        if ch.isalpha() and not ch.isascii():
            name = unicodedata.name(ch, "")
            script = name.split(" ")[0] if name else ""
            counts[script] = counts.get(script, 0) + 1
    letters = sum(ch.isalpha() for ch in text[:400])
    if not counts or not letters:
        return ""
    script, n = max(counts.items(), key=lambda kv: kv[1])
    read = {"LATIN", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "HALFWIDTH", "FULLWIDTH"}
    return script.lower() if 2 * n >= letters and script not in read else ""


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
