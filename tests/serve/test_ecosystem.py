"""What OpenAI-compatible proxies answer besides completions: embeddings, liveness and readiness
probes, and a config reload on SIGHUP, tested on real servers (a real `ragtrim serve` process for the signal)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.conftest import RedisServer, debug_requests, free_port, read_log

EMB = "/v1/embeddings"
AUTH = {"authorization": "Bearer sk-alice"}


class TestEmbeddings:
    def test_forwarded_with_usage(self, fake: Any, gateway: Any, tmp_path: Path) -> None:
        up = fake()
        log = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1", "api_key": "up-key"},
                         "keys": {"sk-alice": {"user": "alice", "org": "acme"}}, "log": {"path": str(log)}})
        r = httpx.post(gw.url + EMB, json={"model": "e", "input": ["one two", "three"], "dimensions": 4,
                                           "vendor": 1}, headers=AUTH)
        assert r.status_code == 200
        data = r.json()["data"]
        assert [d["index"] for d in data] == [0, 1] and len(data[0]["embedding"]) == 4
        sent = debug_requests(up)[0]
        assert sent["path"] == "/v1/embeddings" and sent["headers"]["authorization"] == "Bearer up-key"
        assert sent["body"] == {"model": "e", "input": ["one two", "three"], "dimensions": 4}
        entry = read_log(log, 1)[0]
        assert entry["endpoint"] == "embeddings" and entry["user"] == "alice"
        assert entry["tokens"]["prompt_after"] == 3 and entry["removed_fields"] == ["vendor"]
        m = httpx.get(gw.url + "/metrics").text
        assert 'ragtrim_serve_requests_total{endpoint="embeddings",outcome="ok"} 1.0' in m

    def test_authenticated(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": {"sk-alice": {"user": "alice"}}})
        r = httpx.post(gw.url + EMB, json={"model": "e", "input": "x"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
        assert debug_requests(up) == []

    def test_counted_toward_rpm_and_tpm(self, fake: Any, gateway: Any) -> None:
        up = fake()
        keys = {"sk-alice": {"user": "alice", "org": "acme", "rpm": 2, "tpm": 1000}}
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys})
        first = httpx.post(gw.url + EMB, json={"model": "e", "input": "a b c d e"}, headers=AUTH)
        assert first.status_code == 200
        # Charged 5 tokens (no output), then corrected to the fake's usage: 5 words are ceil(9 / 4) = 3 tokens.
        assert first.headers["x-ratelimit-remaining-tokens"] == str(1000 - 5)
        assert first.headers["x-ratelimit-remaining-requests"] == "1"
        second = httpx.post(gw.url + EMB, json={"model": "e", "input": ["x"] * 3}, headers=AUTH)
        assert second.headers["x-ratelimit-remaining-tokens"] == str(1000 - 3 - 3)
        third = httpx.post(gw.url + EMB, json={"model": "e", "input": "x"}, headers=AUTH)
        assert third.status_code == 429 and third.json()["error"]["code"] == "rate_limit_exceeded"
        huge = httpx.post(gw.url + "/v1/embeddings", json={"model": "e", "input": "w " * 2000},
                          headers={"authorization": "Bearer sk-alice"})
        assert huge.status_code == 429

    def test_max_input_tokens_caps_each_input(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_input_tokens": 10}})
        ok = httpx.post(gw.url + EMB, json={"model": "e", "input": ["w " * 8] * 5})
        assert ok.status_code == 200  # 40 tokens in all, none over 10
        r = httpx.post(gw.url + EMB, json={"model": "e", "input": ["short", "w " * 11]})
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
        assert r.json()["error"]["param"] == "input"

    @pytest.mark.parametrize("body", [{"model": "e"}, {"model": "e", "input": 5}, {"model": "e", "input": []},
                                      {"model": "e", "input": [1, "a"]}])
    def test_bad_input(self, fake: Any, gateway: Any, body: dict[str, Any]) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        r = httpx.post(gw.url + EMB, json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == "input"

    def test_token_arrays(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        r = httpx.post(gw.url + EMB, json={"model": "e", "input": [[1, 2, 3], [4]]})
        assert r.status_code == 200 and len(r.json()["data"]) == 2


class TestProbes:
    def test_liveness_and_readiness(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        assert httpx.get(gw.url + "/health/liveness").json() == {"status": "alive"}
        r = httpx.get(gw.url + "/health/readiness")
        assert r.status_code == 200 and r.json() == {"status": "ready", "upstream": "ok", "state": "memory"}

    def test_not_ready_without_an_upstream(self, gateway: Any) -> None:
        gw, _ = gateway({"upstream": {"url": f"http://127.0.0.1:{free_port()}/v1"}})
        assert httpx.get(gw.url + "/health/liveness").status_code == 200
        r = httpx.get(gw.url + "/health/readiness")
        assert r.status_code == 503 and r.json()["status"] == "not ready"
        assert r.json()["upstream"].startswith("unreachable")

    def test_not_ready_when_the_model_list_is_not_found(self, fake: Any, gateway: Any) -> None:
        """An upstream URL without /v1: the server answers, but GET /models is a 404, as every request would be."""
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url}})
        r = httpx.get(gw.url + "/health/readiness")
        assert r.status_code == 503 and r.json()["status"] == "not ready"
        assert r.json()["upstream"] == (f"answers 404: GET {up.url}/models not found; upstream.url must be the API "
                                        "root the endpoints hang under, usually ending in /v1")
        chat = httpx.post(gw.url + "/v1/chat/completions",
                          json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 404  # what readiness foretold

    @pytest.mark.parametrize(("status", "verdict"), [
        (200, "ok"), (307, "ok"), (429, "ok (answers 429: rate limited)"),
        (401, "answers 401: GET http://u:***@h/v1/models refuses the gateway's credentials (upstream.api_key)"),
        (403, "answers 403: GET http://u:***@h/v1/models refuses the gateway's credentials (upstream.api_key)"),
        (405, "answers 405: GET http://u:***@h/v1/models"), (500, "answers 500: GET http://u:***@h/v1/models"),
    ])
    def test_what_each_status_of_the_model_list_means(self, status: int, verdict: str) -> None:
        from ragtrim.serve.probes import upstream_verdict

        assert upstream_verdict(status, "http://u:pw@h/v1") == verdict

    def test_ready_through_the_fallback(self, fake: Any, gateway: Any) -> None:
        backup = fake(name="backup")
        gw, _ = gateway({"upstream": {"url": f"http://127.0.0.1:{free_port()}/v1",
                                      "fallback_url": backup.url + "/v1"}})
        r = httpx.get(gw.url + "/health/readiness")
        assert r.status_code == 200 and r.json()["upstream"] == "ok (fallback)"

    def test_concurrent_probes_share_one_upstream_call(self, fake: Any, gateway: Any) -> None:
        """100 probes at once while /models takes 0.5 s: one upstream call, every probe answered by it."""
        up = fake(models_ms=500)
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})

        async def probes(n: int) -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=n)
            async with httpx.AsyncClient(timeout=10, limits=limits) as c:
                return await asyncio.gather(*(c.get(gw.url + "/health/readiness") for _ in range(n)))

        answers = asyncio.run(probes(100))
        # One check answers them all. On a loaded host the check itself may pass its 2 s timeout (the client,
        # the gateway and the fake share this process), so the test asks for one shared answer, not for "ok".
        assert len({(r.status_code, r.text) for r in answers}) == 1, answers[0].text
        assert httpx.get(up.url + "/debug/requests").json()["models_calls"] == 1
        time.sleep(1.05)  # past the one-second cache: the next probe checks again, once
        asyncio.run(probes(20))
        assert httpx.get(up.url + "/debug/requests").json()["models_calls"] == 2

    @pytest.mark.parametrize("fail_open", [False, True])
    def test_readiness_follows_redis(self, fake: Any, gateway: Any, fail_open: bool) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install -y redis-server; .ci/run installs it)")
        redis = RedisServer(binary)
        redis.start()
        try:
            up = fake()
            gw, _ = gateway({"upstream": {"url": up.url + "/v1"},
                             "limits": {"state": redis.url, "fail_open": fail_open, "state_timeout_s": 0.2}})
            assert httpx.get(gw.url + "/health/readiness").json()["state"] == "redis ok"
            redis.stop()
            time.sleep(1.05)  # past the one-second cache
            r = httpx.get(gw.url + "/health/readiness")
            assert r.status_code == (200 if fail_open else 503)
            assert r.json()["state"].startswith("redis unreachable")
        finally:
            redis.stop()
            shutil.rmtree(redis.dir, ignore_errors=True)


CONFIG = """
[upstream]
url = "{url}/v1"
tokenizer = "whitespace"

