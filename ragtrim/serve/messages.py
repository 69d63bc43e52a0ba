"""The rules a chat message must meet before the gateway forwards it, as OpenAI's API states them: a message the
upstream would refuse (or, worse, take and answer from nothing) is a 400 that names its index and the rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NEEDS_CONTENT = frozenset({"system", "developer", "user", "tool", "function"})
"""Roles whose message must carry ``content``: a string, or an array of content parts."""
CONTENT_OPTIONAL_WITH = ("tool_calls", "function_call", "audio")
"""An assistant message may leave ``content`` out (or null) when it carries one of these instead."""

Problem = tuple[str, str, str]  # (message, param, OpenAI code)


def message_problem(i: int, m: Mapping[str, Any]) -> Problem | None:
    """What is wrong with ``messages[i]`` (already known to be an object with a string ``role``), or None. Roles
    other than OpenAI's are left to the upstream (vLLM's chat templates take custom roles)."""
    role = m["role"]
    where = f"messages[{i}]"
    content = m.get("content")
    if content is None:
        if role in NEEDS_CONTENT:
            missing = "has no 'content'" if "content" not in m else "has 'content': null"
            return ((f"{where} (role '{role}') {missing}: a {role} message needs 'content', a string or an array "
                    "of content parts"), f"{where}.content", "missing_required_parameter")
        if role == "assistant" and not any(k in m for k in CONTENT_OPTIONAL_WITH):
            return ((f"{where} (role 'assistant') has neither 'content' nor 'tool_calls': an assistant message needs "
                    "one of them"), f"{where}.content", "missing_required_parameter")
    elif isinstance(content, list):
        if not content and role in NEEDS_CONTENT:
            return (f"{where}.content is an empty array: a {role} message needs at least one content part",
                    f"{where}.content", "invalid_value")
        for j, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                return ((f"{where}.content[{j}] must be an object with a string 'type' (a content part such as "
                        '{"type": "text", "text": "..."})'), f"{where}.content[{j}]", "invalid_type")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                return (f"{where}.content[{j}] is a text part without a string 'text'", f"{where}.content[{j}].text",
                        "invalid_type")
    elif not isinstance(content, str):
        return (f"{where}.content must be a string or an array of content parts, got {type(content).__name__}",
                f"{where}.content", "invalid_type")
    if role == "tool" and not isinstance(m.get("tool_call_id"), str):
        return (f"{where} (role 'tool') needs a string 'tool_call_id': the id of the tool call it answers",
                f"{where}.tool_call_id", "missing_required_parameter")
    if role == "function" and not isinstance(m.get("name"), str):
        return (f"{where} (role 'function') needs a string 'name': the function whose result it carries",
                f"{where}.name", "missing_required_parameter")
    return None
