"""The limiter's state cannot be starved silently: the limiter and the vector store may not share a Redis server, and a
Redis that cannot run the rate-limit scripts (full at maxmemory, down, refusing the password) is counted, logged at
most once per interval, and shown by readiness and /healthz, while ``fail_open`` admits or refuses as configured.
Tested on real redis-servers with a small maxmemory."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragtrim.errors import ConfigError
from ragtrim.serve.config import parse_config
from ragtrim.serve.limiter import LimiterWatch, check_state_servers, shared_redis_problem
from ragtrim.serve.metrics import GatewayMetrics
from ragtrim.vectors import store as store_mod
from tests.serve.conftest import RedisServer, start_redis

CHAT = "/v1/chat/completions"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
AUTH = {"authorization": "Bearer sk-alice"}


@pytest.fixture(autouse=True)
def _reset_default_store() -> Iterator[None]:
    yield
    store_mod._DEFAULT = None


@pytest.fixture
def redis_servers() -> Iterator[list[RedisServer]]:
    started: list[RedisServer] = []
    yield started
    for r in started:
        r.stop()
        shutil.rmtree(r.dir, ignore_errors=True)


def metric(text: str, line_start: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start))


def fill(server: RedisServer) -> int:
    """Another application's data until the server refuses writes (maxmemory under noeviction)."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=server.port)
    n = 0
    try:
        while n < 10_000:
            client.set(f"other-app:{n}", b"x" * 65536)
            n += 1
    except redis.ResponseError as exc:
        assert "maxmemory" in str(exc)  # redis-py's OutOfMemoryError
        # The refused SET's 64 KiB left with it: keep the server full, as data that keeps coming would.
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", str(used - 256 * 1024))
    finally:
        client.close()
    assert n < 10_000, "the server never filled up"
    return n


