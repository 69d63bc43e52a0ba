"""Turn what callers pass (strings, dicts, LangChain-like documents, Chunk objects, bytes) into Chunks and Messages.

Rules: ``None`` and non-text values are errors; bytes must be valid UTF-8; dict keys ``text``/``page_content``/
``content`` hold the text; missing ids become the input position (``"0"``, ``"1"``, ...); ``pinned`` is a bool or
one of the strings ``"true"``/``"false"`` (any case; what form fields and query strings carry), else an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragtrim._util.validate import plain_number
from ragtrim.errors import InputError
from ragtrim.models import Chunk, Message

_TEXT_KEYS = ("text", "page_content", "content")
_MAX_ID_BITS = 3322  # about 1,000 decimal digits; str() of a much larger int raises ValueError (4,300 digits)


def _float_score(score: Any, where: str) -> Any:
    """A numeric score as float; an int beyond float's range is refused here (float() would raise OverflowError)."""
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return score  # Chunk refuses it with its own message
    try:
        return float(score)
    except OverflowError:
        raise InputError(f"{where}: 'score' must be within float's range (about 1.8e308), got an int too large to "
                         "convert") from None


def _decode(value: bytes, where: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: bytes are not valid UTF-8 ({exc.reason} at byte {exc.start}); decode them yourself "
            "(e.g. data.decode('utf-8', errors='replace')) and pass str"
        ) from None


_PINNED_STRINGS = {"true": True, "false": False}


def coerce_pinned(value: Any, where: str) -> bool:
    """``pinned`` from caller data: a bool, or ``"true"``/``"false"`` in any case. ``"false"`` used to be truthy."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _PINNED_STRINGS:
        return _PINNED_STRINGS[value.strip().lower()]
    raise InputError(f"{where}: 'pinned' must be true or false (a bool, or the string 'true'/'false'), got {value!r}")


def coerce_chunk(item: Any, index: int) -> Chunk:
    where = f"chunk at index {index}"
    if isinstance(item, Chunk):
        return item
    if item is None:
        raise InputError(f"{where} is None; pass a str, a dict with 'text', or a Chunk")
    if isinstance(item, (bytes, bytearray)):
        return Chunk(text=_decode(bytes(item), where), id=str(index))
    if isinstance(item, str):
        return Chunk(text=item, id=str(index))
    if isinstance(item, Mapping):
        key = next((k for k in _TEXT_KEYS if k in item), None)
        if key is None:
            raise InputError(f"{where}: dict has none of the text keys {_TEXT_KEYS}; got keys {sorted(map(str, item))}")
        text = item[key]
        if isinstance(text, (bytes, bytearray)):
            text = _decode(bytes(text), where)
        if not isinstance(text, str):
            raise InputError(f"{where}: {key!r} must be str, got {type(text).__name__}")
        raw_id = plain_number(item.get("id", index))
        if raw_id is None or isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            raise InputError(f"{where}: 'id' must be a str or int, got {raw_id!r}")
        if isinstance(raw_id, int) and raw_id.bit_length() > _MAX_ID_BITS:
            raise InputError(f"{where}: an int 'id' must have at most 1,000 digits, got one of about "
                             f"{int(raw_id.bit_length() * 0.30103):,}; pass ids as str")
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise InputError(f"{where}: 'metadata' must be a dict, got {type(metadata).__name__}")
        score = plain_number(item.get("score"))
        pinned = coerce_pinned(item.get("pinned", False), where)
        try:
            return Chunk(
                text=text,
                id=str(raw_id),
                metadata=metadata,
                score=_float_score(score, where),
                pinned=pinned,
            )
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    page_content = getattr(item, "page_content", None)  # LangChain Document and look-alikes
    if isinstance(page_content, str):
        meta = getattr(item, "metadata", None) or {}
        doc_id = getattr(item, "id", None)
        return Chunk(text=page_content, id=str(doc_id) if doc_id else str(index), metadata=dict(meta))
    raise InputError(f"{where} has unsupported type {type(item).__name__}; pass a str, a dict with 'text', or a Chunk")


def coerce_chunks(items: Iterable[Any] | None) -> tuple[Chunk, ...]:
    if items is None:
        raise InputError("chunks is None; pass a list (empty is fine)")
    if isinstance(items, (str, bytes, Mapping)):
        raise InputError("chunks must be a list of chunks, not a single str/bytes/dict; wrap it in a list")
    if not isinstance(items, Iterable):
        raise InputError(f"chunks must be a list of chunks, got {type(items).__name__}")
    return tuple(coerce_chunk(item, i) for i, item in enumerate(items))


def coerce_message(item: Any, index: int) -> Message:
    where = f"message at index {index}"
    if isinstance(item, Message):
        return item
    if not isinstance(item, Mapping):
        role = getattr(item, "type", None) or getattr(item, "role", None)
        content = getattr(item, "content", None)
        if isinstance(role, str) and isinstance(content, str):
            return Message(role=role, content=content, turn_id=str(getattr(item, "id", None) or index))
        raise InputError(f"{where} must be a dict with 'role' and 'content', got {type(item).__name__}")
    role = item.get("role", item.get("speaker"))
    content = item.get("content", item.get("text"))
    if not isinstance(role, str) or not role:
        raise InputError(f"{where}: 'role' must be a non-empty str, got {role!r}")
    if not isinstance(content, str):
        raise InputError(f"{where}: 'content' must be a str, got {type(content).__name__}")
    turn_id = item.get("turn_id", item.get("id", item.get("dia_id", index)))
    return Message(role=role, content=content, turn_id=str(turn_id))


def coerce_history(items: Iterable[Any] | None) -> tuple[Message, ...]:
    if items is None:
        return ()
    if isinstance(items, (str, bytes, Mapping)):
        raise InputError("history must be a list of messages, not a single str/dict; wrap it in a list")
    if not isinstance(items, Iterable):
        raise InputError(f"history must be a list of messages, got {type(items).__name__}")
    return tuple(coerce_message(m, i) for i, m in enumerate(items))
