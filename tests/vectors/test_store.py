"""What every vector store shares: keys, exact float32 values with a checksum, the default store's resolution, and
``SharedStore`` (lookups and writes that never raise, the breaker, the counters), through the embedder's tiers:
memory -> store -> model."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from ragtrim.errors import ConfigError
from ragtrim.scoring.embedding import PROBE_TEXT
from ragtrim.testing import FakeEmbedder
from ragtrim.vectors import store as store_mod
from ragtrim.vectors.sqlite_store import SqliteVectorStore
from ragtrim.vectors.store import (
    DEFAULT_MAX_BYTES,
    SharedStore,
    VectorStore,
    configure_default_store,
    default_store_spec,
    key_text,
    open_store,
    pack,
    store_size_bytes,
    unpack,
    vector_key,
)


class DictStore:
    """An in-memory VectorStore that can be told to fail."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.fail = False
        self.gets = 0
        self.puts: list[int] = []
        self.touched: list[bytes] = []
        self.replaced: list[bytes] = []

    @property
    def location(self) -> str:
        return "memory"

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        self.gets += 1
        if self.fail:
            raise OSError("store is down")
        return {k: self.data[k] for k in keys if k in self.data}

    def put(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        if self.fail:
            raise OSError("store is down")
        new = [(k, v) for k, v in items if k not in self.data]
        self.data.update(new)
        self.puts.append(len(items))
        return len(new)

    def replace(self, items: Sequence[tuple[bytes, bytes]]) -> int:
        if self.fail:
            raise OSError("store is down")
        self.data.update(items)
        self.replaced.extend(k for k, _ in items)
        return len(items)

    def touch(self, keys: Sequence[bytes]) -> None:
        self.touched.extend(keys)

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _no_configured_default() -> None:
    configure_default_store("default")
    store_mod._DEFAULT = None


class TestKeysAndValues:
    def test_key_depends_on_recipe_and_text(self) -> None:
        k = vector_key("minilm/int8/pieces-10", "a passage")
        assert len(k) == 32 and k == vector_key("minilm/int8/pieces-10", "a passage")
        assert k != vector_key("minilm/int8/pieces-11", "a passage")
        assert k != vector_key("minilm/int8/pieces-10", "a passage.")
        assert vector_key("a", "b\x00c") != vector_key("a\x00b", "c")  # the separator cannot be forged by text
        assert len(vector_key("r", "lone surrogate \ud800")) == 32

    def test_float32_round_trip_is_exact(self) -> None:
        v = np.random.default_rng(0).standard_normal(384).astype(np.float32)
        v[0] = np.nextafter(np.float32(1), np.float32(2))
        back = unpack(pack(v))
        assert back is not None and back.dtype == np.float32 and back.tobytes() == v.tobytes()

    def test_a_damaged_value_is_no_vector(self) -> None:
        raw = bytearray(pack(np.ones(8, dtype=np.float32)))
        raw[-1] ^= 1
        assert unpack(bytes(raw)) is None
        assert unpack(b"") is None and unpack(b"abcde") is None and unpack(pack(np.ones(2))[:-1]) is None

    def test_a_value_of_another_width_or_not_finite_is_no_vector(self) -> None:
        ten = pack(np.ones(10, dtype=np.float32))  # a valid checksum over the wrong number of floats
        assert unpack(ten) is not None and unpack(ten, 10) is not None
        assert unpack(ten, 384) is None
        for bad in (np.nan, np.inf, -np.inf):
            v = np.ones(384, dtype=np.float32)
            v[7] = bad
            assert unpack(pack(v), 384) is None and unpack(pack(v)) is None

    @pytest.mark.parametrize(("given", "key"), [
        ("a passage\n", "a passage"), ("\ufeffa passage", "a passage"), ("  a passage \t\r\n", "a passage"),
        ("line one\r\nline two\r\n", "line one\nline two"), ("old\rmac", "old\nmac"),
        (" \ufeff a passage", "a passage"), ("inner  spaces\n\nkept", "inner  spaces\n\nkept"),
    ])
    def test_one_key_for_every_form_of_a_passage(self, given: str, key: str) -> None:
        assert key_text(given) == key and key_text(key) == key
        assert vector_key("r", given) == vector_key("r", key)


class TestDefaultStore:
    def test_default_is_sqlite_in_the_cache_dir(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.delenv("RAGTRIM_VECTOR_STORE", raising=False)
        monkeypatch.delenv("RAGTRIM_VECTOR_STORE_MAX_MB", raising=False)
        monkeypatch.setenv("RAGTRIM_CACHE_DIR", str(tmp_path))
        assert default_store_spec() == (str(tmp_path / "vectors.sqlite3"), DEFAULT_MAX_BYTES)
        shared = open_store("default")
        assert shared is not None and isinstance(shared.store, SqliteVectorStore)
        assert shared.store.location == str(tmp_path / "vectors.sqlite3")
        assert shared is open_store("default")  # one per location and process

    def test_environment_and_configuration(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE", str(tmp_path / "env.sqlite3"))
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE_MAX_MB", "2")
        assert default_store_spec() == (str(tmp_path / "env.sqlite3"), 2 * 2**20)
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE", "off")
        assert open_store("default") is None
        configure_default_store(str(tmp_path / "conf.sqlite3"), max_bytes=3 * 2**20)
        assert default_store_spec() == (str(tmp_path / "conf.sqlite3"), 3 * 2**20)
        configure_default_store(None)
        assert open_store("default") is None
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE_MAX_MB", "lots")
        store_mod._DEFAULT = None
        monkeypatch.setenv("RAGTRIM_VECTOR_STORE", "default")
        with pytest.raises(ConfigError, match=r"RAGTRIM_VECTOR_STORE_MAX_MB must be a number of MiB from 1 to 1048576 "
                                              r"\(1 TiB\), got 'lots'"):
            default_store_spec()

    def test_off_and_objects(self) -> None:
        assert open_store(None) is None and open_store("off") is None and open_store("OFF") is None
        store = DictStore()
        assert isinstance(store, VectorStore)
        shared = open_store(store)
        assert shared is not None and shared.store is store and open_store(store) is shared

    def test_bad_spec_is_a_config_error_of_the_store(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match=r"max_bytes must be an int from 1048576 \(1 MiB\) to 1099511627776 "
                                              r"\(1 TiB\) bytes, got 10"):
            SqliteVectorStore(tmp_path / "x.sqlite3", max_bytes=10)


class TestStoreSize:
    """One check of a store's size for the CLI flag, the environment and the gateway's config."""

    @pytest.mark.parametrize("good", [1, 1.5, "2", " 256 ", 2**20, "1048576"])
    def test_sizes_a_store_can_work_with(self, good: object) -> None:
        assert store_size_bytes(good, source="--max-mb") == int(float(str(good)) * 2**20)

    @pytest.mark.parametrize("bad", ["inf", float("inf"), "nan", float("nan"), 1e308, "1e308", 0.01, "0.01", 0, -5,
                                     2**20 + 1, "lots", "", True, None, [256]])
    def test_sizes_refused_name_the_source_the_range_and_the_unit(self, bad: object) -> None:
        with pytest.raises(ConfigError) as caught:
            store_size_bytes(bad, source="trim.vector_store_max_mb")
        assert str(caught.value).startswith("trim.vector_store_max_mb must be a number of MiB from 1 to 1048576 "
                                            f"(1 TiB), got {bad!r}")

    def test_the_environment_goes_through_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("RAGTRIM_VECTOR_STORE", raising=False)
        for bad in ("inf", "0.01", "1e308", "nan"):
            monkeypatch.setenv("RAGTRIM_VECTOR_STORE_MAX_MB", bad)
            with pytest.raises(ConfigError, match=r"^\$RAGTRIM_VECTOR_STORE_MAX_MB must be a number of MiB"):
                default_store_spec()


class TestSharedStore:
    def test_lookup_save_flush_and_counters(self) -> None:
        store = DictStore()
        shared = SharedStore(store)
        v = np.arange(4, dtype=np.float32)
        shared.save([(b"k1", v), (b"k2", v + 1)])
        shared.flush(5)
        assert set(store.data) == {b"k1", b"k2"} and shared.stats.writes == 2
        found = shared.lookup([b"k1", b"k3"])
        assert list(found) == [b"k1"] and found[b"k1"].tobytes() == v.tobytes()
        shared.flush(5)
        assert store.touched == [b"k1"]
        assert (shared.stats.hits, shared.stats.misses, shared.stats.errors) == (1, 1, 0)

    def test_damaged_values_are_misses(self) -> None:
        store = DictStore()
        store.data[b"k"] = b"not a vector"
        shared = SharedStore(store)
        assert shared.lookup([b"k"]) == {} and shared.stats.damaged == 1

    def test_a_damaged_value_is_replaced_by_the_vector_saved_for_its_key(self) -> None:
        store = DictStore()
        good = np.ones(384, dtype=np.float32) / np.float32(np.sqrt(384))
        store.data[b"narrow"] = pack(np.ones(10, dtype=np.float32))
        store.data[b"intact"] = pack(good)
        shared = SharedStore(store)
        found = shared.lookup([b"narrow", b"intact"], width=384)
        assert list(found) == [b"intact"] and shared.stats.damaged == 1
        shared.save([(b"narrow", good), (b"new", good)])
        shared.flush(5)
        assert store.replaced == [b"narrow"] and shared.stats.repaired == 1 and shared.stats.writes == 1
        assert unpack(store.data[b"narrow"], 384) is not None

    def test_a_refused_store_warns_once_and_is_never_asked_again(self, caplog: pytest.LogCaptureFixture) -> None:
        class Refusing(DictStore):
            def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
                self.gets += 1
                raise ConfigError("memory is not a ragtrim vector store")

        store = Refusing()
        shared = SharedStore(store, retry_after_s=0.0)
        with caplog.at_level(logging.DEBUG, logger="ragtrim"):
            for _ in range(3):
                assert shared.lookup([b"a"]) == {}
            shared.save([(b"a", np.ones(2, dtype=np.float32))])
            shared.flush(5)
        assert store.gets == 1 and store.data == {} and not shared.available()
        assert [r.levelname for r in caplog.records if "vector store" in r.message] == ["WARNING"]
        assert "refused: memory is not a ragtrim vector store" in caplog.records[0].message

    def test_a_failing_store_never_raises_and_is_left_alone(self, caplog: pytest.LogCaptureFixture) -> None:
        store = DictStore()
        store.fail = True
        shared = SharedStore(store, retry_after_s=60)
        with caplog.at_level(logging.WARNING, logger="ragtrim"):
            assert shared.lookup([b"a"]) == {}
            assert shared.lookup([b"b"]) == {}  # the breaker is open: not asked again
        assert store.gets == 1 and shared.stats.errors == 1 and shared.stats.skipped == 1
        assert sum("vector store memory: a lookup failed" in r.message for r in caplog.records) == 1
        shared.save([(b"c", np.ones(2, dtype=np.float32))])
        shared.flush(5)
        assert store.data == {} and shared.stats.skipped == 2

    def test_the_breaker_closes_after_its_time(self) -> None:
        store = DictStore()
        store.fail = True
        shared = SharedStore(store, retry_after_s=0.0)
        shared.lookup([b"a"])
        store.fail = False
        store.data[b"a"] = pack(np.ones(2, dtype=np.float32))
        assert list(shared.lookup([b"a"])) == [b"a"]

    def test_a_full_queue_drops_and_counts(self) -> None:
        gate, entered = threading.Event(), threading.Event()

        class Slow(DictStore):
            def put(self, items: Sequence[tuple[bytes, bytes]]) -> int:
                entered.set()
                gate.wait(10)
                return super().put(items)

        store = Slow()
        shared = SharedStore(store, max_queue=3)
        shared.save([(b"first", np.ones(2, dtype=np.float32))])
        assert entered.wait(10)  # the I/O thread took it and now waits
        shared.save([(bytes([i]), np.ones(2, dtype=np.float32)) for i in range(5)])
        gate.set()
        shared.flush(5)
        assert shared.stats.dropped == 2 and len(store.data) == 4


class TestEmbedderTiers:
    """CachedEmbedder: memory, then the store, then the model; only passages are stored."""

    def test_memory_then_store_then_model(self) -> None:
        store = DictStore()
        first = FakeEmbedder(recipe="fake-v1", vector_store=store)
        scores = first.score("the query", ["passage one", "passage two"])
        open_store(store).flush(5)  # type: ignore[union-attr]
        assert len(store.data) == 2  # the passages, not the query
        second = FakeEmbedder(recipe="fake-v1", vector_store=store)
        assert second.score("the query", ["passage one", "passage two"]) == scores
        assert second.encoded_texts() == ["the query"]  # the passages came from the store
        assert second.score("the query", ["passage one"]) == scores[:1]
        assert second.encoded_texts() == ["the query"]  # and then from memory

    def test_another_model_or_version_never_reuses_vectors(self) -> None:
        store = DictStore()
        FakeEmbedder(recipe="fake-v1", vector_store=store).embed(["passage"])
        open_store(store).flush(5)  # type: ignore[union-attr]
        other = FakeEmbedder(recipe="fake-v2", vector_store=store, dim=8)
        assert other.embed(["passage"]).shape == (1, 8)
        assert other.encoded_texts() == ["passage"]

    def test_without_a_recipe_nothing_is_stored(self) -> None:
        store = DictStore()
        FakeEmbedder(recipe=None, vector_store=store).embed(["passage"])
        open_store(store).flush(5)  # type: ignore[union-attr]
        assert store.data == {} and store.gets == 0

    def test_primed_vectors_are_not_stored(self) -> None:
        store = DictStore()
        e = FakeEmbedder(recipe="fake-v1", vector_store=store)
        e.prime(["elsewhere"], [[1.0] * 16])
        e.embed(["elsewhere"])
        open_store(store).flush(5)  # type: ignore[union-attr]
        assert store.data == {}

    def test_prefetch_reads_the_store_and_writes_what_it_computed(self) -> None:
        store = DictStore()
        FakeEmbedder(recipe="fake-v1", vector_store=store).embed(["seen passage"])
        open_store(store).flush(5)  # type: ignore[union-attr]
        e = FakeEmbedder(recipe="fake-v1", vector_store=store)
        e.prefetch("query", ["seen passage", "new passage"])
        e._drain()
        assert sorted(e.encoded_texts()) == ["new passage", "query"]
        open_store(store).flush(5)  # type: ignore[union-attr]
        assert len(store.data) == 2

    def test_a_broken_store_never_fails_a_trim(self) -> None:
        from ragtrim.api import default_stages
        from ragtrim.pipeline import Pipeline
        from ragtrim.stages.relevance import RelevanceFilter

        store = DictStore()
        store.fail = True
        e = FakeEmbedder(recipe="fake-v1", vector_store=store)
        stages = [RelevanceFilter(scorer=e, top_k=None) if isinstance(s, RelevanceFilter) else s
                  for s in default_stages(budget=20, scorer="bm25")]
        passages = ["alpha beta gamma delta.", "epsilon zeta eta theta.", "iota kappa lambda mu."]
        broken = Pipeline(stages, tokenizer="whitespace").run(passages, query="beta")
        plain = [RelevanceFilter(scorer=FakeEmbedder(recipe="fake-v1", vector_store=None), top_k=None)
                 if isinstance(s, RelevanceFilter) else s for s in default_stages(budget=20, scorer="bm25")]
        assert broken.text == Pipeline(plain, tokenizer="whitespace").run(passages, query="beta").text
        assert open_store(store).stats.errors >= 1  # type: ignore[union-attr]

    def test_a_stored_vector_of_the_wrong_width_is_a_miss_recomputed_and_repaired(self) -> None:
        from ragtrim.pipeline import Pipeline
        from ragtrim.stages.relevance import RelevanceFilter

        store = DictStore()
        passages = ["alpha beta gamma delta.", "epsilon zeta eta theta."]
        store.data[vector_key("fake-v1", passages[0])] = pack(np.ones(10, dtype=np.float32))  # a valid checksum
        e = FakeEmbedder(recipe="fake-v1", vector_store=store)
        stages = [RelevanceFilter(scorer=e, top_k=None)]
        result = Pipeline(stages, tokenizer="whitespace").run(passages, query="beta")  # the only store hit
        plain = Pipeline([RelevanceFilter(scorer=FakeEmbedder(recipe="fake-v1", vector_store=None), top_k=None)],
                         tokenizer="whitespace").run(passages, query="beta")
        assert result.text == plain.text and sorted(e.encoded_texts()) == sorted(["beta", *passages])
        shared = open_store(store)
        assert shared is not None
        shared.flush(5)
        assert shared.stats.damaged == 1 and shared.stats.repaired == 1
        assert unpack(store.data[vector_key("fake-v1", passages[0])], 16) is not None
        later = FakeEmbedder(recipe="fake-v1", vector_store=store)
        later.embed(passages)
        assert later.encoded_texts() == []  # both now read from the store

    def test_a_store_that_cannot_open_is_logged_not_raised(self, caplog: pytest.LogCaptureFixture) -> None:
        e = FakeEmbedder(recipe="fake-v1", vector_store="redis://127.0.0.1:1/0")
        with caplog.at_level(logging.WARNING, logger="ragtrim"):
            assert e.embed(["text"]).shape == (1, 16)


class _HostA(FakeEmbedder):
    """A fake built-in backend: its recipe ends with the host digest, as the ONNX and torch-CPU recipes do."""

    nudge: ClassVar[float] = 0.0  # what this host's kernels add to every vector

    def _recipe(self) -> str | None:
        return f"{self.recipe}/probe-{self.host_digest()}"

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return super()._encode(texts) + np.float32(self.nudge)


class _HostB(_HostA):
    nudge: ClassVar[float] = 1e-6  # the same model and versions on a CPU whose int8 kernels round differently


class TestHostDigest:
    def test_hosts_whose_kernels_round_differently_share_no_vectors(self) -> None:
        store = DictStore()
        _HostA(recipe="minilm-int8", vector_store=store).embed(["passage one", "passage two"])
        open_store(store).flush(5)  # type: ignore[union-attr]
        same_host = _HostA(recipe="minilm-int8", vector_store=store)
        same_host.embed(["passage one", "passage two"])
        assert [t for t in same_host.encoded_texts() if t != PROBE_TEXT] == []  # read from the store
        other_host = _HostB(recipe="minilm-int8", vector_store=store)
        vectors = other_host.embed(["passage one", "passage two"])
        assert [t for t in other_host.encoded_texts() if t != PROBE_TEXT] == ["passage one", "passage two"]
        assert np.array_equal(vectors, _HostB(recipe="minilm-int8", vector_store=None).embed(["passage one",
                                                                                              "passage two"]))

    def test_the_digest_is_the_probe_vector_and_nothing_else(self) -> None:
        a, b = _HostA(recipe="r", vector_store=None), _HostB(recipe="r", vector_store=None)
        assert a.host_digest() == _HostA(recipe="r", vector_store=None).host_digest()
        assert a.host_digest() != b.host_digest()
        assert set(a.encoded_texts()) == {PROBE_TEXT}  # one model pass of the probe per call
