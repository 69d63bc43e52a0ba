"""A request body's prompt cut into ``Segment``s, each in one part (system, history, context, question, other), in
the order the model sees them: chat messages (OpenAI and Anthropic content blocks, tools, documents), completions
prompts, templated prompts from a vLLM log, ragtrim's own requests. ``Skip`` is a malformed body, with its reason.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ragtrim.audit.formats import template_turns
from ragtrim.errors import InputError
from ragtrim.openai_text import TOKENS_PER_MESSAGE, TOKENS_PER_REPLY, split_chunks

Part = Literal["system", "history", "context", "question", "other"]
PARTS: tuple[Part, ...] = ("system", "history", "context", "question", "other")
"""Every prompt token belongs to exactly one part. ``other``: message framing (OpenAI's 4 tokens a message and 3 a
reply, as the gateway counts), tool definitions and function names."""

_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_ROLES = frozenset({"tool", "function", "ipython"})


class Segment(NamedTuple):
    """One piece of a prompt: a message's text, a document, a tool result. ``role`` is the message role (``""``
    for documents and definitions); ``source`` says where it came from (``message``, ``documents``, ``context_tag``,
    ``tool_result``, ``tool_call``, ``tools``, ``chunks``, ``prompt``). A named tuple: immutable, and a million of
    them are built several times faster than frozen dataclasses."""

    part: Part
    text: str
    role: str = ""
    source: str = "message"


class Skip(InputError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def describe(value: Any) -> str:
    """How a JSON value reads in an error: ``a number (42)``, ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return f"an object (keys {sorted(value)[:5]})"
    return f"a list of {len(value)}"


def templated_segments(prompt: str, tag: str) -> tuple[Segment, ...]:
    """A templated prompt cut into parts along its chat template's turns; the template's own text (special tokens,
    role headers) is ``other``. A prompt in no known template reads as a completions prompt."""
    name, pieces = template_turns(prompt)
    if name == "none":
        return tuple(completion_segments(prompt, tag))
    last_user = max((i for i, (role, text) in enumerate(pieces) if role == "user" and text.strip()), default=None)
    segments: list[Segment] = []
    for i, (role, text) in enumerate(pieces):
        if role is None:
            segments.append(Segment("other", text, "", "template"))
            continue
        part: Part = ("system" if role in _SYSTEM_ROLES else "context" if role in _TOOL_ROLES
                      else "question" if i == last_user else "history")
        if role in _TOOL_ROLES:
            segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(text))
        else:
            segments.extend(split_context(text, part, role, tag))
    return tuple(segments)


@functools.cache
def _tag_re(tag: str) -> re.Pattern[str]:
    """Opening and closing ``tag``s, the tag in any case. The leading literal ``<`` lets the regex engine jump from
    one ``<`` to the next; ``context_re``'s case-insensitive ``(.*?)`` steps through every character (25x slower)."""
    return re.compile("<(/?)(?i:" + re.escape(tag) + ")>")


def _blocks(text: str, tag: str) -> list[tuple[int, int, int, int]]:
    """(start, content start, content end, end) of each ``<tag>...</tag>`` block, as ``context_re`` finds them:
    an opening tag, then the first closing tag after it."""
    out = []
    opened = None
    for m in _tag_re(tag).finditer(text):
        if opened is None:
            if not m.group(1):
                opened = m
        elif m.group(1):
            out.append((opened.start(), opened.end(), m.start(), m.end()))
            opened = None
    return out


def split_context(text: str, part: Part, role: str, tag: str) -> list[Segment]:
    """``text`` cut at its ``<tag>`` blocks: the text around them keeps ``part``, the blocks' chunks are context."""
    blocks = _blocks(text, tag) if "<" in text else []
    if not blocks:
        return [Segment(part, text, role)] if text else []
    out: list[Segment] = []
    pos = 0
    for start, inner_start, inner_end, end in blocks:
        before = text[pos:start].strip()
        if before:
            out.append(Segment(part, before, role))
        out.extend(Segment("context", c, role, "context_tag") for c in split_chunks(text[inner_start:inner_end]))
        pos = end
    rest = text[pos:].strip()
    if rest:
        out.append(Segment(part, rest, role))
    return out


def completion_segments(prompt: str, tag: str) -> list[Segment]:
    """A completions prompt: the instructions before its first context block play the system prompt's part."""
    segments = split_context(prompt, "question", "", tag)
    first_context = next((i for i, s in enumerate(segments) if s.part == "context"), None)
    if first_context:
        segments[:first_context] = [Segment("system", s.text, "", "prompt") for s in segments[:first_context]]
    return segments


