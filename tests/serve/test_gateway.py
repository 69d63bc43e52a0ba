"""The gateway end to end: real uvicorn servers, a fake upstream, real sockets."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.conftest import debug_requests, read_log, wait_idle

KEYS = {"sk-alice": {"user": "alice", "org": "acme"}, "sk-bob": {"user": "bob", "org": "acme"}}
CHAT = "/v1/chat/completions"


def seconds(reset: str) -> float:
    """An ``x-ratelimit-reset-*`` value (``120ms``, ``7.5s``, ``1m30s``) in seconds."""
    if reset.endswith("ms"):
        return float(reset[:-2]) / 1000
    minutes, _, rest = reset.removesuffix("s").rpartition("m")
    return (float(minutes) * 60 if minutes else 0.0) + float(rest)


def auth(key: str = "sk-alice") -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def chat_body(content: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def sse_events(text: str) -> list[Any]:
    out = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


class TestAuth:
    def test_missing_key_is_401(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS})
        r = httpx.post(gw.url + CHAT, json=chat_body())
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "missing_api_key"

    def test_unknown_key_is_401(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS})
        r = httpx.post(gw.url + CHAT, json=chat_body(), headers=auth("sk-nobody"))
        assert r.status_code == 401
        assert r.json()["error"] == {"message": "invalid API key", "type": "invalid_request_error", "param": None,
                                     "code": "invalid_api_key"}
        assert debug_requests(up) == []

    def test_open_mode_without_keys(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        assert httpx.post(gw.url + CHAT, json=chat_body()).status_code == 200

    def test_upstream_gets_its_own_key_not_the_clients(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1", "api_key": "up-key"}, "keys": KEYS})
        httpx.post(gw.url + CHAT, json=chat_body(), headers=auth())
        assert debug_requests(up)[0]["headers"]["authorization"] == "Bearer up-key"


class TestEndpoints:
    def test_chat_non_streaming_forwards_plain_request(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "limits": {"max_output_tokens": 32}})
        r = httpx.post(gw.url + CHAT, json=chat_body(vendor_field=1, top_k=5, ragtrim={"budget": 10}),
                       headers=auth())
        assert r.status_code == 200
        assert r.json()["usage"]["completion_tokens"] == 8
        sent = debug_requests(up)[0]["body"]
        assert sent == {"model": "m", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 32}
        assert r.headers["x-ragtrim-tokens-before"] == r.headers["x-ragtrim-tokens-after"] == "9"
        assert r.headers["x-request-id"].startswith("req-")

    def test_completions_endpoint(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        r = httpx.post(gw.url + "/v1/completions", json={"model": "m", "prompt": "say hi", "max_tokens": 3})
        assert r.status_code == 200
        assert r.json()["object"] == "text_completion"
        assert r.json()["usage"]["completion_tokens"] == 3

    def test_streaming_is_relayed_event_by_event(self, fake: Any, gateway: Any) -> None:
        up = fake(decode_ms=150, output_tokens=4)
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        arrivals = []
        with httpx.stream("POST", gw.url + CHAT, json=chat_body(stream=True)) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("data: "):
                    arrivals.append((time.monotonic(), line[6:]))
        assert [a[1] for a in arrivals][-1] == "[DONE]"
        contents = [json.loads(a[1]) for a in arrivals[:-1]]
        assert [c["choices"][0]["delta"]["content"] for c in contents] == ["tok0 ", "tok1 ", "tok2 ", "tok3 "]
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals[:-1])]
        assert all(g > 0.08 for g in gaps), gaps  # not buffered: each token arrives when the upstream makes it

    def test_stream_usage_chunk_only_when_asked(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        plain = sse_events(httpx.post(gw.url + CHAT, json=chat_body(stream=True)).text)
        assert all("usage" not in e for e in plain[:-1])
        asked = sse_events(httpx.post(gw.url + CHAT, json=chat_body(
            stream=True, stream_options={"include_usage": True})).text)
        assert asked[-2]["usage"]["completion_tokens"] == 8
        assert debug_requests(up)[0]["body"]["stream_options"] == {"include_usage": True}

    def test_models_proxied_and_healthz(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS})
        assert httpx.get(gw.url + "/v1/models", headers=auth()).json()["data"][0]["id"] == "fake"
        assert httpx.get(gw.url + "/v1/models").status_code == 401
        assert httpx.get(gw.url + "/healthz").json() == {"status": "ok", "state": "memory"}

    def test_invalid_json_is_400(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        r = httpx.post(gw.url + CHAT, content=b"{nope")
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "invalid_json"

    def test_a_user_message_without_content_is_400_not_forwarded(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
        r = httpx.post(gw.url + CHAT, json={"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                                                       {"role": "user"}]})
        assert r.status_code == 400
        assert r.json()["error"] == {
            "message": "messages[1] (role 'user') has no 'content': a user message needs 'content', a string or an "
                       "array of content parts",
            "type": "invalid_request_error", "param": "messages[1].content", "code": "missing_required_parameter"}
        assert debug_requests(up) == []


DOCS = [
    "Paris is the capital and largest city of France.",
    "Berlin has many museums and a long history of music.",
    "The Pacific Ocean is the largest ocean on Earth by area.",
    "Bananas are rich in potassium and grow in warm places.",
]


class TestTrimming:
    def test_documents_trimmed_and_rendered_before_question(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "trim": {"budget": 10}})
        r = httpx.post(gw.url + CHAT, json=chat_body("What is the capital of France?", documents=DOCS))
        assert r.status_code == 200
        content = debug_requests(up)[0]["body"]["messages"][-1]["content"]
        assert content == ("Documents:\n[1] Paris is the capital and largest city of France.\n\n"
                           "What is the capital of France?")
        assert r.headers["x-ragtrim-documents"] == "1/4"
        assert int(r.headers["x-ragtrim-tokens-saved"]) > 20
        assert "documents" not in debug_requests(up)[0]["body"]

    def test_context_tags_in_a_message(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "trim": {"budget": 0.3}})
        ctx = "<context>" + "\n\n".join(DOCS) + "</context>"
        body = {"model": "m", "messages": [{"role": "system", "content": "Answer briefly.\n" + ctx},
                                           {"role": "user", "content": "Which ocean is the largest?"}]}
        r = httpx.post(gw.url + CHAT, json=body)
        sent = debug_requests(up)[0]["body"]["messages"]
        assert sent[0] == {"role": "system", "content": "Answer briefly."}
        assert sent[1]["content"].startswith("Documents:\n[1] The Pacific Ocean")
        assert sent[1]["content"].endswith("Which ocean is the largest?")
        assert int(r.headers["x-ragtrim-tokens-after"]) < int(r.headers["x-ragtrim-tokens-before"])

    def test_request_budget_lowers_never_raises(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "trim": {"budget": 10}})
        httpx.post(gw.url + CHAT, json=chat_body("capital of France?", documents=DOCS, ragtrim={"budget": 1000}))
        assert debug_requests(up)[0]["body"]["messages"][-1]["content"].count("[") == 1
        r = httpx.post(gw.url + CHAT, json=chat_body("capital of France?", documents=DOCS, ragtrim={"budget": 0}))
        assert r.headers["x-ragtrim-documents"] == "0/4"

    def test_history_folded(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "trim": {"history_turns": 2}})
        turns = []
        for i in range(6):
            turns.append({"role": "user", "content": f"I prefer vegetarian food number {i} for the trip to Rome."})
            turns.append({"role": "assistant", "content": f"Noted, vegetarian option {i} in Rome."})
        body = {"model": "m", "messages": [{"role": "system", "content": "You plan trips."}, *turns,
                                           {"role": "user", "content": "Where should we eat tonight?"}]}
        r = httpx.post(gw.url + CHAT, json=body)
        sent = debug_requests(up)[0]["body"]["messages"]
        assert sent[0] == {"role": "system", "content": "You plan trips."}
        assert sent[1]["role"] == "system" and sent[1]["content"].startswith("Earlier in this conversation:")
        assert sent[2:] == [*turns[-2:], body["messages"][-1]]
        assert r.headers["x-ragtrim-history-folded"] == "10"


def upstream_settled(g: Any) -> int:
    """Requests ``auto`` still counts in flight upstream, once the gateway has had 3 s to finish every one."""
    deadline = time.monotonic() + 3
    while g.auto.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(g.auto.in_flight)


class TestLimits:
    def test_max_output_tokens_clamps_and_sets(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_output_tokens": 16}})
        httpx.post(gw.url + CHAT, json=chat_body(max_completion_tokens=500))
        httpx.post(gw.url + CHAT, json=chat_body(max_tokens=5))
        httpx.post(gw.url + "/v1/completions", json={"model": "m", "prompt": "x"})
        sent = [r["body"] for r in debug_requests(up)]
        assert sent[0]["max_completion_tokens"] == 16 and "max_tokens" not in sent[0]
        assert sent[1]["max_tokens"] == 5
        assert sent[2]["max_tokens"] == 16

    def test_max_input_tokens_400_without_upstream_call(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "limits": {"max_input_tokens": 20}})
        r = httpx.post(gw.url + CHAT, json=chat_body("word " * 50))
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["code"] == "context_length_exceeded" and err["type"] == "invalid_request_error"
        assert "57 prompt tokens" in err["message"]
        assert debug_requests(up) == []

    def test_trimming_can_bring_a_request_under_max_input(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "trim": {"budget": 10},
                         "limits": {"max_input_tokens": 30}})
        r = httpx.post(gw.url + CHAT, json=chat_body("capital of France?", documents=DOCS))
        assert r.status_code == 200
        assert int(r.headers["x-ragtrim-tokens-before"]) > 30

    def test_rpm_429_with_openai_headers(self, fake: Any, gateway: Any) -> None:
        up = fake()
        keys = {"sk-alice": {"user": "alice", "org": "acme", "rpm": 3, "tpm": 100000}}
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys})
        codes = [httpx.post(gw.url + CHAT, json=chat_body(), headers=auth()) for _ in range(4)]
        assert [r.status_code for r in codes] == [200, 200, 200, 429]
        ok, limited = codes[2], codes[3]
        assert ok.headers["x-ratelimit-limit-requests"] == "3"
        assert ok.headers["x-ratelimit-remaining-requests"] == "0"
        assert ok.headers["x-ratelimit-limit-tokens"] == "100000"
        assert 1 <= int(limited.headers["retry-after"]) <= 120
        for h in ("limit", "remaining", "reset"):
            assert f"x-ratelimit-{h}-requests" in limited.headers
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert len(debug_requests(up)) == 3

    def test_429_text_and_reset_headers_follow_the_window(self, fake: Any, gateway: Any) -> None:
        """With a 4 s window nothing says "per minute", and no reset or retry is further away than the window."""
        up = fake()
        keys = {"sk-alice": {"user": "alice", "org": "acme", "rpm": 2, "tpm": 100}}
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys,
                         "limits": {"window_s": 4, "max_output_tokens": 5}})
        codes = [httpx.post(gw.url + CHAT, json=chat_body(), headers=auth()) for _ in range(3)]
        assert [r.status_code for r in codes] == [200, 200, 429]
        limited = codes[2]
        message = limited.json()["error"]["message"]
        assert "minute" not in message
        assert message.startswith("rate limit reached for user 'alice' on requests per 4 s window: limit 2; retry in")
        assert 1 <= int(limited.headers["retry-after"]) <= 4
        for r in codes:
            assert seconds(r.headers["x-ratelimit-reset-requests"]) <= 4.0
        huge = httpx.post(gw.url + CHAT, json=chat_body("w " * 200), headers=auth())
        assert huge.status_code == 429 and "minute" not in huge.json()["error"]["message"]
        assert "more than the key's whole limit of 100 tokens per 4 s window" in huge.json()["error"]["message"]

    def test_tpm_charged_on_estimate_then_corrected_from_usage(self, fake: Any, gateway: Any) -> None:
        up = fake(output_tokens=2)
        keys = {"sk-alice": {"user": "alice", "org": "acme", "tpm": 1000}}
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys, "limits": {"max_output_tokens": 400}})
        r1 = httpx.post(gw.url + CHAT, json=chat_body(), headers=auth())
        # Admission charged 9 prompt + 400 output; the usage said 3 + 2: the window keeps only the actual 5.
        assert r1.headers["x-ratelimit-remaining-tokens"] == str(1000 - 409)
        r2 = httpx.post(gw.url + CHAT, json=chat_body(), headers=auth())
        assert r2.headers["x-ratelimit-remaining-tokens"] == str(1000 - 5 - 409)
        r3 = httpx.post(gw.url + CHAT, json=chat_body(max_tokens=900), headers=auth())
        assert r3.status_code == 200  # clamped to 400 output: fits
        huge = httpx.post(gw.url + CHAT, json=chat_body("w " * 700), headers=auth())
        assert huge.status_code == 429 and "retry-after" not in huge.headers

    def test_org_concurrency_queues_then_429(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=300)
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "orgs": {"acme": {"concurrency": 1}},
                         "limits": {"queue_timeout_s": 0.45}})

        async def run() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=10) as c:
                return await asyncio.gather(*(c.post(gw.url + CHAT, json=chat_body(), headers=auth())
                                              for _ in range(3)))

        rs = asyncio.run(run())
        codes = sorted(r.status_code for r in rs)
        assert codes == [200, 200, 429]  # one runs, one waits 300 ms and runs, the third times out at 450 ms
        limited = next(r for r in rs if r.status_code == 429)
        assert limited.json()["error"]["code"] == "queue_timeout"
        assert limited.headers["retry-after"] == "1"
        assert httpx.get(up.url + "/debug/requests").json()["max_active"] == 1

    def test_per_key_concurrency(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=300)
        keys = {"sk-alice": {"user": "alice", "org": "acme", "concurrency": 1}, "sk-bob": {"user": "bob"}}
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys,
                         "limits": {"max_queued_per_user": 0}})

        async def run() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=10) as c:
                alice = [c.post(gw.url + CHAT, json=chat_body(), headers=auth()) for _ in range(2)]
                bob = [c.post(gw.url + CHAT, json=chat_body(), headers=auth("sk-bob")) for _ in range(2)]
                return await asyncio.gather(*alice, *bob)

        rs = asyncio.run(run())
        assert sorted(r.status_code for r in rs[:2]) == [200, 429]
        limited = next(r for r in rs[:2] if r.status_code == 429)
        assert limited.json()["error"]["code"] == "queue_full"
        assert "key of user 'alice'" in limited.json()["error"]["message"]
        assert [r.status_code for r in rs[2:]] == [200, 200]

    def test_queue_refusal_refunds_the_rate_charge(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=300)
        keys = {"sk-alice": {"user": "alice", "org": "acme", "rpm": 2}}
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys, "orgs": {"acme": {"concurrency": 1}},
                         "limits": {"max_queued": 0}})

        async def run() -> list[int]:
            async with httpx.AsyncClient(timeout=10) as c:
                first = asyncio.ensure_future(c.post(gw.url + CHAT, json=chat_body(), headers=auth()))
                await asyncio.sleep(0.1)
                second = await c.post(gw.url + CHAT, json=chat_body(), headers=auth())
                done = await first
                third = await c.post(gw.url + CHAT, json=chat_body(), headers=auth())
                return [done.status_code, second.status_code, third.status_code]

        assert asyncio.run(run()) == [200, 429, 200]  # the refused second request did not use up the rpm

    def test_long_lane(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=300)
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"},
                         "limits": {"long_request_tokens": 20, "long_concurrency": 1, "queue_timeout_s": 0.1}})

        async def run() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=10) as c:
                long_ = [c.post(gw.url + CHAT, json=chat_body("w " * 40)) for _ in range(2)]
                short = [c.post(gw.url + CHAT, json=chat_body("short")) for _ in range(3)]
                return await asyncio.gather(*long_, *short)

        rs = asyncio.run(run())
        assert sorted(r.status_code for r in rs[:2]) == [200, 429]
        assert [r.status_code for r in rs[2:]] == [200, 200, 200]

    def test_client_disconnect_frees_slot(self, fake: Any, gateway: Any) -> None:
        up = fake(base_ms=5000)
        gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "orgs": {"acme": {"concurrency": 1}},
                         "limits": {"queue_timeout_s": 5}})
        for stream in (False, True):
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(gw.url + CHAT, json=chat_body(stream=stream), headers=auth(), timeout=0.3)
            deadline = time.monotonic() + 3
            while g.org_gates["acme"] is not None and g.org_gates["acme"].in_use and time.monotonic() < deadline:
                time.sleep(0.02)
            gate = g.org_gates["acme"]
            assert gate is not None and gate.in_use == 0 and gate.queued == 0
            assert upstream_settled(g) == 0
        metrics = httpx.get(gw.url + "/metrics").text
        assert 'ragtrim_serve_requests_total{endpoint="chat",outcome="client_closed"} 2.0' in metrics

    def test_stream_disconnect_mid_generation_frees_slot(self, fake: Any, gateway: Any) -> None:
        up = fake(decode_ms=200, output_tokens=50)
        gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "orgs": {"acme": {"concurrency": 1}}})
        with httpx.stream("POST", gw.url + CHAT, json=chat_body(stream=True), headers=auth()) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    break
        deadline = time.monotonic() + 3
        gate = g.org_gates["acme"]
        while gate is not None and gate.in_use and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gate is not None and gate.in_use == 0
        assert upstream_settled(g) == 0

    def test_upstream_errors_relayed(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, g = gateway({"upstream": {"url": up.url + "/v1"}})
        r = httpx.post(gw.url + CHAT, json={**chat_body(), "model": "fail-400"})
        assert r.status_code == 400 and r.json()["error"]["message"] == "fake upstream fake answers 400"
        r = httpx.post(gw.url + CHAT, json={**chat_body(stream=True), "model": "fail-500"})
        assert r.status_code == 500 and "error" in r.json()
        assert upstream_settled(g) == 0

    def test_upstream_failing_mid_stream_ends_with_an_error_event(self, fake: Any, gateway: Any) -> None:
        up = fake(output_tokens=5)
        gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "orgs": {"default": {"concurrency": 1}}})
        r = httpx.post(gw.url + CHAT, json={**chat_body(stream=True), "model": "fail-midstream"})
        events = sse_events(r.text)
        # The event sent before the failure arrives unless the broken connection discards it on the way.
        assert [e["choices"][0]["delta"]["content"] for e in events[:-1]] in (["tok0 "], [])
        assert events[-1]["error"]["code"] == "upstream_stream_error"
        gate = g.org_gates["default"]
        deadline = time.monotonic() + 3  # the slot is freed just after the last byte goes out
        while gate is not None and gate.in_use and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gate is not None and gate.in_use == 0
        assert upstream_settled(g) == 0

    def test_upstream_down_is_502_openai_style(self, gateway: Any) -> None:
        from tests.serve.conftest import free_port

        gw, g = gateway({"upstream": {"url": f"http://127.0.0.1:{free_port()}/v1"}})
        r = httpx.post(gw.url + CHAT, json=chat_body())
        assert r.status_code == 502
        assert r.json()["error"]["code"] == "upstream_unreachable"
        assert upstream_settled(g) == 0

    def test_fallback_on_5xx_and_connect_error(self, fake: Any, gateway: Any) -> None:
        from tests.serve.conftest import free_port

        broken = fake(fail_status=503)
        backup = fake(name="backup")
        gw, g = gateway({"upstream": {"url": broken.url + "/v1", "fallback_url": backup.url + "/v1"}})
        r = httpx.post(gw.url + CHAT, json=chat_body())
        assert r.status_code == 200 and r.headers["x-ragtrim-upstream"] == "fallback"
        gw2, g2 = gateway({"upstream": {"url": f"http://127.0.0.1:{free_port()}/v1",
                                        "fallback_url": backup.url + "/v1"}})
        r = httpx.post(gw2.url + CHAT, json=chat_body(stream=True))
        assert r.status_code == 200 and sse_events(r.text)[-1] == "[DONE]"
        assert len(debug_requests(backup)) == 2
        assert upstream_settled(g) == 0 and upstream_settled(g2) == 0  # one count a request, both tries

    def test_fallback_on_queue_overflow(self, fake: Any, gateway: Any) -> None:
        main = fake(base_ms=400)
        backup = fake(name="backup")
        gw, _ = gateway({"upstream": {"url": main.url + "/v1", "fallback_url": backup.url + "/v1"},
                         "limits": {"default_org_concurrency": 1, "max_queued": 0}})

        async def run() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=10) as c:
                first = asyncio.ensure_future(c.post(gw.url + CHAT, json=chat_body()))
                await asyncio.sleep(0.1)
                second = await c.post(gw.url + CHAT, json=chat_body())
                return [await first, second]

        first, second = asyncio.run(run())
        assert first.status_code == second.status_code == 200
        assert "x-ragtrim-upstream" not in first.headers
        assert second.headers["x-ragtrim-upstream"] == "fallback"


class TestObservability:
    def test_metrics(self, fake: Any, gateway: Any) -> None:
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "trim": {"budget": 10},
                         "orgs": {"acme": {"concurrency": 4}}})
        httpx.post(gw.url + CHAT, json=chat_body("capital of France?", documents=DOCS), headers=auth())
        httpx.post(gw.url + CHAT, json=chat_body(), headers=auth("sk-bad"))
        m = httpx.get(gw.url + "/metrics").text
        assert 'ragtrim_serve_requests_total{endpoint="chat",outcome="ok"} 1.0' in m
        assert 'ragtrim_serve_requests_total{endpoint="chat",outcome="unauthorized"} 1.0' in m
        for name in ('ragtrim_serve_tokens_total{kind="saved"}', "ragtrim_serve_trim_seconds_count 1.0",
                     'ragtrim_serve_queue_wait_seconds_count{lane="org"} 1.0',
                     "ragtrim_serve_upstream_ttft_seconds_count 1.0", 'ragtrim_serve_in_flight{org="acme"} 0.0'):
            assert name in m, name

    def test_trim_stage_metrics(self, fake: Any, gateway: Any) -> None:
        """Each trimmed request adds the whole trim and each stage of its trace; the stages run inside the trim, and
        the trim inside the request's preparation. A request without documents trims nothing and adds nothing."""
        up = fake()
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "trim": {"budget": 10}})
        for _ in range(2):
            httpx.post(gw.url + CHAT, json=chat_body("capital of France?", documents=DOCS), headers=auth())
        httpx.post(gw.url + CHAT, json=chat_body(), headers=auth())
        m = httpx.get(gw.url + "/metrics").text
        sums = {k: float(v) for k, v in re.findall(r'^ragtrim_serve_trim_stage_seconds_sum\{stage="(\w+)"\} (\S+)$', m,
                                                     re.MULTILINE)}
        counts = {k: float(v) for k, v in re.findall(
            r'^ragtrim_serve_trim_stage_seconds_count\{stage="(\w+)"\} (\S+)$', m, re.MULTILINE)}
        assert {"pipeline", "dedup", "budget"} <= set(counts), counts
        assert set(counts.values()) == {2.0}, counts
        assert sum(v for k, v in sums.items() if k != "pipeline") <= sums["pipeline"]
        prepare_sum = float(re.search(r"^ragtrim_serve_trim_seconds_sum (\S+)$", m, re.MULTILINE).group(1))
        assert 0 < sums["pipeline"] <= prepare_sum

    def test_jsonl_log_without_text(self, fake: Any, gateway: Any, tmp_path: Path) -> None:
        up = fake()
        path = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "trim": {"budget": 10},
                         "log": {"path": str(path)}})
        httpx.post(gw.url + CHAT, json=chat_body("capital of France?", documents=DOCS), headers=auth())
        httpx.post(gw.url + CHAT, json=chat_body(stream=True), headers={**auth(), "x-request-id": "mine-1"})
        httpx.post(gw.url + CHAT, json=chat_body(), headers=auth("sk-bad"))
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and len(path.read_text().splitlines()) < 3:
            time.sleep(0.02)
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert [e["outcome"] for e in lines] == ["ok", "ok", "unauthorized"]
        first = lines[0]
        assert first["user"] == "alice" and first["org"] == "acme" and len(first["key_id"]) == 16
        assert first["documents"] == {"received": 4, "kept": 1}
        assert first["tokens"]["documents_before"] > first["tokens"]["documents_after"] > 0
        assert first["tokens"]["completion"] == 8
        assert first["timings_ms"]["trim_stages"]["pipeline"] <= first["timings_ms"]["trim"]
        timed = first["timings_ms"]["trim_stages"]
        ran = {k for k in timed if k != "pipeline" and not k.startswith("prefetch:")} - {"final_budget"}
        assert ran and {k.removeprefix("prefetch:") for k in timed if k.startswith("prefetch:")} == ran
        assert "recipe" not in first  # chosen per request only with trim.scorer = "auto"
        assert "trim_stages" not in lines[1]["timings_ms"]  # no documents: nothing was trimmed
        assert lines[1]["request_id"] == "mine-1" and lines[1]["stream"] is True
        assert "France" not in path.read_text() and "sk-alice" not in path.read_text()

    def test_jsonl_log_with_text(self, fake: Any, gateway: Any, tmp_path: Path) -> None:
        up = fake()
        path = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "log": {"path": str(path), "log_text": True}})
        httpx.post(gw.url + CHAT, json=chat_body("capital of France?"))
        entry = read_log(path, 1)[0]
        assert entry["forwarded"]["messages"][0]["content"] == "capital of France?"

    def test_jsonl_log_with_the_request_as_sent(self, fake: Any, gateway: Any, tmp_path: Path) -> None:
        # log_request keeps the client's body (documents and all, before trimming): what `ragtrim audit` reads.
        up = fake()
        path = tmp_path / "requests.jsonl"
        gw, _ = gateway({"upstream": {"url": up.url + "/v1"}, "trim": {"budget": 10},
                         "log": {"path": str(path), "log_request": True}})
        body = chat_body("capital of France?", documents=DOCS)
        httpx.post(gw.url + CHAT, json=body, headers={"x-request-id": "audit-1"})
        httpx.post(gw.url + CHAT, content=b"{not json")
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and len(path.read_text().splitlines()) < 2:
            time.sleep(0.02)
        first, bad = (json.loads(x) for x in path.read_text().splitlines())
        assert first["request_id"] == "audit-1" and first["request"] == body and "forwarded" not in first
        assert bad["outcome"] == "bad_request" and bad["request"] == "{not json"


def test_many_concurrent_requests_none_lost(fake: Any, gateway: Any) -> None:
    up = fake(base_ms=20, slots=4)
    gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "keys": KEYS, "orgs": {"acme": {"concurrency": 4}},
                     "limits": {"queue_timeout_s": 0.2, "max_queued": 8}})
    results: list[int] = []
    lock = threading.Lock()

    async def run() -> None:
        async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_connections=100)) as c:
            async def one(i: int) -> None:
                r = await c.post(gw.url + CHAT, json=chat_body(stream=i % 2 == 0),
                                 headers=auth("sk-alice" if i % 3 else "sk-bob"))
                with lock:
                    results.append(r.status_code)
            await asyncio.gather(*(one(i) for i in range(120)))

    asyncio.run(run())
    assert len(results) == 120 and set(results) <= {200, 429}
    assert results.count(200) >= 20
    gate = wait_idle(g.org_gates["acme"])
    assert gate is not None and gate.in_use == 0 and gate.queued == 0
