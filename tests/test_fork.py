"""Fork safety: after the parent has trimmed, a forked child trims too, instead of waiting
forever on the parent's background thread (gunicorn's preload, multiprocessing's fork start method and Celery's
prefork pool all fork a process that has trimmed). Every child has a deadline, so a regression fails, never hangs."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform"),
    pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning"),  # Python 3.12+ warns of fork with threads
]

ROOT = Path(__file__).resolve().parents[1]
PASSAGES = [f"Passage {i} tells of towers, rivers and bridges number {i}. It has a second sentence {i}."
            for i in range(12)]


def _pipeline(embedder: Any) -> Any:
    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.relevance import RelevanceFilter

    stages = [RelevanceFilter(scorer=embedder, top_k=None) if isinstance(s, RelevanceFilter) else s
              for s in default_stages(budget=40, scorer="bm25")]
    return Pipeline(stages, tokenizer="whitespace")


_SHARED: dict[str, Any] = {}


def _child(queue: Any, query: str, passages: list[str]) -> None:
    queue.put(_SHARED["pipeline"].run(passages, query=query).text)


def _run_forked(query: str, passages: list[str], timeout_s: float = 60) -> str:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, query, passages))
    proc.start()
    proc.join(timeout_s)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail(f"the forked child was still trimming after {timeout_s} s (it waits on the parent's thread)")
    assert proc.exitcode == 0
    return str(queue.get(timeout=5))


class TestForkStartMethod:
    def test_a_child_forked_after_a_trim_trims(self) -> None:
        from ragtrim.testing import FakeEmbedder

        embedder = FakeEmbedder(vector_store=None)
        _SHARED["pipeline"] = _pipeline(embedder)
        _SHARED["pipeline"].run(PASSAGES[:6], query="towers")  # the parent trims: the background thread exists
        assert any(t.startswith("ragtrim-prefetch") for t, _ in embedder.calls)
        child = _run_forked("rivers", PASSAGES[6:])
        assert child == _pipeline(FakeEmbedder(vector_store=None)).run(PASSAGES[6:], query="rivers").text

    def test_a_child_forked_during_a_prefetch_does_not_wait_for_it(self) -> None:
        from ragtrim.testing import FakeEmbedder

        gate, entered = threading.Event(), threading.Event()
        parent = os.getpid()

        class Stuck(FakeEmbedder):
            def _encode(self, texts: Any) -> Any:
                if os.getpid() == parent and threading.current_thread().name.startswith("ragtrim-prefetch"):
                    entered.set()
                    gate.wait(30)  # the parent's prefetch, held while the child is forked and trims
                return super()._encode(texts)

        embedder = Stuck(vector_store=None)
        _SHARED["pipeline"] = _pipeline(embedder)
        embedder.prefetch("bridges", PASSAGES)
        assert entered.wait(10)
        try:
            child = _run_forked("bridges", PASSAGES)  # the same texts the parent's prefetch holds
        finally:
            gate.set()
        assert child == _pipeline(FakeEmbedder(vector_store=None)).run(PASSAGES, query="bridges").text


def _use_cache(queue: Any) -> None:
    cache = _SHARED["cache"]
    cache.put("b", 2)
    queue.put(cache.get("b"))


class TestLocksHeldAtFork:
    def test_a_cache_another_thread_held_at_the_fork_works_in_the_child(self) -> None:
        # A request thread inside a per-text cache's lock while the server forks: the child's first use of that
        # cache waited forever. Every such lock is made by fork_safe_lock, which a child gets back unlocked.
        from ragtrim._util.lru import SizedLRU

        cache: SizedLRU[str, int] = SizedLRU()
        cache.put("a", 1)
        _SHARED["cache"] = cache
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with cache._lock:
                held.set()
                release.wait(30)

        thread = threading.Thread(target=hold)
        thread.start()
        assert held.wait(10)
        try:
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            proc = ctx.Process(target=_use_cache, args=(queue,))
            proc.start()
            proc.join(30)
            alive = proc.is_alive()
            if alive:
                proc.kill()
                proc.join()
        finally:
            release.set()
            thread.join()
        assert not alive, "the child waited on a lock the parent's other thread held at the fork"
        assert proc.exitcode == 0 and queue.get(timeout=5) == 2
        assert cache.get("a") == 1  # the parent's lock and data are its own


PRELOAD = r"""
import json, os, signal, sys, time
from tests.test_fork import _pipeline, PASSAGES
kind, store = sys.argv[1], sys.argv[2]
if kind == "fake":
    from ragtrim.testing import FakeEmbedder
    scorer = FakeEmbedder(recipe="fake-v1", vector_store=store)
