"""The Redis vector store against a real redis-server: exact values, the first writer wins, the byte bound with LRU
eviction, two processes writing at once, and Redis down (a lookup fails fast, the trim goes on)."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("redis")

from ragtrim._util.redact import redact_url as _redacted
from ragtrim.vectors.redis_store import RedisVectorStore
from ragtrim.vectors.store import SharedStore, open_store, pack, unpack, vector_key
from tests.serve.conftest import RedisServer, free_port

MIB = 2**20



@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.flush()
    return redis_server.url


def vectors(n: int, seed: int = 0) -> list[tuple[bytes, bytes]]:
    rng = np.random.default_rng(seed)
    return [(vector_key("test", f"text {seed} {i}"), pack(rng.standard_normal(384).astype(np.float32)))
            for i in range(n)]


class TestRedisVectorStore:
    def test_round_trip_and_first_writer_wins(self, redis_url: str) -> None:
        store = RedisVectorStore(redis_url, max_bytes=MIB)
        items = vectors(3)
        assert store.get([k for k, _ in items]) == {}
        assert store.put(items) == 3
        assert store.put([(items[0][0], pack(np.zeros(384, dtype=np.float32)))]) == 0
        assert store.get([k for k, _ in items] + [b"missing"]) == dict(items)
        v = unpack(store.get([items[2][0]])[items[2][0]])
        assert v is not None and v.tobytes() == np.frombuffer(items[2][1][4:], dtype="<f4").tobytes()
        assert store.stored_bytes() == sum(len(k) + len(v) for k, v in items)

    def test_replace_overwrites_a_damaged_value_and_keeps_the_count(self, redis_url: str) -> None:
        store = RedisVectorStore(redis_url, max_bytes=MIB)
        (key, good), = vectors(1)
        narrow = pack(np.ones(10, dtype=np.float32))  # a valid checksum over the wrong width
        store.put([(key, narrow)])
        assert store.put([(key, good)]) == 0 and store.get([key]) == {key: narrow}  # put keeps the first
        assert store.replace([(key, good)] + vectors(1, seed=5)) == 2
        assert store.get([key]) == {key: good}
        assert store.stored_bytes() == 2 * (len(key) + len(good))  # the old value's bytes left the count

    def test_a_trim_repairs_what_it_found_damaged(self, redis_url: str) -> None:
        from ragtrim.testing import FakeEmbedder

        store = RedisVectorStore(redis_url, max_bytes=MIB)
        store.put([(vector_key("fake-v1", "one"), pack(np.ones(10, dtype=np.float32)))])
        e = FakeEmbedder(recipe="fake-v1", vector_store=store)
        assert e.score("q", ["one", "two"]) == FakeEmbedder(recipe="fake-v1", vector_store=None).score("q", ["one",
                                                                                                            "two"])
        opened = open_store(store)  # the process's SharedStore of this store object, which the embedder used
        assert opened is not None
        opened.flush(10)
        assert (opened.stats.damaged, opened.stats.repaired) == (1, 1)
        assert unpack(store.get([vector_key("fake-v1", "one")])[vector_key("fake-v1", "one")], 16) is not None

    def test_byte_bound_evicts_least_recently_used(self, redis_url: str) -> None:
        store = RedisVectorStore(redis_url, max_bytes=MIB)  # 662 entries of 32 + 1540 bytes
        early = vectors(200, seed=1)
        store.put(early)
        time.sleep(0.01)
        store.touch([k for k, _ in early[:20]])
        later: list[tuple[bytes, bytes]] = []
        for seed in range(2, 7):  # 500 more: past the bound once
            time.sleep(0.002)
            batch = vectors(100, seed=seed)
            store.put(batch)
            later += batch
            assert store.stored_bytes() <= MIB
        kept = set(store.get([k for k, _ in early]))
        assert {k for k, _ in early[:20]} <= kept and len(kept) < 200
        assert len(store.get([k for k, _ in later])) == len(later)

    def test_two_processes_writing_at_once(self, redis_url: str) -> None:
        script = (
            "import sys, numpy as np\n"
            "from ragtrim.vectors.redis_store import RedisVectorStore\n"
            "from ragtrim.vectors.store import pack, vector_key\n"
            "store = RedisVectorStore(sys.argv[1], max_bytes=64 * 2**20, timeout_s=5)\n"
            "who = sys.argv[2]\n"
            "for batch in range(40):\n"
            "    items = [(vector_key('t', f'shared {batch} {i}'), pack(np.full(384, batch * 100 + i, np.float32)))\n"
            "             for i in range(10)]\n"
            "    items += [(vector_key('t', f'{who} {batch} {i}'), pack(np.ones(384, np.float32))) for i in range(10)]\n"
            "    store.put(items)\n"
        )
        procs = [subprocess.Popen([sys.executable, "-c", script, redis_url, who], stderr=subprocess.PIPE)
                 for who in ("a", "b")]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
        store = RedisVectorStore(redis_url, max_bytes=64 * MIB)
        keys = [vector_key("t", f"{who} {b} {i}") for who in ("shared", "a", "b") for b in range(40) for i in range(10)]
        assert len(store.get(keys)) == 1200
        assert store.stored_bytes() == 1200 * (32 + 4 + 384 * 4)  # each entry counted once

    def test_redis_down_costs_one_fast_failure(self) -> None:
        url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
        shared = SharedStore(RedisVectorStore(url, max_bytes=MIB), retry_after_s=60)
        started = time.perf_counter()
        assert shared.lookup([b"k" * 32]) == {}
        assert shared.lookup([b"k" * 32]) == {}  # the breaker is open: no second attempt
        assert time.perf_counter() - started < 1.0
        assert (shared.stats.errors, shared.stats.skipped) == (1, 1)

    def test_redis_stopped_mid_run_never_fails_a_trim(self, redis_server: RedisServer) -> None:
        from ragtrim.testing import FakeEmbedder

        redis_server.flush()
        store = RedisVectorStore(redis_server.url, max_bytes=MIB)
        e = FakeEmbedder(recipe="fake-v1", vector_store=store)
        first = e.score("q", ["one", "two"])
        redis_server.stop()
        try:
            fresh = FakeEmbedder(recipe="fake-v1", vector_store=store)
            assert fresh.score("q", ["one", "two", "three"])[:2] == first
            assert fresh.encoded_texts() == ["q", "one", "two", "three"]
        finally:
            redis_server.start()

    def test_password_is_not_logged(self) -> None:
        assert _redacted("redis://user:secret@host:6379/1") == "redis://user:***@host:6379/1"
        assert _redacted("redis://:secret@host/0") == "redis://:***@host/0"
        assert _redacted("redis://host:6379/0") == "redis://host:6379/0"
