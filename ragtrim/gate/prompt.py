"""The request each arm gets for a golden item: the instruction, the documents (trimmed on the client side when the
arm says so) rendered before the question as the gateway renders them, or sent in the ``documents`` field, and the
options of the defaults, the item and the arm, in that order of precedence.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtrim.gate.arms import DEFAULT_OPTIONS, Arm, TrimSpec
from ragtrim.gate.golden import GoldenItem
from ragtrim.openai_text import text_of
from ragtrim.serve.render import render_documents

TEXT_INSTRUCTION = ("Answer the question using only the documents. Reply with the answer alone, in as few words as "
                    "possible. If the documents do not answer the question, reply: unanswerable")
JSON_INSTRUCTION = ("Answer the question using only the documents. Reply with one JSON object and nothing else, "
                    "following this JSON Schema: {schema}")
QUESTION_PREFIX = "Question: "


def instruction_for(item: GoldenItem) -> str:
    """The item's own instruction, else the default one for plain or JSON answers."""
    if item.instruction is not None:
        return item.instruction
    if item.schema is None:
        return TEXT_INSTRUCTION
    text = JSON_INSTRUCTION.format(schema=json.dumps(item.schema, separators=(",", ":"), ensure_ascii=False))
    field_schema = (item.schema.get("properties") or {}).get(item.answer_field)
    if isinstance(field_schema, Mapping):
        allowed = field_schema.get("type")
        allows_null = allowed == "null" or (isinstance(allowed, list) and "null" in allowed)
        text += (f'. Put the answer, in as few words as possible, in "{item.answer_field}"'
                 + (f'; if the documents do not answer the question, set "{item.answer_field}" to null'
                    if allows_null else '; if the documents do not answer the question, put "unanswerable" there'))
    return text


@dataclass(frozen=True, slots=True)
class Trimmed:
    """The documents after the client-side trim, with their token counts and the trim's time."""

    documents: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    trim_ms: float


def trim_documents(documents: Sequence[str], query: str, spec: TrimSpec) -> Trimmed:
    """ragtrim's default pipeline over ``documents`` at the spec's budget (the gateway's trim, on the client side)."""
    from ragtrim.api import default_pipeline
    from ragtrim.text.tokens import get_counter

    started = time.perf_counter()
    counter = get_counter(spec.tokenizer)
    before = sum(counter.count(d) for d in documents)
    budget = spec.budget_for(before)
    if not documents or budget >= before:
        return Trimmed(tuple(documents), before, before, (time.perf_counter() - started) * 1000)
    pipeline = default_pipeline(budget=budget, tokenizer=counter, scorer=spec.scorer)  # type: ignore[arg-type]
    result = pipeline.run(list(documents), query=query)
    return Trimmed(tuple(c.text for c in result.chunks), result.tokens_before, result.tokens_after,
                   (time.perf_counter() - started) * 1000)


def _with_documents(messages: list[dict[str, Any]], documents: Sequence[str]) -> list[dict[str, Any]]:
    """The documents' block before the last user message's text, as the gateway places it."""
    if not documents:
        return messages
    block = render_documents(documents)
    i = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    m = messages[i]
    content = m.get("content")
    if isinstance(content, list):
        new: Any = [{"type": "text", "text": block}, *content]
    else:
        question = content if isinstance(content, str) else ""
        new = f"{block}\n\n{question}" if question else block
    return [*messages[:i], {**m, "content": new}, *messages[i + 1:]]


def build_messages(item: GoldenItem, documents: Sequence[str], *, in_field: bool) -> list[dict[str, Any]]:
    """The chat messages for ``item`` with ``documents`` rendered in (or left for the ``documents`` field)."""
    if item.messages is not None:
        messages = [dict(m) for m in item.messages]
        if item.instruction is not None:
            messages = [{"role": "system", "content": item.instruction}, *messages]
    else:
        messages = [{"role": "system", "content": instruction_for(item)},
                    {"role": "user", "content": QUESTION_PREFIX + item.question}]
    return messages if in_field else _with_documents(messages, documents)


def completion_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    """A plain prompt for the completions endpoint: the instruction, the user's text, then ``Answer:``; earlier
    turns as ``role: text`` lines."""
    lines = []
    for m in messages:
        text = text_of(m.get("content"))
        lines.append(text if m.get("role") in ("system", "user") else f"{m.get('role')}: {text}")
    return "\n\n".join(lines) + "\nAnswer:"


def build_body(item: GoldenItem, arm: Arm, documents: Sequence[str]) -> dict[str, Any]:
    """The request body (without ``stream``) that ``arm`` gets for ``item`` with these (maybe trimmed) documents."""
    in_field = arm.documents == "field"
    messages = build_messages(item, documents, in_field=in_field)
    defaults = dict(DEFAULT_OPTIONS)
    if "max_completion_tokens" in item.options or "max_completion_tokens" in arm.options:
        defaults.pop("max_tokens", None)  # one limit, the caller's
    body: dict[str, Any] = {**defaults, **item.options, **arm.options, "model": arm.model}
    if arm.endpoint == "chat":
        body["messages"] = messages
        if in_field and documents:
            body["documents"] = list(documents)
    else:
        body["prompt"] = completion_prompt(messages)
    return body