class TestSharedRedisIsRefused:
    @pytest.mark.parametrize(("state", "vectors"), [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/1"),        # another database: same maxmemory
        ("redis://localhost:6379/0", "redis://127.0.0.1/3"),             # loopback names, default port
        ("redis://:pw@cache.internal:6380/0", "rediss://cache.internal:6380/2"),
        ("unix:///run/redis.sock?db=0", "unix:///run/redis.sock?db=4"),
    ])
    def test_one_server_in_the_config(self, state: str, vectors: str) -> None:
        with pytest.raises(ConfigError, match="are one Redis server: passage vectors would fill its maxmemory"):
            parse_config({"upstream": {"url": "http://u/v1"}, "limits": {"state": state},
                          "trim": {"vector_store": vectors}})

    @pytest.mark.parametrize(("state", "vectors"), [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6380/0"),
        ("redis://limits.internal/0", "redis://vectors.internal/0"),
        ("redis://127.0.0.1:6379/0", "/var/cache/ragtrim/vectors.sqlite3"),
        ("memory", "redis://127.0.0.1:6379/0"),
    ])
    def test_separate_servers_are_fine(self, state: str, vectors: str) -> None:
        assert shared_redis_problem(state, vectors) is None

    def test_the_default_store_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        pytest.importorskip("starlette")
        from ragtrim.serve.app import Gateway

        monkeypatch.setenv("RAGTRIM_VECTOR_STORE", "redis://127.0.0.1:6379/7")
        config = parse_config({"upstream": {"url": "http://u/v1"}, "limits": {"state": "redis://localhost/0"}})
        with pytest.raises(ConfigError, match=r"the vector store \(redis://127.0.0.1:6379/7\) are one Redis server"):
            Gateway(config)

    def test_one_server_under_two_names_at_start(self, redis_servers: list[RedisServer], tmp_path: Path) -> None:
        sock = tmp_path / "redis.sock"
        server = start_redis("--unixsocket", str(sock), "--unixsocketperm", "700")
        redis_servers.append(server)
        state, vectors = server.url, f"unix://{sock}?db=3"
        assert shared_redis_problem(state, vectors) is None  # the names differ
        with pytest.raises(ConfigError, match=r"are one Redis server \(one server under two names: the same run_id"):
            check_state_servers(state, vectors)
        other = start_redis()
        redis_servers.append(other)
        assert check_state_servers(state, other.url) == []
        # `ragtrim serve` asks before it serves: exit 2, one line.
        config = tmp_path / "gateway.toml"
        config.write_text(f'[upstream]\nurl = "http://127.0.0.1:9/v1"\n[limits]\nstate = "{state}"\n'
                          f'[trim]\nvector_store = "{vectors}"\n')
        out = subprocess.run([sys.executable, "-m", "ragtrim", "serve", "--config", str(config)],
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 2 and "the same run_id" in out.stderr and "Traceback" not in out.stderr

    @pytest.mark.parametrize(("policy", "warned"), [("allkeys-lru", True), ("volatile-lru", True),
                                                    ("noeviction", False)])
    def test_an_evicting_limiter_redis_is_named(self, redis_servers: list[RedisServer], policy: str,
                                                warned: bool) -> None:
        server = start_redis("--maxmemory", "8mb", "--maxmemory-policy", policy)
        redis_servers.append(server)
        warnings = check_state_servers(server.url, "off")
        assert len(warnings) == int(warned)
        if warned:
            assert f"maxmemory-policy {policy}: once full it evicts keys, rate windows among them" in warnings[0]


class TestLimiterWatch:
    def test_one_line_per_interval_and_one_for_the_recovery(self, caplog: pytest.LogCaptureFixture) -> None:
        now = [100.0]
        metrics = GatewayMetrics()
        watch = LimiterWatch(metrics, fail_open=lambda: True, log_every_s=30.0, clock=lambda: now[0])
        caplog.set_level(logging.INFO, logger="ragtrim.serve")
        for _ in range(500):
            watch.failed("redis at redis://:hunter2hunter2@h:6379/0: OOM command not allowed", limit="rate",
                         decided="admitted")
            now[0] += 0.01
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "admits requests WITHOUT their rate and concurrency limits" in lines[0]
        assert "hunter2" not in lines[0] and "(1 requests admitted without limits, 0 refused" in lines[0]
        now[0] += 30
        watch.failed("OOM", limit="slots", decided="admitted")
        assert len(caplog.records) == 2 and "(500 requests admitted" in caplog.records[1].getMessage()
        now[0] += 31
        watch.worked()
        watch.worked()
        assert len(caplog.records) == 3 and "answers again after 66.0 s" in caplog.records[2].getMessage()
        text = metrics.render().decode()
        assert 'ragtrim_serve_limiter_unavailable_total{action="admitted",limit="rate"} 500.0' in text
        assert 'ragtrim_serve_limiter_unavailable_total{action="admitted",limit="slots"} 1.0' in text
        assert "ragtrim_serve_limiter_failing 0.0" in text

    def test_a_flapping_store_cannot_flood_the_log(self, caplog: pytest.LogCaptureFixture) -> None:
        now = [0.0]
        watch = LimiterWatch(GatewayMetrics(), fail_open=lambda: False, log_every_s=30.0, clock=lambda: now[0])
        caplog.set_level(logging.INFO, logger="ragtrim.serve")
        for _ in range(1000):  # fails, answers, fails, ... every 10 ms for 10 s
            watch.failed("down", limit="rate", decided="refused")
            now[0] += 0.005
            watch.worked()
            now[0] += 0.005
        assert len(caplog.records) == 1 and "refuses requests with a 503" in caplog.records[0].getMessage()


@pytest.mark.parametrize("fail_open", [True, False])
def test_a_full_redis_fails_as_configured_and_loudly(redis_servers: list[RedisServer], fake: Any, gateway: Any,
                                                     caplog: pytest.LogCaptureFixture, fail_open: bool) -> None:
    """A Redis full of other data made rpm = 3 admit 8 of 8 with nothing in the log."""
    server = start_redis("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    redis_servers.append(server)
    up = fake()
    caplog.set_level(logging.INFO, logger="ragtrim.serve")
    gw, _ = gateway({"upstream": {"url": up.url + "/v1"},
                     "keys": {"sk-alice": {"user": "alice", "org": "acme", "rpm": 3}},
                     "limits": {"state": server.url, "fail_open": fail_open, "state_timeout_s": 2.0}})
    assert httpx.get(gw.url + "/health/readiness").json()["state"] == "redis ok"
    fill(server)
    codes = [httpx.post(gw.url + CHAT, json=BODY, headers=AUTH, timeout=10).status_code for _ in range(8)]
    assert codes == ([200] * 8 if fail_open else [503] * 8)
    m = httpx.get(gw.url + "/metrics").text
    action = "admitted" if fail_open else "refused"
    assert metric(m, f'ragtrim_serve_limiter_unavailable_total{{action="{action}",limit="rate"}}') == 8
    assert metric(m, "ragtrim_serve_limiter_failing ") == 1
    lines = [r.getMessage() for r in caplog.records if "limiter's state store fails" in r.getMessage()]
    assert len(lines) == 1 and "command not allowed when used memory > 'maxmemory'" in lines[0], lines
    time.sleep(1.05)  # past readiness's one-second cache
    for path in ("/health/readiness", "/healthz"):
        r = httpx.get(gw.url + path)
        assert r.status_code == (200 if fail_open else 503), r.text
        body = r.json()
        assert body["state"] == "redis refuses writes" and "maxmemory" in body["state_error"]
        assert body["limits"].startswith("off: failing open" if fail_open else "failing closed")
    server.flush()  # room again: the limiter runs, and says so
    time.sleep(2.1)  # past the state breaker
    r = httpx.get(gw.url + "/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok", "state": "redis ok"}
    r = httpx.post(gw.url + CHAT, json=BODY, headers=AUTH)
    assert r.status_code == 200 and r.headers["x-ratelimit-limit-requests"] == "3"
    assert metric(httpx.get(gw.url + "/metrics").text, "ragtrim_serve_limiter_failing ") == 0