elif kind == "auto":
    from ragtrim.scoring.auto import fast_scorer
    scorer = fast_scorer()
else:
    from ragtrim.scoring.embedding import EmbeddingScorer
    scorer = EmbeddingScorer(threads=2, vector_store=store)
pipeline = _pipeline(scorer)
parent = pipeline.run(PASSAGES[:6], query="towers").text      # like gunicorn --preload: the app ran once
children = []
for n in range(3):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.alarm(60)                                         # a hung child dies instead of lingering
        os.close(r)
        text = pipeline.run(PASSAGES[3 + n:9 + n], query="rivers").text
        os.write(w, json.dumps(text).encode())
        os._exit(0)
    os.close(w)
    children.append((pid, r))
out = []
for pid, r in children:
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    _, status = os.waitpid(pid, 0)
    out.append({"status": os.waitstatus_to_exitcode(status), "text": json.loads(data) if data else None})
expected = [pipeline.run(PASSAGES[3 + n:9 + n], query="rivers").text for n in range(3)]
print(json.dumps({"parent": parent, "children": out, "expected": expected}))
"""


def preloading_parent(kind: str, store: str = "off", timeout_s: float = 240) -> dict[str, Any]:
    """Run PRELOAD: a parent that trims, then forks three children that each trim (as gunicorn --preload)."""
    return _run_script(PRELOAD, kind, store, timeout_s=timeout_s)


def _run_script(script: str, *args: str, timeout_s: float) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter at the repository root; its JSON on stdout (its stderr on failure)."""
    try:
        done = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, check=False,
                              timeout=timeout_s, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"the forking script did not finish within {timeout_s} s")
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


class TestPreloadingParent:
    def test_children_trim_like_the_parent(self, tmp_path: Path) -> None:
        result = preloading_parent("fake", str(tmp_path / "v.sqlite3"))
        assert [c["status"] for c in result["children"]] == [0, 0, 0]
        assert [c["text"] for c in result["children"]] == result["expected"]

    def test_children_share_the_store(self, tmp_path: Path) -> None:
        from ragtrim.testing import FakeEmbedder
        from ragtrim.vectors.store import open_store

        path = str(tmp_path / "v.sqlite3")
        preloading_parent("fake", path)
        probe = FakeEmbedder(recipe="fake-v1", vector_store=path)
        probe.embed(PASSAGES[3:11])  # what the parent and the children embedded
        assert probe.encoded_texts() == []
        assert open_store(path).stats.hits == 8  # type: ignore[union-attr]


@pytest.mark.model
class TestPreloadingParentWithMiniLM:
    def test_onnx_sessions_work_in_children(self) -> None:
        result = preloading_parent("auto")
        assert [c["status"] for c in result["children"]] == [0, 0, 0]
        assert [c["text"] for c in result["children"]] == result["expected"]

    def test_torch_after_two_threads_works_in_children(self, tmp_path: Path) -> None:
        # The parent ran torch with two OpenMP threads; they do not exist in a child, where a parallel op would
        # wait for them forever: the children embed with one thread (and their own store recipe).
        result = preloading_parent("torch", str(tmp_path / "v.sqlite3"))
        assert [c["status"] for c in result["children"]] == [0, 0, 0]
        assert all(c["text"] for c in result["children"])


