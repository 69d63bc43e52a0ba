"""A model's identity by content, not by path or modification time: the name of its ONNX export folder, and part
of a vector store key (``ragtrim.vectors.store``), so that a copied model keeps both and a changed one gets new
ones."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

_MIB = 1 << 20


def content_fingerprint(model_dir: Path, salt: str = "") -> str:
    """Each file's name and size, small files whole, and the first and last MiB of large ones (a fine-tuned copy of
    the same architecture differs there), hashed after ``salt``; 16 hex digits."""
    h = hashlib.sha256(salt.encode())
    for f in sorted(model_dir.rglob("*")):
        if not f.is_file():
            continue
        size = f.stat().st_size
        h.update(f"{f.relative_to(model_dir).as_posix()}:{size}".encode())
        with f.open("rb") as fh:
            h.update(fh.read(_MIB))
            if size > 2 * _MIB:
                fh.seek(-_MIB, os.SEEK_END)
                h.update(fh.read(_MIB))
    return h.hexdigest()[:16]


@functools.cache
def model_fingerprint(model_dir: str) -> str:
    """``content_fingerprint`` of a model folder, once per process."""
    return content_fingerprint(Path(model_dir))


def file_fingerprint(path: str) -> str:
    """One file's identity by content: its size and the SHA-256 of its first and last MiB (cached per path, size
    and modification time, so a re-export is seen)."""
    stat = os.stat(path)
    return _file_fingerprint(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _file_fingerprint(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256(f"{size}".encode())
    with open(path, "rb") as fh:
        h.update(fh.read(_MIB))
        if size > 2 * _MIB:
            fh.seek(-_MIB, os.SEEK_END)
            h.update(fh.read(_MIB))
    return h.hexdigest()[:16]
