"""The hostile classes behind ``ragtrim-bench pipeline hostile_bounds``: long runs through near-duplicate detection,
text without word breaks through the model's prefix and ``ragtrim index``, and a vector store that is damaged,
foreign, full, shared with readers or fed every form of a passage; bad input and planted passwords at the CLI.

Each case is ``prepare(folder) -> state`` (inputs built before anything is measured) and ``run(state) -> outcome``
(flat, JSON-ready). The driver runs each in a fresh process and measures it; ``tests/bench/pipeline`` runs every case
at a small size.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 2**20
State = dict[str, Any]
Outcome = dict[str, Any]


def hex_run(n_chars: int) -> str:
    """``n_chars`` hex digits: no space, no punctuation, one word to every tokenizer."""
    return os.urandom(n_chars // 2 + 1).hex()[:n_chars]


def distinct_words(n_chars: int) -> str:
    """About ``n_chars`` of distinct words (``w0 w1 ...``): every shingle new."""
    return " ".join(f"w{i}" for i in range(n_chars // 8))


def _chinese(n_chars: int) -> str:
    from ragtrim_bench.pipeline.hostile_inputs import unpunctuated_chinese

    return unpunctuated_chinese(n_chars)


_OTHERS = ["The tower stands by the river. " * 20, "A bridge crosses the bay. " * 20]


# -- near duplicates ------------------------------------------------------------------------------------------------
def _dedup(make: Callable[[int], str]) -> Callable[[Path, int], State]:
    def prepare(folder: Path, n: int) -> State:
        from ragtrim.models import Chunk, TrimContext

        texts = [make(n), *_OTHERS]
        return {"context": TrimContext(chunks=tuple(Chunk(t, str(i), token_count=1) for i, t in enumerate(texts)))}

    return prepare


def _run_dedup(state: State) -> Outcome:
    from ragtrim.stages.dedup import DuplicateFilter

    out = DuplicateFilter().run(state["context"], counter=None)  # type: ignore[arg-type]  # counts nothing
    return {"chunks_kept": len(out.context.chunks), "near_method": out.info["near_method"]}


# -- the model's prefix and ragtrim index ---------------------------------------------------------------------------
def _prepare_prefix(folder: Path, n: int) -> State:
    from ragtrim_bench.pipeline.hostile_inputs import bert_tokenizer

    return {"text": hex_run(n) + " tail" * 10, "tokenizer": bert_tokenizer(128)}


def _run_prefix(state: State) -> Outcome:
    from ragtrim.scoring.embedding import prefix_chars
    from ragtrim.scoring.onnx_backend import encode_prefixes

    given: list[int] = []
    tok = state["tokenizer"]

    class Counting:
        normalizer, pre_tokenizer, model = tok.normalizer, tok.pre_tokenizer, tok.model

        def encode_batch(self, texts: list[str]) -> Any:
            given.append(sum(map(len, texts)))
            return tok.encode_batch(texts)

    (enc,) = encode_prefixes(Counting(), [state["text"]], 128)
    return {"text_chars": len(state["text"]), "chars_tokenized": sum(given), "bound_chars": prefix_chars(128),
            "pieces": len(enc.ids)}


def _prepare_index(folder: Path, n: int) -> State:
    corpus = folder / "hex.txt"
    corpus.write_text(hex_run(n), encoding="ascii")
    return {"corpus": corpus, "store": folder / "index.sqlite3"}


def _run_index(state: State) -> Outcome:
    """``ragtrim index`` of one file of hex digits with the auto scorer (the model, where it can run)."""
    command = [sys.executable, "-m", "ragtrim", "index", str(state["corpus"]), "--store", str(state["store"]),
               "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ,
                                                                                     "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - started
    import resource

    report = json.loads(done.stdout) if done.returncode == 0 else {}
    return {"exit_code": done.returncode, "command_s": round(wall, 3),
            "child_max_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "embedders": report.get("embedders"), "error": done.stderr.strip()[:200] or None}


# -- the vector store -----------------------------------------------------------------------------------------------
def _vectors(n: int, dim: int = 384, seed: int = 0) -> list[tuple[bytes, bytes]]:
    import numpy as np

    from ragtrim.vectors.store import pack, vector_key

    rng = np.random.default_rng(seed)
    return [(vector_key("bench", f"text {seed} {i}"), pack(rng.standard_normal(dim).astype(np.float32)))
            for i in range(n)]


_READER = (
    "import os, sys\n"
    "from ragtrim.vectors.sqlite_store import SqliteVectorStore\n"
    "from ragtrim.vectors.store import vector_key\n"
    "store = SqliteVectorStore(sys.argv[1], max_bytes=64 * 2**20)\n"
    "keys = [vector_key('bench', f'text 0 {i}') for i in range(20)]\n"
    "print('ready', flush=True)\n"
    "while not os.path.exists(sys.argv[2]):\n"
    "    store.get(keys)\n"
)


def _prepare_wal(folder: Path, n: int) -> State:
    return {"path": folder / "wal.sqlite3", "stop": folder / "stop", "batches": max(4, n // (50 * 1600))}


def _run_wal(state: State) -> Outcome:
    from ragtrim.vectors.sqlite_store import WAL_LIMIT_BYTES, SqliteVectorStore

    path = state["path"]
    writer = SqliteVectorStore(path, max_bytes=64 * MIB)
    writer.put(_vectors(20))
    readers = [subprocess.Popen([sys.executable, "-c", _READER, str(path), str(state["stop"])],
                                stdout=subprocess.PIPE, text=True) for _ in range(3)]
    largest = 0
    try:
        for r in readers:
            assert r.stdout is not None
            r.stdout.readline()
        for seed in range(1, state["batches"] + 1):
            writer.put(_vectors(50, seed=seed))
            largest = max(largest, os.path.getsize(f"{path}-wal"))
    finally:
        state["stop"].touch()
        for r in readers:
            r.wait(timeout=60)
    return {"written_mib": round(state["batches"] * 50 * 1572 / MIB, 1), "readers": 3,
            "largest_wal_mib": round(largest / MIB, 2), "wal_limit_mib": WAL_LIMIT_BYTES / MIB}


def _prepare_folder(folder: Path, n: int) -> State:
    return {"folder": folder}


def _run_store_classes(state: State) -> Outcome:
    """The store's hostile files, each with its outcome: a vector of the wrong width, another application's
    database, a full disk, a lowered bound."""
    import numpy as np

    from ragtrim.errors import ConfigError, VectorStoreError
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim.testing import FakeEmbedder
    from ragtrim.vectors.sqlite_store import SqliteVectorStore
    from ragtrim.vectors.store import open_store, pack, vector_key

    folder: Path = state["folder"]
    out: Outcome = {}
    # a stored vector of the wrong width, the passage's only store hit
    store_path = str(folder / "width.sqlite3")
    SqliteVectorStore(store_path, max_bytes=MIB).put([(vector_key("fake-v1", "alpha beta"),
                                                      pack(np.ones(10, dtype=np.float32)))])
    scorer = FakeEmbedder(recipe="fake-v1", vector_store=store_path)
    try:
        Pipeline([RelevanceFilter(scorer=scorer, top_k=None)], tokenizer="whitespace").run(
            ["alpha beta", "gamma delta"], query="beta")
        shared = open_store(store_path)
        assert shared is not None
        shared.flush(10)
        out["wrong_width"] = f"trimmed; damaged {shared.stats.damaged}, repaired {shared.stats.repaired}"
    except Exception as exc:  # noqa: BLE001  # the outcome is recorded, whatever it is
        out["wrong_width"] = f"{type(exc).__name__}: {exc}"[:200]
    # another application's database
    foreign = folder / "app.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    try:
        SqliteVectorStore(foreign, max_bytes=MIB).put(_vectors(1))
        out["foreign_file"] = "written"
    except ConfigError as exc:
        message = str(exc).replace(str(folder), "<dir>")
        out["foreign_file"] = f"refused, file unchanged: {foreign.read_bytes() == before}; {message[:110]}"
    # a full disk (SQLite's page limit stands in for the device)

    class TinyDisk(SqliteVectorStore):
        def _connect(self, busy_ms: int) -> sqlite3.Connection:
            c = super()._connect(busy_ms)
            c.execute("PRAGMA max_page_count = 40")
            return c

    try:
        TinyDisk(folder / "full.sqlite3", max_bytes=64 * MIB).put(_vectors(200))
        out["full_disk"] = "written"
    except VectorStoreError as exc:
        out["full_disk"] = str(exc).replace(str(folder), "<dir>")[:160]
    # the bound lowered: the file gives the evicted space back
    path = folder / "shrink.sqlite3"
    big = SqliteVectorStore(path, max_bytes=8 * MIB)
    for seed in range(12):
        big.put(_vectors(300, seed=seed))
    big.close()
    size_before = path.stat().st_size
    SqliteVectorStore(path, max_bytes=MIB).put(_vectors(10, seed=99))
    out["eviction_file_mib"] = f"{size_before / MIB:.1f} -> {path.stat().st_size / MIB:.2f} (bound 1)"
    return out


def _run_key_forms(state: State) -> Outcome:
    """Index .txt and .jsonl passages in every form (as ``ragtrim index`` reads them), then trim them stripped:
    how many the store answers."""
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter
    from ragtrim.testing import FakeEmbedder
    from ragtrim.vectors.index import index_passages, read_corpus

    folder: Path = state["folder"]
    forms = {"a.txt": b"Passage A.\n", "b.txt": b"\xef\xbb\xbfPassage B.\r\nline two\r\n",
             "c.jsonl": b'\xef\xbb\xbf{"text": "Passage C.  "}\r\n"  Passage D.\\r\\n"\r\n'}
    for name, content in forms.items():
        (folder / name).write_bytes(content)
    store = str(folder / "keys.sqlite3")
    report = index_passages(read_corpus([folder / n for n in forms]), scorer=FakeEmbedder(recipe="fake-v1"),
                            store=store)
    scorer = FakeEmbedder(recipe="fake-v1", vector_store=store)
    passages = ["Passage A.", "Passage B.\nline two", "Passage C.", "Passage D."]
    Pipeline([RelevanceFilter(scorer=scorer, top_k=None)], tokenizer="whitespace").run(passages, query="q")
    misses = [t for t in scorer.encoded_texts() if t != "q"]
    return {"indexed": report.stored, "passages": len(passages), "store_hits": len(passages) - len(misses)}


def _run_cli(state: State) -> Outcome:
    """Bad input and planted passwords through the real ``ragtrim`` command: exit codes, and whether a password
    shows in anything it printed."""
    folder: Path = state["folder"]
    (folder / "latin1.jsonl").write_bytes(b'"ok"\n{"text": "caf\xe9"}\n')
    (folder / "surrogate.jsonl").write_bytes(b'"half \\ud800"\n')
    (folder / "bom.jsonl").write_bytes(b'\xef\xbb\xbf"one"\n')
    (folder / "shape.json").write_bytes(b'{"chunks": 5}')
    password = "Planted-" + os.urandom(6).hex()
    runs = {
        "non_utf8_jsonl": ["index", str(folder / "latin1.jsonl")],
        "lone_surrogate": ["index", str(folder / "surrogate.jsonl")],
        "max_mb_inf": ["index", str(folder / "bom.jsonl"), "--max-mb", "inf"],
        "trim_chunks_not_a_list": ["trim", str(folder / "shape.json"), "--scorer", "bm25"],
        "password_userinfo_redis_down": ["index", str(folder / "bom.jsonl"), "--store",
                                         f"redis://:{password}@127.0.0.1:1/0"],
        "password_query_bad_port": ["index", str(folder / "bom.jsonl"), "--store",
                                    f"redis://127.0.0.1:port/0?password={password}"],
    }
    out: Outcome = {}
    leaks = 0
    for name, argv in runs.items():
        done = subprocess.run([sys.executable, "-m", "ragtrim", *argv, *(["--quiet"] if argv[0] == "index" else [])],
                              capture_output=True, text=True, check=False)
        out[f"{name}_exit"] = done.returncode
        leaks += password in done.stdout + done.stderr
    out["password_shown"] = leaks
    return out


@dataclass(frozen=True)
class BoundCase:
    """One hostile class: its input at size ``n`` (``unit``), the call measured, and what was seen before the fix."""

    name: str
    unit: str
    n: int
    prepare: Callable[[Path, int], State]
    run: Callable[[State], Outcome]
    before: str
    in_process: bool = True
    """False when the work runs in child processes: the GIL and RSS of this process say nothing about it."""


CASES: tuple[BoundCase, ...] = (
    BoundCase("dedup_hex_run", "chars", 12 * MIB, _dedup(hex_run), _run_dedup,
              "one 12 MB run in documents: liveness held 1.1-1.3 s, +0.5-0.8 GB"),
    BoundCase("dedup_a_run", "chars", 12 * MIB, _dedup(lambda n: "a" * n), _run_dedup, "432 MiB traced, GIL 0.7 s"),
    BoundCase("dedup_distinct_words", "chars", 12 * MIB, _dedup(distinct_words), _run_dedup,
              "381 MiB traced; np.unique of 1.4 M hashes"),
    BoundCase("dedup_unpunctuated_chinese", "chars", 4 * MIB, _dedup(_chinese), _run_dedup,
              "findall of 4 M characters: 2.3 s in one call, 0.8 GB"),
    BoundCase("prefix_hex_run", "chars", 16 * MIB, _prepare_prefix, _run_prefix,
              "the whole text tokenized: 16 MB of hex 21 s, 1.16 GB in ragtrim index"),
    BoundCase("index_hex_run", "chars", 16 * MIB, _prepare_index, _run_index, "21 s and 1.16 GB (50 MB: 70 s, 3 GB)",
              in_process=False),
    BoundCase("store_wal_three_readers", "bytes", 12 * MIB, _prepare_wal, _run_wal,
              "the WAL reached 65 MiB with a 1 MiB bound and 3 readers", in_process=False),
    BoundCase("store_hostile_files", "files", 4, _prepare_folder, _run_store_classes,
              "StageError on a 10-float vector; a foreign file switched to WAL and given tables; 'cannot rollback'"),
    BoundCase("index_key_forms", "forms", 4, _prepare_folder, _run_key_forms, ".txt with its newline: 0 of 8 hits"),
    BoundCase("cli_bad_input_and_passwords", "runs", 6, _prepare_folder, _run_cli,
              "exit 4 on non-UTF-8 JSONL, a lone surrogate, --max-mb inf; ?password= printed", in_process=False),
)
