"""The gateway's hardening, each case against a real uvicorn server on real sockets (and a real redis-server where
Redis matters): no request stalls or crashes the gateway, and every answer is an OpenAI error with a code that the
metrics and the request log both record."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragtrim.serve.app import Gateway
from ragtrim.serve.config import parse_config
from ragtrim.text.tokens import WhitespaceCounter
from tests.serve.conftest import ServerThread, debug_requests, read_log, start_redis, wait_idle

CHAT = "/v1/chat/completions"
AUTH = {"authorization": "Bearer sk-alice"}


def chat_body(content: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def raw_http(port: int, request: bytes, *, read_timeout_s: float = 5.0,
             then: bytes = b"", pause_s: float = 0.0) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` on a fresh socket (and ``then`` after ``pause_s``), read until the server closes or the
    timeout; return status, headers (lower-case names) and the raw body bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout_s) as s:
        s.sendall(request)
        if then:
            time.sleep(pause_s)
            try:
                s.sendall(then)
            except OSError:
                pass  # the server answered and closed already
        data = b""
        try:
            while True:
                piece = s.recv(65536)
                if not piece:
                    break
                data += piece
        except (TimeoutError, ConnectionResetError):
            pass
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines or not lines[0].startswith("HTTP/"):
        return 0, {}, data
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers, body


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def error_metric(gw: ServerThread, endpoint: str, status: int, code: str) -> float:
    text = httpx.get(gw.url + "/metrics").text
    return metric(text, f'ragtrim_serve_errors_total{{code="{code}",endpoint="{endpoint}",status="{status}"}}')


def assert_openai_error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["code"] == code, err
    return dict(err)


class TestMalformedBodies:
    @pytest.mark.parametrize("field", ["metadata", "response_format", "tools"])
    def test_deep_json_is_a_400_counted_and_logged(self, fake: Any, gateway: Any, tmp_path: Path,
                                                   field: str) -> None:
        up = fake()
        log = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(log)}})
        r = httpx.post(gw.url + CHAT, json=chat_body(**{field: nested(300)}), headers={"x-request-id": "deep-1"})
        assert_openai_error(r, 400, "json_too_deep")
        assert error_metric(gw, "chat", 400, "json_too_deep") == 1
        entry = read_log(log, 1)[0]
        assert entry["request_id"] == "deep-1" and entry["error_code"] == "json_too_deep"
        assert debug_requests(up) == []

    def test_nesting_within_the_limit_is_forwarded(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        assert httpx.post(gw.url + CHAT, json=chat_body(metadata=nested(40))).status_code == 200

    @pytest.mark.parametrize("value", ["yes", 1, None.__class__.__name__])
    def test_stream_must_be_a_bool(self, fake: Any, gateway: Any, value: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        err = assert_openai_error(httpx.post(gw.url + CHAT, json=chat_body(stream=value)), 400, "invalid_type")
        assert err["param"] == "stream"
        assert debug_requests(up) == []
        assert httpx.post(gw.url + CHAT, json=chat_body(stream=False)).status_code == 200
        assert httpx.post(gw.url + CHAT, json=chat_body(stream=None)).status_code == 200

    def test_n_is_capped_by_max_n(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_n": 4}})
        err = assert_openai_error(httpx.post(gw.url + CHAT, json=chat_body(n=100)), 400, "invalid_value")
        assert err["param"] == "n" and "limits.max_n" in err["message"]
        assert_openai_error(httpx.post(gw.url + "/v1/completions", json={"model": "m", "prompt": "x", "best_of": 9}),
                            400, "invalid_value")
        assert_openai_error(httpx.post(gw.url + CHAT, json=chat_body(n="2")), 400, "invalid_type")
        assert httpx.post(gw.url + CHAT, json=chat_body(n=4)).status_code == 200
        assert [r["body"]["n"] for r in debug_requests(up)] == [4]

    def test_default_max_n(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        assert_openai_error(httpx.post(gw.url + CHAT, json=chat_body(n=17)), 400, "invalid_value")


class TestHiddenText:
    """max_input_tokens counts every text-bearing field that goes upstream (about 2,000 words each here)."""

    BIG = "word " * 2000

    @pytest.mark.parametrize("extra", [
        {"prediction": {"type": "content", "content": BIG}},
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "description": BIG}}},
        {"stop": [BIG]},
        {"metadata": {"note": BIG}},
    ])
    def test_top_level_fields_count(self, fake: Any, gateway: Any, extra: dict[str, Any]) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_input_tokens": 200}})
        assert_openai_error(httpx.post(gw.url + CHAT, json=chat_body(**extra)), 400, "context_length_exceeded")
        assert debug_requests(up) == []

    def test_non_text_parts_and_message_fields_count(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_input_tokens": 200}})
        parts = {"model": "m", "messages": [{"role": "user", "content": [{"type": "input_text", "text": self.BIG}]}]}
        assert_openai_error(httpx.post(gw.url + CHAT, json=parts), 400, "context_length_exceeded")
        extra = {"model": "m", "messages": [{"role": "assistant", "content": "ok", "refusal": self.BIG},
                                            {"role": "user", "content": "hi"}]}
        assert_openai_error(httpx.post(gw.url + CHAT, json=extra), 400, "context_length_exceeded")
        suffix = {"model": "m", "prompt": "x", "suffix": self.BIG}
        assert_openai_error(httpx.post(gw.url + "/v1/completions", json=suffix), 400, "context_length_exceeded")
        assert debug_requests(up) == []

    def test_media_parts_are_left_to_the_model_server(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_input_tokens": 200}})
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50_000}}
        body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "what is it?"},
                                                                         image]}]}
        assert httpx.post(gw.url + CHAT, json=body).status_code == 200


class SlowCounter(WhitespaceCounter):
    """Whitespace counts, but counting a text that contains SLOW takes 1.5 s (sleeping: the GIL is free)."""

    def count(self, text: str) -> int:
        if "SLOW" in text:
            time.sleep(1.5)
        return super().count(text)


class TestEventLoop:
    @pytest.mark.parametrize("body", [
        json.dumps(chat_body("SLOW " + "x " * 100)).encode(),
        # the field name escaped: the gateway once looked for the literal bytes "documents" to pick a thread
        (b'{"model":"m","messages":[{"role":"user","content":"capital?"}],'
         b'"\\u0064ocuments":["SLOW Paris is the capital of France.","Bananas are yellow."]}'),
    ], ids=["plain", "escaped-documents"])
    def test_counting_never_blocks_healthz(self, fake: Any, servers: list[ServerThread], body: bytes) -> None:
        up = fake()
        gw = Gateway(parse_config({"upstream": {"url": up.url + "/v1"}, "trim": {"budget": 5}}),
                     counter=SlowCounter())
        server = ServerThread(gw.app()).start()
        servers.append(server)
        result: dict[str, Any] = {}

        def send() -> None:
            result["r"] = httpx.post(server.url + CHAT, content=body, timeout=30)

        t = threading.Thread(target=send)
        t.start()
        time.sleep(0.3)  # the request is being counted now
        t0 = time.perf_counter()
        health = httpx.get(server.url + "/healthz", timeout=30)
        health_s = time.perf_counter() - t0
        t.join()
        assert health.status_code == 200 and result["r"].status_code == 200
        assert health_s < 0.5, health_s  # on the loop it waited for the 1.5 s count


class TestBodyLimits:
    def test_declared_length_over_the_cap_is_413_without_reading(self, fake: Any, gateway: Any,
                                                                 tmp_path: Path) -> None:
        up = fake()
        log = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_body_bytes": 4096},
                         "log": {"path": str(log)}})
        head = (f"POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                f"content-length: {20_000_000}\r\nx-request-id: big-1\r\n\r\n").encode()
        t0 = time.monotonic()
        status, headers, body = raw_http(gw.port, head + b'{"model":', read_timeout_s=5)
        assert time.monotonic() - t0 < 3
        assert status == 413 and headers.get("connection") == "close"
        assert json.loads(body)["error"]["code"] == "request_too_large"
        assert read_log(log, 1)[0]["error_code"] == "request_too_large"
        assert error_metric(gw, "chat", 413, "request_too_large") == 1

    def test_chunked_body_over_the_cap_is_413(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_body_bytes": 4096}})

        def chunks() -> Any:
            for _ in range(100):
                yield b"x" * 1000

        r = httpx.post(gw.url + CHAT, content=chunks())
        assert_openai_error(r, 413, "request_too_large")

    def test_body_at_the_cap_is_read(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_body_bytes": 4096}})
        body = json.dumps(chat_body("y" * 3000)).encode()
        assert len(body) <= 4096 and httpx.post(gw.url + CHAT, content=body).status_code == 200

    def test_stalled_body_is_408_and_closed(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"body_timeout_s": 0.5}})
        head = (f"POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                "content-length: 1000\r\n\r\n").encode()
        t0 = time.monotonic()
        status, headers, body = raw_http(gw.port, head + b'{"model"', read_timeout_s=10)
        assert status == 408 and time.monotonic() - t0 < 5
        assert headers.get("connection") == "close"
        assert json.loads(body)["error"]["code"] == "request_timeout"

    def test_slow_body_within_the_deadline_is_served(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"body_timeout_s": 5}})
        body = json.dumps(chat_body()).encode()
        head = (f"POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
        status, _, _ = raw_http(gw.port, head + body[:10], then=body[10:], pause_s=0.5)
        assert status == 200


class TestErrorsEverywhere:
    def test_404_and_405_are_json_counted_and_logged(self, fake: Any, gateway: Any, tmp_path: Path) -> None:
        up = fake()
        log = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(log)}})
        assert_openai_error(httpx.post(gw.url + "/v1/nope", json={}), 404, "not_found")
        r = httpx.get(gw.url + CHAT)
        assert_openai_error(r, 405, "method_not_allowed")
        assert "POST" in r.headers["allow"]
        assert error_metric(gw, "other", 404, "not_found") == 1
        assert error_metric(gw, "other", 405, "method_not_allowed") == 1
        assert [e["error_code"] for e in read_log(log, 2)] == ["not_found", "method_not_allowed"]

    def test_a_bug_is_a_json_500_counted_and_logged(self, fake: Any, servers: list[ServerThread],
                                                    tmp_path: Path) -> None:
        class Broken(WhitespaceCounter):
            def count(self, text: str) -> int:
                raise RuntimeError("a bug")

        up = fake()
        log = tmp_path / "requests.jsonl"
        gw = Gateway(parse_config({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(log)}}),
                     counter=Broken())
        server = ServerThread(gw.app()).start()
        servers.append(server)
        assert_openai_error(httpx.post(server.url + CHAT, json=chat_body()), 500, "internal_error")
        assert error_metric(server, "chat", 500, "internal_error") == 1
        assert read_log(log, 1)[0]["outcome"] == "internal_error"

    def test_every_gateway_error_has_a_string_code(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        bad = [b"{nope", b"[]", b'{"messages": 5}', (b'{"messages": [{"role": "user", "content": "x"}], '
               b'"max_tokens": "many"}'), b'{"messages": [{"role": "user", "content": "x"}], "ragtrim": 5}',
               b'{"messages": [{"role": "user", "content": "x"}], "documents": 5}']
        for body in bad:
            r = httpx.post(gw.url + CHAT, content=body)
            assert r.status_code == 400 and isinstance(r.json()["error"]["code"], str), r.text

    def test_upstream_errors_get_a_string_code(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        assert_openai_error(httpx.post(gw.url + CHAT, json={**chat_body(), "model": "fail-400"}), 400,
                            "upstream_400")


class TestLogWithoutText:
    def test_no_client_text_in_error_model_or_field_names(self, fake: Any, gateway: Any, tmp_path: Path) -> None:
        up = fake()
        log = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(log)}})
        secret = "SECRET plans for the merger"
        httpx.post(gw.url + CHAT, json={**chat_body(), "model": secret})
        httpx.post(gw.url + CHAT, json={**chat_body(), "ragtrim": {"budget": secret}})
        httpx.post(gw.url + CHAT, json={**chat_body(), "ragtrim": {secret: 1}})
        httpx.post(gw.url + CHAT, json={**chat_body(), secret: 1})
        httpx.post(gw.url + "/v1/" + secret.replace(" ", "-"), json={})
        entries = read_log(log, 5)
        assert len(entries) == 5
        assert "SECRET" not in log.read_text()
        assert entries[0]["model"] == "<redacted>" and entries[3]["removed_fields"] == ["<redacted>"]
        assert [e["error_code"] for e in entries[1:3]] == ["invalid_value", "unknown_parameter"]

    def test_model_ids_are_kept(self, fake: Any, gateway: Any, tmp_path: Path) -> None:
        up = fake()
        log = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(log)}})
        httpx.post(gw.url + CHAT, json={**chat_body(), "model": "google/gemma-3-12b-it", "top_k": 3})
        entry = read_log(log, 1)[0]
        assert entry["model"] == "google/gemma-3-12b-it" and entry["removed_fields"] == ["top_k"]


class TestHttp10:
    def test_stream_to_an_http10_client_has_no_chunked_framing(self, fake: Any, gateway: Any) -> None:
        up = fake(output_tokens=3)
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        body = json.dumps(chat_body(stream=True)).encode()
        req = (f"POST {CHAT} HTTP/1.0\r\nhost: x\r\ncontent-type: application/json\r\n"
               f"content-length: {len(body)}\r\n\r\n").encode() + body
        status, headers, raw = raw_http(gw.port, req)
        assert status == 200 and "transfer-encoding" not in headers
        assert int(headers["content-length"]) == len(raw)
        assert headers["content-type"].startswith("text/event-stream")
        events = [b[6:] for b in raw.decode().split("\n\n") if b.startswith("data: ")]
        assert events[-1] == "[DONE]" and len(events) == 4

    def test_http11_stream_is_still_chunked(self, fake: Any, gateway: Any) -> None:
        up = fake(output_tokens=3)
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        with httpx.stream("POST", gw.url + CHAT, json=chat_body(stream=True)) as r:
            assert r.headers.get("transfer-encoding") == "chunked"
            r.read()


class TestRetriesAndRefunds:
    def test_never_fitting_429_says_do_not_retry(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"},
                         "keys": {"sk-alice": {"user": "alice", "org": "acme", "tpm": 100}}})
        r = httpx.post(gw.url + CHAT, json=chat_body("w " * 300), headers=AUTH)
        assert_openai_error(r, 429, "rate_limit_exceeded")
        assert r.headers["x-should-retry"] == "false" and "retry-after" not in r.headers
        ok = httpx.post(gw.url + CHAT, json=chat_body(max_tokens=5), headers=AUTH)
        assert ok.status_code == 200 and "x-should-retry" not in ok.headers

    def test_client_leaving_the_queue_gets_its_rpm_back(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=1000)
        keys = {"sk-alice": {"user": "alice", "org": "acme", "rpm": 2}}
        gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys, "orgs": {"acme": {"concurrency": 1}},
                         "limits": {"queue_timeout_s": 5}})

        async def run() -> list[int]:
            async with httpx.AsyncClient(timeout=10) as c:
                first = asyncio.ensure_future(c.post(gw.url + CHAT, json=chat_body(), headers=AUTH))
                await asyncio.sleep(0.2)
                with pytest.raises(httpx.ReadTimeout):  # queued behind the first; gives up
                    await c.post(gw.url + CHAT, json=chat_body(), headers=AUTH, timeout=0.3)
                done = await first
                wait_idle(g.org_gates["acme"])
                third = await c.post(gw.url + CHAT, json=chat_body(), headers=AUTH)
                return [done.status_code, third.status_code]

        assert asyncio.run(run()) == [200, 200]  # the second request's charge came back
        assert len(debug_requests(up)) == 2
        m = httpx.get(gw.url + "/metrics").text
        assert 'ragtrim_serve_requests_total{endpoint="chat",outcome="client_closed"} 1.0' in m


class TestStateStore:
    def test_org_gate_without_redis_fails_closed_with_a_503(self, fake: Any, gateway: Any) -> None:
        redis = start_redis()
        try:
            up = fake()
            gw, _ = gateway({"upstream": {"url": up.url + "/v1"},
                             "keys": {"sk-alice": {"user": "alice", "org": "acme"}},  # no rpm: no rate call
                             "orgs": {"acme": {"concurrency": 2}},
                             "limits": {"state": redis.url, "fail_open": False, "state_timeout_s": 0.2}})
            assert httpx.post(gw.url + CHAT, json=chat_body(), headers=AUTH).status_code == 200
            redis.stop()
            r = httpx.post(gw.url + CHAT, json=chat_body(), headers=AUTH, timeout=5)
            assert_openai_error(r, 503, "state_unavailable")
            assert r.headers["retry-after"] == "1"
        finally:
            redis.stop()
            shutil.rmtree(redis.dir, ignore_errors=True)

    def test_frozen_redis_costs_one_timeout_not_one_per_request(self, fake: Any, gateway: Any) -> None:
        redis = start_redis()
        try:
            up = fake()
            gw, _ = gateway({"upstream": {"url": up.url + "/v1"},
                             "keys": {"sk-alice": {"user": "alice", "org": "acme", "rpm": 1000}},
                             "orgs": {"acme": {"concurrency": 4}},
                             "limits": {"state": redis.url, "state_timeout_s": 0.3}})  # breaker: 2 s default
            assert httpx.post(gw.url + CHAT, json=chat_body(), headers=AUTH).status_code == 200
            assert redis.proc is not None
            os.kill(redis.proc.pid, signal.SIGSTOP)  # frozen: connections open, nothing answers
            try:
                t0 = time.perf_counter()
                codes = [httpx.post(gw.url + CHAT, json=chat_body(), headers=AUTH, timeout=10).status_code
                         for _ in range(6)]
                elapsed = time.perf_counter() - t0
            finally:
                os.kill(redis.proc.pid, signal.SIGCONT)
            assert codes == [200] * 6  # fail_open
            # Without the breaker every request waited out the rate call and the org lease: 6 x 2 x 0.3 s = 3.6 s;
            # with it, one or two timeouts (0.3-0.6 s). The bound leaves room for a loaded machine.
            assert elapsed < 2.5, elapsed
        finally:
            redis.stop()
            shutil.rmtree(redis.dir, ignore_errors=True)


class TestMetricsAuth:
    def test_metrics_bearer_token(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "metrics": {"bearer_token": "scrape-me"}})
        assert_openai_error(httpx.get(gw.url + "/metrics"), 401, "invalid_api_key")
        assert_openai_error(httpx.get(gw.url + "/metrics", headers={"authorization": "Bearer nope"}), 401,
                            "invalid_api_key")
        ok = httpx.get(gw.url + "/metrics", headers={"authorization": "Bearer scrape-me"})
        assert ok.status_code == 200
        assert 'ragtrim_serve_errors_total{code="invalid_api_key",endpoint="metrics",status="401"} 2.0' in ok.text

    def test_metrics_open_by_default(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        assert httpx.get(gw.url + "/metrics").status_code == 200
