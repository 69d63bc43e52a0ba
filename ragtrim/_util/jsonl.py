"""Reading JSONL files with errors that name the file and the line (standard library only).

Shared by ``ragtrim bench`` (``ragtrim.savings``) and the evaluation package's dataset and prompt readers.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ragtrim.errors import InputError


def iter_jsonl(path: str | Path, *, what: str = "JSONL file") -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of a UTF-8 JSONL file (``.gz``: gzip-compressed).

    Errors are ``InputError``s that name ``what``, the file and the line. Only ``\\n`` ends a line: U+2028 may sit
    raw inside a JSON string. The file is read at once (the evaluation files are a few MB); lines parse lazily.
    """
    p = Path(path)
    try:
        exists = p.is_file()
    except (OSError, ValueError) as exc:
        raise InputError(f"{what} {str(p)!r} is not a usable path ({exc})") from None
    if not exists:
        raise InputError(f"{what} {str(p)!r} does not exist")
    opener: Callable[..., Any] = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rb") as fh:
            raw: bytes = fh.read()
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{what} {str(p)!r} is not UTF-8 JSONL ({exc.reason} at line {line})") from None
    except OSError as exc:  # unreadable, or a broken .gz
        raise InputError(f"{what} {str(p)!r} cannot be read: {exc}") from None
    for n, line_text in enumerate(text.split("\n"), 1):
        if not line_text.strip():
            continue
        try:
            value = json.loads(line_text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{p}:{n}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise InputError(f"{p}:{n}: nested too deeply") from None
        yield n, value
