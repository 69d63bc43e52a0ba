"""Shared limits through a real redis-server: two replicas hold one rpm; Redis down follows fail_open."""

from __future__ import annotations

import asyncio
import shutil
import time
from typing import Any

import httpx
import pytest

from tests.serve.conftest import RedisServer, wait_idle

CHAT = "/v1/chat/completions"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def keys(rpm: int | None = None, tpm: int | None = None) -> dict[str, Any]:
    k: dict[str, Any] = {"user": "alice", "org": "acme"}
    if rpm is not None:
        k["rpm"] = rpm
    if tpm is not None:
        k["tpm"] = tpm
    return {"sk-alice": k}


AUTH = {"authorization": "Bearer sk-alice"}


def spread(a: Any, b: Any, n: int) -> list[int]:
    """Status codes of ``n`` concurrent chat requests sent alternately to gateway replicas ``a`` and ``b``."""

    async def run() -> list[int]:
        async with httpx.AsyncClient(timeout=10) as c:
            rs = await asyncio.gather(*(c.post((a if i % 2 else b).url + CHAT, json=BODY, headers=AUTH)
                                        for i in range(n)))
            return [r.status_code for r in rs]

    return asyncio.run(run())


def test_two_replicas_share_rpm_within_5_percent(redis_server: RedisServer, fake: Any, gateway: Any) -> None:
    redis_server.flush()
    up = fake()
    # A generous state timeout: on a loaded 2-core box a timed-out Redis call fails open and admits.
    cfg = {"upstream": {"url": up.url + "/v1"}, "keys": keys(rpm=60),
           "limits": {"state": redis_server.url, "state_timeout_s": 5.0}}
    a, _ = gateway(cfg)
    b, _ = gateway(cfg)

    codes = spread(a, b, 150)
    admitted = codes.count(200)
    assert set(codes) <= {200, 429}
    assert abs(admitted - 60) <= 3, admitted  # one memory store per replica would admit 120
    r = httpx.post(a.url + CHAT, json=BODY, headers=AUTH)
    assert r.status_code == 429 and r.headers["x-ratelimit-remaining-requests"] == "0"
    for replica in (a, b):
        assert "ragtrim_serve_state_errors_total 0.0" in httpx.get(replica.url + "/metrics").text


def test_tpm_correction_is_shared(redis_server: RedisServer, fake: Any, gateway: Any) -> None:
    redis_server.flush()
    up = fake(output_tokens=2)
    cfg = {"upstream": {"url": up.url + "/v1"}, "keys": keys(tpm=1000),
           "limits": {"state": redis_server.url, "max_output_tokens": 400}}
    a, _ = gateway(cfg)
    b, _ = gateway(cfg)
    httpx.post(a.url + CHAT, json=BODY, headers=AUTH)
    r = httpx.post(b.url + CHAT, json=BODY, headers=AUTH)
    # a's request was charged 8 + 400 and corrected to its usage (2 + 2); b sees that and its own estimate.
    assert r.headers["x-ratelimit-remaining-tokens"] == str(1000 - 4 - 408)


def test_a_burst_waits_at_most_one_window_across_replicas(redis_server: RedisServer, fake: Any,
                                                           gateway: Any) -> None:
    """The charges' times are kept in Redis too: after a burst, retry and reset are within the 4 s window, and the
    request fits again when they say."""
    redis_server.flush()
    up = fake()
    cfg = {"upstream": {"url": up.url + "/v1"}, "keys": keys(rpm=2),
           "limits": {"state": redis_server.url, "state_timeout_s": 5.0, "window_s": 4}}
    a, _ = gateway(cfg)
    b, _ = gateway(cfg)
    assert [httpx.post(g.url + CHAT, json=BODY, headers=AUTH).status_code for g in (a, b)] == [200, 200]
    limited = httpx.post(a.url + CHAT, json=BODY, headers=AUTH)
    assert limited.status_code == 429
    wait_s = float(limited.json()["error"]["message"].rpartition("retry in ")[2].removesuffix(" s"))
    assert 0 < wait_s <= 4.0 and int(limited.headers["retry-after"]) <= 4
    time.sleep(wait_s + 0.2)
    assert httpx.post(b.url + CHAT, json=BODY, headers=AUTH).status_code == 200