CHURN = r"""
import faulthandler, json, os, sqlite3, sys, threading
from ragtrim.vectors.sqlite_store import SqliteVectorStore
path, forks = sys.argv[1], int(sys.argv[2])
store = SqliteVectorStore(path, max_bytes=64 * 2**20)
keys = [os.urandom(16) for _ in range(20)]
store.put([(k, os.urandom(1536)) for k in keys])
stop = threading.Event()
def churn():  # the I/O thread's work, back to back: open the file, write a batch
    while not stop.is_set():
        store.close()
        store.put([(os.urandom(16), os.urandom(1536)) for _ in range(40)])
thread = threading.Thread(target=churn, daemon=True)
thread.start()
statuses = []
for _ in range(forks):
    pid = os.fork()
    if pid == 0:
        faulthandler.dump_traceback_later(20, exit=True)       # a hung child dies (exit status 1) instead of lingering
        try:
            found = store.get(keys)
            store.put([(os.urandom(16), os.urandom(1536))])
        except sqlite3.OperationalError as exc:                 # exit status 4: a busy timeout ran out, as it may
            os._exit(4 if "locked" in str(exc) else 2)          # while the parent's thread checkpoints (the trim
        except BaseException as exc:                            # then asks the model); 2: anything else raised
            print(f"child: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            os._exit(2)
        os._exit(0 if len(found) == len(keys) else 3)
    statuses.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
stop.set()
thread.join()
print(json.dumps({"statuses": statuses, "parent_found": len(store.get(keys))}))
"""

STUCK = r"""
import json, os, sys, threading
import ragtrim.vectors.sqlite_store as sqlite_store
from ragtrim.errors import VectorStoreError
from ragtrim.vectors.store import SharedStore, pack
import numpy as np
sqlite_store.FORK_WAIT_S = 0.3
store = sqlite_store.SqliteVectorStore(sys.argv[1], max_bytes=64 * 2**20)
key = os.urandom(16)
store.put([(key, pack(np.ones(4, dtype=np.float32)))])
entered, release = threading.Event(), threading.Event()
def stuck():  # a call that stays inside SQLite past the fork's wait (a write waiting on another process's lock)
    with sqlite_store._GATE.inside():
        entered.set()
        release.wait()
threading.Thread(target=stuck, daemon=True).start()
entered.wait()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    shared = SharedStore(store)
    try:
        store.get([key])
        raised = None
    except VectorStoreError as exc:
        raised = str(exc)
    out = {"raised": raised, "lookup": len(shared.lookup([key])), "errors": shared.stats.errors}
    os.write(w, json.dumps(out).encode())
    os._exit(0)
os.close(w)
release.set()
child = json.loads(os.read(r, 65536))
os.waitpid(pid, 0)
print(json.dumps({"child": child, "parent_found": len(store.get([key]))}))
"""


class TestSqliteStoreAcrossFork:
    def test_children_forked_while_a_thread_is_inside_sqlite_use_the_store(self, tmp_path: Path) -> None:
        # A child forked while another thread was inside SQLite (opening the file) inherited a held SQLite mutex,
        # and its first connect waited forever (CI saw it in the preloading parent).
        # With a thread opening and writing back to back, most forks land inside SQLite.
        result = _run_script(CHURN, str(tmp_path / "v.sqlite3"), "30", timeout_s=600)
        # 1 would be a child that hung (and was killed after 20 s), 2 one that raised anything but a busy timeout
        assert set(result["statuses"]) <= {0, 4}, result["statuses"]
        assert result["statuses"].count(0) >= 15, result["statuses"]
        assert result["parent_found"] == 20

    def test_a_child_forked_while_a_call_stays_inside_sqlite_refuses_the_store(self, tmp_path: Path) -> None:
        result = _run_script(STUCK, str(tmp_path / "v.sqlite3"), timeout_s=120)
        assert "forked while another thread was inside SQLite" in result["child"]["raised"]
        assert result["child"]["lookup"] == 0 and result["child"]["errors"] == 1  # the trim asks the model
        assert result["parent_found"] == 1  # the parent goes on with its store
