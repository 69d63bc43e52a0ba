"""The text of OpenAI-format requests, read the same way by the gateway (``ragtrim serve``), the audit
(``ragtrim audit``) and the gate (``ragtrim gate``): message text, retrieved context inside
``<context>...</context>`` blocks, and the entries of a ``documents`` list.

Standard library only, so the audit needs no serve extra.
"""

from __future__ import annotations

import re
from typing import Any

TOKENS_PER_MESSAGE = 4
"""OpenAI's accounting: framing tokens around every message of a chat request."""
TOKENS_PER_REPLY = 3
"""OpenAI's accounting: tokens that prime the reply of a chat request."""

_CONTEXT_RES: dict[str, re.Pattern[str]] = {}


def context_re(tag: str) -> re.Pattern[str]:
    """The pattern of one ``<tag>...</tag>`` block (case-insensitive, across lines); group 1 is its content."""
    pattern = _CONTEXT_RES.get(tag)
    if pattern is None:
        pattern = re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL | re.IGNORECASE)
        _CONTEXT_RES[tag] = pattern
    return pattern


def extract_context(text: str, tag: str = "context") -> tuple[str, list[str]]:
    """Remove every ``<tag>...</tag>`` block from ``text``; return the rest and the blocks' chunks."""
    found: list[str] = []

    def take(match: re.Match[str]) -> str:
        found.extend(split_chunks(match.group(1)))
        return ""

    rest = context_re(tag).sub(take, text)
    return re.sub(r"\n{3,}", "\n\n", rest).strip(), found


def split_chunks(block: str) -> list[str]:
    """Chunks of a context block: paragraphs separated by blank lines."""
    return [p.strip() for p in re.split(r"\n\s*\n", block) if p.strip()]


def text_of(content: Any) -> str:
    """A message's text: the string itself, or its ``text`` parts joined by newlines (images and audio have none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    return ""


def document_text(item: Any) -> str | None:
    """The text of one entry of a ``documents`` list: a string, or an object with a string ``text`` (its ``title``,
    when a non-empty string, on the line before). None for any other shape: each caller says so in its own error."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        title = item.get("title")
        return f"{title}\n{item['text']}" if isinstance(title, str) and title else str(item["text"])
    return None