def document_segments(raw: Any) -> list[Segment]:
    """The body's ``documents`` (strings or ``{"text", "title"}`` objects, as the gateway and vLLM's chat templates
    take them); any other entry makes the request malformed."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Skip("bad_documents", f"'documents' is {describe(raw)}, not a list")
    out = []
    for i, d in enumerate(raw, 1):
        text = d if isinstance(d, str) else d.get("text") if isinstance(d, dict) else None
        if not isinstance(text, str):
            raise Skip("bad_documents", f"document {i} is {describe(d)}; give a string or an object with 'text'")
        title = d.get("title") if isinstance(d, dict) else None
        text = f"{title}\n{text}" if isinstance(title, str) and title else text
        if text.strip():
            out.append(Segment("context", text.strip(), "", "documents"))
    return out


@dataclass(slots=True)
class _Built:
    segments: list[Segment] = field(default_factory=list)
    fixed: int = 0
    images: list[Part] = field(default_factory=list)
    uncounted: list[str] = field(default_factory=list)
    anthropic: bool = False


_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
_IMAGE_BLOCKS = frozenset({"image", "image_url", "input_image"})


def _check_messages(messages: Sequence[Any]) -> None:
    """Raise ``Skip`` for a message list a model server would reject: empty, a message without a role, content
    that is neither text nor a list of typed parts."""
    if not messages:
        raise Skip("empty_messages", "'messages' is an empty list")
    for i, m in enumerate(messages, 1):
        if not isinstance(m, dict):
            raise Skip("bad_message", f"message {i} is {describe(m)}, not an object with 'role' and 'content'")
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise Skip("bad_message", f"message {i} has no 'role'" if role is None else
                        f"message {i}: 'role' is {describe(role)}, not a string")
        content = m.get("content")
        if isinstance(content, str):
            continue
        if content is None:
            if role != "assistant":  # an assistant turn may carry only tool calls
                raise Skip("bad_content", f"message {i} ({role}) has no content")
        elif isinstance(content, list):
            for j, block in enumerate(content, 1):
                if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                    raise Skip("bad_content", f"message {i} ({role}): part {j} is {describe(block)}, not an object "
                                               "with a 'type'")
                if block["type"] in _TEXT_BLOCKS and not isinstance(block.get("text"), str):
                    raise Skip("bad_content", f"message {i} ({role}): text part {j} has no text string")
        else:
            raise Skip("bad_content", f"message {i} ({role}): content is {describe(content)}; it must be a string or "
                                       "a list of parts")


def _has_text(m: Mapping[str, Any]) -> bool:
    content = m.get("content")
    if isinstance(content, str):
        return bool(content)
    return isinstance(content, list) and any(b.get("type") in _TEXT_BLOCKS for b in content)


def chat_segments(body: Mapping[str, Any], messages: list[Any], tag: str) -> _Built:
    """Segments of an OpenAI chat or Anthropic Messages body: the two formats share ``messages`` and differ in
    their block types (``text``, ``image_url`` vs ``document``, ``tool_use``, ``tool_result``, ``image``) and in
    Anthropic's top-level ``system``, so one walk reads both."""
    _check_messages(messages)
    out = _Built()
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user" and _has_text(m)), default=None)
    if last_user is None:
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    documents = document_segments(body.get("documents"))
    tools = body.get("tools") or body.get("functions")
    if tools:
        out.segments.append(Segment("other", json.dumps(tools, ensure_ascii=False, sort_keys=True), "", "tools"))
    system = body.get("system")
    framed = len(messages)
    if system is not None:  # Anthropic: the system prompt is a top-level string or list of text blocks
        if isinstance(system, str):
            system_text = system
        elif isinstance(system, list) and all(isinstance(b, dict) and isinstance(b.get("text"), str) for b in system):
            system_text = "\n".join(b["text"] for b in system)
        else:
            raise Skip("bad_content", f"'system' is {describe(system)}; it must be a string or a list of text blocks")
        out.anthropic = True
        out.segments.extend(_text_segments(system_text, "system", "system", tag))
        framed += 1
    for i, m in enumerate(messages):
        role = m["role"]
        if role in _SYSTEM_ROLES:
            part: Part = "system"
        elif role in _TOOL_ROLES:
            part = "context"
        elif i == last_user:
            part = "question"
            out.segments.extend(documents)  # the gateway renders them before the question
        else:
            part = "history"
        content = m.get("content")
        if isinstance(content, list):
            _content_blocks(content, part, role, tag, out)
        elif isinstance(content, str):
            if role in _TOOL_ROLES:
                out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(content))
            else:
                out.segments.extend(_text_segments(content, part, role, tag))
        if len(m) <= 2:  # role and content only: no name, no tool calls
            continue
        name = m.get("name")
        if isinstance(name, str) and name:
            out.segments.append(Segment("other", name, role, "name"))
        calls = m.get("tool_calls") or ([{"function": m["function_call"]}] if m.get("function_call") else [])
        if not isinstance(calls, list):
            raise Skip("bad_message", f"message {i + 1}: 'tool_calls' is {describe(calls)}, not a list")
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                out.segments.extend(Segment("history", str(fn.get(k, "")), role, "tool_call")
                                    for k in ("name", "arguments") if fn.get(k))
    if last_user is None:
        out.segments.extend(documents)
    out.fixed = TOKENS_PER_REPLY + TOKENS_PER_MESSAGE * framed
    return out