def test_a_refund_after_the_window_turned_leaves_the_previous_window(redis_server: RedisServer) -> None:
    """The Lua side of a refund: the current window holds nothing of the key, so the refund leaves the previous
    window's count (never below zero) instead of vanishing into the current one."""
    import redis.asyncio as aioredis

    from ragtrim.serve.rate_store import RedisRateStore

    async def run() -> tuple[Any, Any]:
        store = RedisRateStore(url=redis_server.url, window_s=60, prefix="t:rl")
        client = aioredis.from_url(redis_server.url)
        seconds, micros = await client.time()
        idx = int((seconds * 1000 + micros // 1000) // 60_000)
        await client.hset(f"t:rl:k:{idx - 1}", mapping={"r": 2, "t": 50})
        await store.adjust("k", -1, -80)
        prev = await client.hgetall(f"t:rl:k:{idx - 1}")
        cur = await client.hgetall(f"t:rl:k:{idx}")
        await store.close()
        await client.aclose()
        return prev, cur

    prev, cur = asyncio.run(run())
    assert (int(prev[b"r"]), int(prev[b"t"])) == (1, 0)
    assert int(cur.get(b"r", 0)) == 0 and int(cur.get(b"t", 0)) == 0


def test_two_replicas_share_org_concurrency(redis_server: RedisServer, fake: Any, gateway: Any) -> None:
    redis_server.flush()
    up = fake(base_ms=500)
    cfg = {"upstream": {"url": up.url + "/v1"}, "keys": keys(), "orgs": {"acme": {"concurrency": 2}},
           "limits": {"state": redis_server.url, "queue_timeout_s": 0.25, "state_timeout_s": 5.0}}
    a, ga = gateway(cfg)
    b, gb = gateway(cfg)

    codes = spread(a, b, 6)
    assert sorted(codes) == [200, 200, 429, 429, 429, 429]  # per-replica gates alone would admit 4
    assert httpx.get(up.url + "/debug/requests").json()["max_active"] == 2
    # Every lease went back: two more requests run at once again.
    for g in (ga, gb):
        wait_idle(g.org_gates["acme"])
    time.sleep(0.2)  # leases go back to Redis in a task just after the local slot
    codes = spread(a, b, 6)
    assert codes.count(200) == 2
    for g in (ga, gb):
        gate = wait_idle(g.org_gates["acme"])
        assert gate is not None and gate.in_use == 0 and gate.queued == 0


@pytest.mark.parametrize("fail_open", [True, False])
def test_redis_down_follows_fail_open(fail_open: bool, fake: Any, gateway: Any) -> None:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server; .ci/run installs it)")
    redis = RedisServer(binary)
    redis.start()
    try:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys(rpm=100),
                         "orgs": {"acme": {"concurrency": 4}},
                         "limits": {"state": redis.url, "fail_open": fail_open, "state_timeout_s": 0.2,
                                    "state_breaker_s": 0.3}})
        assert httpx.post(gw.url + CHAT, json=BODY, headers=AUTH).status_code == 200
        assert httpx.get(gw.url + "/healthz").json()["state"] == "redis ok"
        redis.stop()
        r = httpx.post(gw.url + CHAT, json=BODY, headers=AUTH, timeout=5)
        if fail_open:
            assert r.status_code == 200
            assert "x-ratelimit-limit-requests" not in r.headers
        else:
            assert r.status_code == 503
            assert r.json()["error"]["code"] == "state_unavailable"
        assert r.elapsed.total_seconds() < 1.0
        health = httpx.get(gw.url + "/healthz")
        assert health.json()["state"] == "redis unreachable"
        assert health.status_code == (200 if fail_open else 503)
        # fail open: the rate window and the org slot each failed once; fail closed stops at the rate window.
        errors = "2.0" if fail_open else "1.0"
        assert f"ragtrim_serve_state_errors_total {errors}" in httpx.get(gw.url + "/metrics").text
        redis.start()  # back: limits apply again on the same port, once the circuit breaker lets a call through
        time.sleep(0.35)
        r = httpx.post(gw.url + CHAT, json=BODY, headers=AUTH)
        assert r.status_code == 200 and r.headers["x-ratelimit-limit-requests"] == "100"
    finally:
        redis.stop()
        shutil.rmtree(redis.dir, ignore_errors=True)


def test_the_rate_store_client_never_retries_and_warns_of_nothing(redis_server: RedisServer) -> None:
    """The asyncio client gets redis' asyncio retry policy (no retries: a down Redis costs one fast failure), not
    the synchronous one, which redis converts with a warning and without its behaviour."""
    import warnings

    import redis.asyncio.retry

    from ragtrim.serve.rate_store import RedisRateStore

    async def run() -> Any:
        store = RedisRateStore(url=redis_server.url, window_s=60, prefix="t:warn")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            client = store._redis()
            await client.ping()
        retry = client.get_retry()
        await store.close()
        return retry

    retry = asyncio.run(run())
    assert isinstance(retry, redis.asyncio.retry.Retry)
    assert retry.get_retries() == 0
