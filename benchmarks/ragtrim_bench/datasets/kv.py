"""The "Lost in the Middle" key-value retrieval records (75 or 140 UUID pairs each) as chunked retrieval requests:
the pairs, one per line, grouped into chunks; the question asks for one key's value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragtrim._util.jsonl import iter_jsonl
from ragtrim.errors import ConfigError, InputError
from ragtrim_bench.datasets import dataset_path
from ragtrim_bench.datasets.nq import Passage, QAInstance

KV_FOLDER = "kv-retrieval"
KV_FILE = "kv-retrieval-75_keys.shared.jsonl.gz"
PAIRS_PER_CHUNK = 4
"""Four pairs a chunk: 75 pairs make 19 chunks, about the 20 passages of the other columns, and one chunk (about 200
cl100k tokens) still fits the 16x budget (about 234), so whole-chunk rankers can answer at every ratio; with five
pairs (about 250 tokens) no whole chunk would fit at 16x and the column would measure only line-level compression."""


@dataclass(frozen=True, slots=True)
class KVRecord:
    """One line of the file: the pairs in order, the queried key and its value. ``index``: the 0-based line."""

    index: int
    pairs: tuple[tuple[str, str], ...]
    key: str
    value: str


def kv_path(path: str | Path | None = None) -> Path:
    return Path(path) if path is not None else dataset_path(KV_FOLDER) / KV_FILE


def load_kv(path: str | Path | None = None) -> list[KVRecord]:
    """Read a kv-retrieval JSONL(.gz); ``path`` defaults to ``$RAGTRIM_DATA/kv-retrieval/`` (the 75-key file)."""
    p = kv_path(path)
    if not p.is_file():
        raise InputError(f"kv-retrieval file {str(p)!r} not found; set RAGTRIM_DATA or pass the path of {KV_FILE}")
    out: list[KVRecord] = []
    for line, rec in iter_jsonl(p, what="kv-retrieval file"):
        try:
            pairs = tuple((str(k), str(v)) for k, v in rec["ordered_kv_records"])
            out.append(KVRecord(index=line - 1, pairs=pairs, key=str(rec["key"]), value=str(rec["value"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{p}: line {line} is not a kv-retrieval record ({exc!r})") from None
        if sum(k == out[-1].key for k, _ in pairs) != 1:
            raise InputError(f"{p}: line {line}: the queried key must occur exactly once among the pairs")
    return out


def kv_line(key: str, value: str) -> str:
    """One pair as a JSON member: ``"key": "value"``."""
    return f"{json.dumps(key)}: {json.dumps(value)}"


def kv_instance(record: KVRecord, *, pairs_per_chunk: int = PAIRS_PER_CHUNK) -> QAInstance:
    """The record's pairs in file order, ``pairs_per_chunk`` lines a chunk; the chunk holding the key is gold."""
    if isinstance(pairs_per_chunk, bool) or not isinstance(pairs_per_chunk, int) or pairs_per_chunk < 1:
        raise ConfigError(f"pairs_per_chunk must be an int >= 1, got {pairs_per_chunk!r}")
    passages = []
    for c, start in enumerate(range(0, len(record.pairs), pairs_per_chunk)):
        part = record.pairs[start:start + pairs_per_chunk]
        passages.append(Passage(id=f"kv{record.index}c{c}", title="", text="\n".join(kv_line(k, v) for k, v in part),
                                is_gold=any(k == record.key for k, _ in part)))
    return QAInstance(id=f"kv{record.index}", question=f'What is the value of the key "{record.key}"?',
                      answers=(record.value,), passages=tuple(passages))