def _text_segments(text: str, part: Part, role: str, tag: str) -> list[Segment]:
    if "<" not in text:  # the common case, without the call: no context block
        return [Segment(part, text, role)] if text else []
    return split_context(text, part, role, tag)


def _content_blocks(blocks: list[dict[str, Any]], part: Part, role: str, tag: str, out: _Built) -> None:
    """A message's blocks in order. Runs of text blocks are joined with newlines (images inside a run do not break
    it, as OpenAI's text parts were always read); documents, search results and tool results are context, tool
    calls and thinking are history."""
    run: list[str] = []

    def flush() -> None:
        if run:
            text = "\n".join(run)
            if role in _TOOL_ROLES:
                out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(text))
            else:
                out.segments.extend(_text_segments(text, part, role, tag))
            run.clear()

    for block in blocks:
        kind = block["type"]
        if kind in _TEXT_BLOCKS:
            run.append(block["text"])
        elif kind == "refusal" and isinstance(block.get("refusal"), str):
            run.append(block["refusal"])
        elif kind in _IMAGE_BLOCKS:
            out.images.append(part)
            out.anthropic |= kind == "image"
        elif kind in ("document", "search_result"):
            flush()
            out.anthropic = True
            _document_block(block, role, out)
        elif kind in ("tool_use", "server_tool_use"):
            flush()
            out.anthropic = True
            out.segments.extend(Segment("history", t, role, "tool_call") for t in (
                str(block.get("name") or ""), json.dumps(block.get("input", {}), ensure_ascii=False)) if t)
        elif kind == "tool_result" or kind.endswith("_tool_result"):
            flush()
            out.anthropic = True
            _tool_result_block(block, role, tag, out)
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            flush()
            out.anthropic = True
            out.segments.append(Segment("history", block["thinking"], role, "thinking"))
        else:  # redacted thinking, audio, files: no text to count
            out.uncounted.append(kind)
    flush()


def _document_block(block: Mapping[str, Any], role: str, out: _Built) -> None:
    """An Anthropic ``document`` (source text, or content blocks) or ``search_result``: one context piece, its
    title and context lines first. A PDF, URL or file source has no text in the log: counted as uncounted."""
    head = [str(block[k]) for k in ("title", "context") if isinstance(block.get(k), str) and block[k]]
    source = block.get("source")
    content = block.get("content") if block["type"] == "search_result" else None
    body: list[str] = []
    if isinstance(source, dict) and source.get("type") == "text" and isinstance(source.get("data"), str):
        body.append(source["data"])
    elif isinstance(source, dict) and source.get("type") == "content":
        content = source.get("content")
    elif block["type"] == "document":
        kind = source.get("type") if isinstance(source, dict) else None
        media = source.get("media_type") if isinstance(source, dict) else None
        out.uncounted.append(f"document:{media or kind or 'unknown'}")
    if isinstance(content, str):
        body.append(content)
    elif isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                body.append(b["text"])
            elif isinstance(b, dict) and b.get("type") == "image":
                out.images.append("context")
    text = "\n".join(head + body).strip()
    if text:
        out.segments.append(Segment("context", text, role, "document"))


def _tool_result_block(block: Mapping[str, Any], role: str, tag: str, out: _Built) -> None:
    """An Anthropic ``tool_result``: its content (a string or text, image and document blocks) is context, cut
    into chunks at blank lines as OpenAI's tool messages are."""
    content = block.get("content")
    if isinstance(content, str):
        out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(content))
        return
    if not isinstance(content, list):
        return
    for b in content:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            out.segments.extend(Segment("context", t, role, "tool_result") for t in split_chunks(b["text"]))
        elif b.get("type") == "image":
            out.images.append("context")
        elif b.get("type") in ("document", "search_result"):
            _document_block(b, role, out)
        else:
            out.uncounted.append(str(b.get("type")))


def ragtrim_segments(body: Mapping[str, Any]) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    history = body.get("history")
    if isinstance(history, list):
        for m in history:
            if isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"]:
                segments.append(Segment("history", m["content"], str(m.get("role", "user"))))
    for c in body["chunks"]:
        text = c if isinstance(c, str) else next((c[k] for k in ("text", "page_content", "content")
                                                  if isinstance(c, dict) and isinstance(c.get(k), str)), None)
        if text:
            segments.append(Segment("context", text, "", "chunks"))
    query = body.get("query") or ""
    if query:
        segments.append(Segment("question", query, "user"))
    return tuple(segments)
