"""The golden set: questions with their documents (or full messages), accepted answers, whether they can be answered,
an optional JSON Schema for the answer and tags for slicing; read from and written to JSONL.

One item a line::

    {"id": "q1", "question": "Who designed the tower?", "documents": ["...", {"title": "...", "text": "..."}],
     "answers": ["Gustave Eiffel"], "answerable": true, "schema": {...}, "tag": "landmarks"}

``messages`` (an OpenAI chat list) may replace or accompany ``question``; ``instruction`` replaces the default
instruction; ``options`` (``max_tokens``, ``response_format``, ...) go into every arm's request for the item;
``meta`` holds anything else. An item with no ``answers`` that is answerable is judged against the baseline arm's
answer (agreement), as items built from a request log are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragtrim._util.jsonl import iter_jsonl
from ragtrim.errors import ConfigError, InputError
from ragtrim.gate.schema import check_schema
from ragtrim.openai_text import document_text, text_of

KEYS = frozenset({"id", "question", "documents", "messages", "answers", "answerable", "schema", "answer_field",
                  "tag", "tags", "instruction", "options", "meta"})
Reference = Literal["gold", "baseline"]


def _freeze(value: Any) -> Any:
    """A deep copy through JSON, so an item never shares a list or dict with its caller."""
    return json.loads(json.dumps(value))


@dataclass(frozen=True, kw_only=True)
class GoldenItem:
    """One question of the golden set. ``documents`` are texts (a ``{"title", "text"}`` object becomes
    ``"title\\ntext"``, as the gateway renders it); ``messages``, when given, is the chat the arms receive (the
    documents, if any, go before the last user message's text); ``question`` is what the answer is about (default:
    the last user message). ``answerable=False`` items are answered right by a refusal. ``schema`` is the JSON
    Schema the reply must follow (``answer_field`` of the reply's object is then the answer). ``line`` is where the
    item was read (0: built in code)."""

    id: str
    question: str = ""
    documents: tuple[str, ...] = ()
    messages: tuple[Mapping[str, Any], ...] | None = None
    answers: tuple[str, ...] = ()
    answerable: bool = True
    schema: Mapping[str, Any] | None = None
    answer_field: str = "answer"
    tags: tuple[str, ...] = ()
    instruction: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0

    def __post_init__(self) -> None:
        where = f"golden item {self.id!r}"
        if not isinstance(self.id, str) or not self.id.strip():
            raise ConfigError(f"a golden item needs a non-empty string 'id', got {self.id!r}")
        if self.messages is not None:
            if not self.messages or not all(isinstance(m, Mapping) and isinstance(m.get("role"), str)
                                            for m in self.messages):
                raise ConfigError(f"{where}: 'messages' must be a non-empty list of {{'role', 'content'}} objects")
            if not any(m.get("role") == "user" for m in self.messages):
                raise ConfigError(f"{where}: 'messages' needs a user message (the question)")
            object.__setattr__(self, "messages", tuple(_freeze(dict(m)) for m in self.messages))
            if not self.question:
                last = [m for m in self.messages if m.get("role") == "user"][-1]
                object.__setattr__(self, "question", text_of(last.get("content")))
        if not isinstance(self.question, str) or not self.question.strip():
            raise ConfigError(f"{where}: give a non-empty 'question' or 'messages' with a user message")
        if not all(isinstance(d, str) for d in self.documents):
            raise ConfigError(f"{where}: documents must be texts")
        if not all(isinstance(a, str) for a in self.answers):
            raise ConfigError(f"{where}: 'answers' must be a list of strings")
        if not isinstance(self.answerable, bool):
            raise ConfigError(f"{where}: 'answerable' must be true or false, got {self.answerable!r}")
        if not self.answerable and self.answers:
            raise ConfigError(f"{where}: an unanswerable item accepts only a refusal, so it has no 'answers' "
                              f"(got {list(self.answers)!r}); drop them or set answerable to true")
        if self.schema is not None:
            check_schema(self.schema, f"{where}: schema")
            object.__setattr__(self, "schema", _freeze(dict(self.schema)))
        if not isinstance(self.answer_field, str) or not self.answer_field:
            raise ConfigError(f"{where}: 'answer_field' must be a non-empty string, got {self.answer_field!r}")
        if not all(isinstance(t, str) and t for t in self.tags):
            raise ConfigError(f"{where}: tags must be non-empty strings, got {list(self.tags)!r}")
        if self.instruction is not None and not isinstance(self.instruction, str):
            raise ConfigError(f"{where}: 'instruction' must be a string")
        for name in ("options", "meta"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: '{name}' must be an object, got {type(value).__name__}")
            object.__setattr__(self, name, _freeze(dict(value)))
        if any(k in self.options for k in ("messages", "prompt", "model", "stream")):
            raise ConfigError(f"{where}: 'options' may not set messages, prompt, model or stream (the arm does)")

    @property
    def reference(self) -> Reference:
        """``gold``: judged against ``answers`` (or as a refusal); ``baseline``: against the baseline arm's reply."""
        return "gold" if self.answers or not self.answerable else "baseline"

    def fingerprint(self) -> str:
        """A hash of everything that shapes the request and its judgement; a stored result of the same item id with
        another fingerprint belongs to an older version of the item and is not reused."""
        payload = {k: v for k, v in to_dict(self).items() if k not in ("id", "tags", "meta")}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def documents_of(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(f"{where}: 'documents' must be a list of strings or {{'title', 'text'}} objects")
    out = []
    for i, d in enumerate(raw):
        text = document_text(dict(d) if isinstance(d, Mapping) else d)
        if text is None:
            raise InputError(f"{where}: documents[{i}] must be a string or an object with a string 'text'")
        if text.strip():
            out.append(text.strip())
    return tuple(out)


def _strings(raw: Any, key: str, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        return tuple(raw)
    raise InputError(f"{where}: '{key}' must be a string or a list of strings, got {raw!r}")


def item_from_dict(obj: Any, *, line: int = 0, where: str = "golden item") -> GoldenItem:
    """One golden item from its JSON object (``id`` defaults to ``line-<n>``); errors name ``where``."""
    if not isinstance(obj, Mapping):
        raise InputError(f"{where} must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                         f"(known: {', '.join(sorted(KEYS))}; put other data under 'meta')")
    answers = _strings(obj.get("answers"), "answers", where)
    answerable = obj.get("answerable", True)
    messages = obj.get("messages")
    if messages is not None and not isinstance(messages, list):
        raise InputError(f"{where}: 'messages' must be a list of message objects")
    try:
        return GoldenItem(
            id=str(obj["id"]) if obj.get("id") is not None else f"line-{line}",
            question=obj.get("question") or "",
            documents=documents_of(obj.get("documents"), where),
            messages=tuple(messages) if messages is not None else None,
            answers=answers,
            answerable=answerable,
            schema=obj.get("schema"),
            answer_field=obj.get("answer_field", "answer"),
            tags=_strings(obj.get("tag"), "tag", where) + _strings(obj.get("tags"), "tags", where),
            instruction=obj.get("instruction"),
            options=obj.get("options") or {},
            meta=obj.get("meta") or {},
            line=line,
        )
    except ConfigError as exc:
        raise InputError(f"{where}: {exc}") from None


def load_golden(path: str | Path) -> list[GoldenItem]:
    """Every item of a golden-set JSONL file (``.gz`` too); a bad line or a repeated id raises ``InputError`` naming
    the file and the line. An empty file gives an empty list."""
    items: list[GoldenItem] = []
    seen: dict[str, int] = {}
    for line, obj in iter_jsonl(path, what="golden set"):
        item = item_from_dict(obj, line=line, where=f"{path}:{line}")
        if item.id in seen:
            raise InputError(f"{path}:{line}: id {item.id!r} is already used at line {seen[item.id]}; ids must be "
                             "unique (results are matched to items by id)")
        seen[item.id] = line
        items.append(item)
    return items


def to_dict(item: GoldenItem) -> dict[str, Any]:
    """The item as its JSONL object (defaults left out)."""
    out: dict[str, Any] = {"id": item.id, "question": item.question}
    if item.messages is not None:
        out["messages"] = [dict(m) for m in item.messages]
    if item.documents:
        out["documents"] = list(item.documents)
    out["answers"] = list(item.answers)
    if not item.answerable:
        out["answerable"] = False
    if item.schema is not None:
        out["schema"] = item.schema
    if item.answer_field != "answer":
        out["answer_field"] = item.answer_field
    if item.tags:
        out["tags"] = list(item.tags)
    if item.instruction is not None:
        out["instruction"] = item.instruction
    if item.options:
        out["options"] = dict(item.options)
    if item.meta:
        out["meta"] = dict(item.meta)
    return out


def write_golden(items: Iterable[GoldenItem], path: str | Path) -> int:
    """Write ``items`` as JSONL; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for item in items:
            out.write(json.dumps(to_dict(item), ensure_ascii=False) + "\n")
            n += 1
    return n


def summary(items: Sequence[GoldenItem]) -> dict[str, Any]:
    """Counts for the report: items, answerable and not, with a schema, judged by agreement, tags."""
    tags: dict[str, int] = {}
    for item in items:
        for t in item.tags:
            tags[t] = tags.get(t, 0) + 1
    return {
        "items": len(items),
        "answerable": sum(i.answerable for i in items),
        "unanswerable": sum(not i.answerable for i in items),
        "with_schema": sum(i.schema is not None for i in items),
        "judged_by_agreement": sum(i.reference == "baseline" for i in items),
        "tags": dict(sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