[limits]
max_input_tokens = {max_input}

{keys}
"""


def write_config(path: Path, url: str, keys: dict[str, str], max_input: int = 1000) -> None:
    blocks = "\n".join(f'[keys."{k}"]\nuser = "{u}"\n' for k, u in keys.items())
    path.write_text(CONFIG.format(url=url, keys=blocks, max_input=max_input))


class TestReload:
    def test_sighup_reloads_keys_and_limits_without_dropping_requests(self, fake: Any, tmp_path: Path) -> None:
        up = fake(base_ms=1500)
        cfg = tmp_path / "gateway.toml"
        write_config(cfg, up.url, {"sk-alice": "alice"})
        port = free_port()
        stderr = tmp_path / "stderr.txt"
        with stderr.open("wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "ragtrim", "serve", "--config", str(cfg), "--host",
                                     "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/health/liveness", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
            in_flight: dict[str, Any] = {}

            def slow() -> None:
                in_flight["r"] = httpx.post(url + "/v1/chat/completions", json=body, headers=AUTH, timeout=30)

            t = threading.Thread(target=slow)
            t.start()
            time.sleep(0.5)  # alice's request is at the upstream now
            write_config(cfg, up.url, {"sk-bob": "bob"}, max_input=20)
            os.kill(proc.pid, signal.SIGHUP)
            time.sleep(0.3)
            bob = {"authorization": "Bearer sk-bob"}
            assert httpx.post(url + "/v1/chat/completions", json=body, headers=AUTH, timeout=30).status_code == 401
            long_ = {"model": "m", "messages": [{"role": "user", "content": "w " * 30}]}
            assert httpx.post(url + "/v1/chat/completions", json=long_, headers=bob, timeout=30).status_code == 400
            t.join()
            assert in_flight["r"].status_code == 200  # the request in flight under the old key finished

            cfg.write_text("[upstream]\nurl = 5\n")  # a bad config: refused, the running one kept
            os.kill(proc.pid, signal.SIGHUP)
            time.sleep(0.3)
            write_config(cfg, "http://127.0.0.1:9", {"sk-carol": "carol"})  # a new upstream needs a restart
            os.kill(proc.pid, signal.SIGHUP)
            time.sleep(0.3)
            cfg.write_bytes(b'[upstream]\nurl = "http://127.0.0.1:9/v1"\n# caf\xe9 in Latin-1\n')  # not UTF-8
            os.kill(proc.pid, signal.SIGHUP)
            time.sleep(0.3)
            assert httpx.post(url + "/v1/chat/completions", json=body, headers=bob, timeout=30).status_code == 200
            m = httpx.get(url + "/metrics").text
            assert 'ragtrim_serve_config_reloads_total{result="applied"} 1.0' in m
            assert 'ragtrim_serve_config_reloads_total{result="refused"} 3.0' in m
            assert proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        log = stderr.read_text()
        assert "config reloaded" in log
        assert log.count("config reload refused") == 3 and "upstream changed, which needs a restart" in log
        assert "upstream.url must be" in log
        utf8 = [line for line in log.splitlines() if "not valid UTF-8" in line]
        assert len(utf8) == 1 and "byte 0xe9 on line 3" in utf8[0], log
        assert "Traceback" not in log


class TestGateCapacity:
    """The in-place capacity change a reload makes (unit level: the gate, no server)."""

    def test_raise_lets_waiters_in_and_lower_drains(self) -> None:
        import asyncio

        from ragtrim.serve.limits import FairGate

        async def run() -> list[int]:
            gate = FairGate(name="g", capacity=1, max_queued=10)
            await gate.acquire("a", time.monotonic() + 5)
            waiters = [asyncio.ensure_future(gate.acquire(u, time.monotonic() + 5)) for u in ("b", "c")]
            await asyncio.sleep(0.01)
            seen = [gate.in_use, gate.queued]
            gate.set_capacity(3)
            await asyncio.gather(*waiters)
            seen += [gate.in_use, gate.queued]
            gate.set_capacity(1)
            gate.release()
            gate.release()
            seen.append(gate.in_use)
            late = asyncio.ensure_future(gate.acquire("d", time.monotonic() + 5))
            await asyncio.sleep(0.01)
            seen.append(int(late.done()))
            gate.release()
            await late
            seen.append(gate.in_use)
            return seen

        assert asyncio.run(run()) == [1, 2, 3, 0, 1, 0, 1]


