"""Graceful drain of a real ``ragtrim serve`` process on a real SIGTERM or SIGINT: readiness turns 503 at once, new
requests get 503, streams in flight finish up to ``serve.drain_timeout_s``, and one still running then ends with an
OpenAI error event and ``[DONE]``, one log line, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragtrim_bench.serve.load import free_port

AUTH = {"authorization": "Bearer sk-drain-test-key"}
CHAT = "/v1/chat/completions"


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, stderr: Path) -> None:
        self.proc, self.url, self.stderr = proc, url, stderr

    def log(self) -> str:
        return self.stderr.read_text()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def start(upstream_url: str, drain_timeout_s: float, *, api_root: str = "/v1") -> Served:
        cfg = tmp_path / "gateway.toml"
        cfg.write_text(f'[upstream]\nurl = "{upstream_url}{api_root}"\ntokenizer = "whitespace"\n\n'
                       f'[serve]\ndrain_timeout_s = {drain_timeout_s}\n\n[keys."sk-drain-test-key"]\nuser = "u"\n\n'
                       f'[log]\npath = "{tmp_path / "requests.jsonl"}"\n')
        port = free_port()
        stderr = tmp_path / "stderr.txt"
        with stderr.open("wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "ragtrim", "serve", "--config", str(cfg), "--host",
                                     "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err)
        served = Served(proc, f"http://127.0.0.1:{port}", stderr)
        started.append(served)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(served.url + "/health/liveness", timeout=1).status_code == 200:
                    return served
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"ragtrim serve did not become ready: {served.log()}")

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=10)


def stream_in_thread(url: str) -> tuple[threading.Thread, dict[str, Any], threading.Event]:
    """A streamed chat request read line by line in a thread; ``first`` is set when its first event arrived."""
    out: dict[str, Any] = {"lines": []}
    first = threading.Event()

    def read() -> None:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "tell me"}]}
        with httpx.stream("POST", url + CHAT, json=body, headers=AUTH, timeout=60) as r:
            out["status"] = r.status_code
            try:
                for line in r.iter_lines():
                    if line:
                        out["lines"].append(line)
                        first.set()
            except httpx.HTTPError as exc:
                out["broken"] = repr(exc)
        out["ended"] = time.monotonic()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t, out, first


def after_signal_checks(url: str) -> tuple[httpx.Response, httpx.Response]:
    """Readiness and a new request, each on a new connection, right after the signal."""
    ready = httpx.get(url + "/health/readiness", timeout=5)
    new = httpx.post(url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, headers=AUTH,
                     timeout=5)
    return ready, new


class TestDrain:
    def test_sigterm_lets_a_stream_finish_and_refuses_new_requests(self, fake: Any, serve: Any) -> None:
        up = fake(decode_ms=150, output_tokens=12)  # about 1.7 s of tokens
        s = serve(up.url, drain_timeout_s=20)
        t, out, first = stream_in_thread(s.url)
        assert first.wait(15)
        os.kill(s.proc.pid, signal.SIGTERM)
        time.sleep(0.05)
        ready, new = after_signal_checks(s.url)
        assert ready.status_code == 503 and ready.json()["status"] == "draining"
        assert ready.json()["reason"].startswith("got SIGTERM: finishing 1 request(s) in flight")
        assert new.status_code == 503 and new.json()["error"]["code"] == "shutting_down"
        assert new.headers["connection"] == "close" and new.headers["retry-after"] == "1"
        t.join(30)
        assert out["status"] == 200 and "broken" not in out
        assert out["lines"][-1] == "data: [DONE]"
        assert sum("tok" in line for line in out["lines"]) == 12  # every token: the stream was not cut
        assert s.proc.wait(timeout=20) == 0
        log = s.log()
        assert log.count("draining, 1 request(s) in flight get up to 20 s (serve.drain_timeout_s)") == 1, log
        assert "still running after the drain timeout" not in log
        assert "Traceback" not in log and "CancelledError" not in log, log

    @pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
    def test_a_stream_still_running_after_the_timeout_ends_with_an_error_event(self, fake: Any, serve: Any,
                                                                               sig: signal.Signals) -> None:
        up = fake(decode_ms=200, output_tokens=150)  # 30 s of tokens: far longer than the drain
        s = serve(up.url, drain_timeout_s=1)
        t, out, first = stream_in_thread(s.url)
        assert first.wait(15)
        t_signal = time.monotonic()
        os.kill(s.proc.pid, sig)
        t.join(20)
        assert out["status"] == 200 and "broken" not in out
        assert 0.9 < out["ended"] - t_signal < 5  # the timeout, then the cut
        *tokens, error, done = out["lines"]
        assert done == "data: [DONE]"
        event = json.loads(error.removeprefix("data: "))["error"]
        assert event["code"] == "shutting_down" and event["type"] == "server_error"
        assert event["message"].startswith("the gateway is shutting down: this request was still running after "
                                           "serve.drain_timeout_s (1 s)")
        assert tokens and all(line.startswith("data: {") and "tok" in line for line in tokens)
        assert s.proc.wait(timeout=20) == 0
        log = s.log()
        cut = [line for line in log.splitlines() if "still running after the drain timeout" in line]
        assert len(cut) == 1 and cut[0].endswith("ended its stream with an error event and [DONE]"), log
        assert f"got {sig.name}: draining" in log
        [record] = [json.loads(line) for line in (s.stderr.parent / "requests.jsonl").read_text().splitlines()]
        assert record["outcome"] == "shutting_down" and record["error_code"] == "shutting_down"
        assert "Traceback" not in log and "CancelledError" not in log and "ERROR" not in log, log

    def test_a_second_signal_ends_the_wait_at_once(self, fake: Any, serve: Any) -> None:
        up = fake(decode_ms=200, output_tokens=150)
        s = serve(up.url, drain_timeout_s=60)
        t, out, first = stream_in_thread(s.url)
        assert first.wait(15)
        os.kill(s.proc.pid, signal.SIGTERM)
        time.sleep(0.5)
        assert t.is_alive()  # still streaming: the drain waits
        t_second = time.monotonic()
        os.kill(s.proc.pid, signal.SIGTERM)
        t.join(20)
        assert out["ended"] - t_second < 5 and out["lines"][-1] == "data: [DONE]"
        assert json.loads(out["lines"][-2].removeprefix("data: "))["error"]["code"] == "shutting_down"
        assert s.proc.wait(timeout=20) == 0
        assert "Traceback" not in s.log()

    def test_a_request_still_waiting_for_its_answer_gets_a_503(self, fake: Any, serve: Any) -> None:
        up = fake(base_ms=30000)  # the upstream takes 30 s before answering anything
        s = serve(up.url, drain_timeout_s=0.5)
        got: dict[str, httpx.Response] = {}

        def ask() -> None:
            got["r"] = httpx.post(s.url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": "q"}]},
                                  headers={**AUTH, "x-request-id": "req-waiting-1"}, timeout=30)

        t = threading.Thread(target=ask, daemon=True)
        t.start()
        time.sleep(0.5)  # at the upstream now
        os.kill(s.proc.pid, signal.SIGTERM)
        t.join(15)
        r = got["r"]
        assert r.status_code == 503 and r.json()["error"]["code"] == "shutting_down"
        assert s.proc.wait(timeout=20) == 0
        log = s.log()
        assert "request req-waiting-1 still running after the drain timeout (0.5 s): answered 503 shutting_down" \
            in log, log
        [record] = [json.loads(line) for line in (s.stderr.parent / "requests.jsonl").read_text().splitlines()]
        assert (record["request_id"], record["outcome"], record["status"]) == ("req-waiting-1", "shutting_down", 503)
        assert "Traceback" not in log and "CancelledError" not in log, log

    def test_an_idle_gateway_stops_at_once(self, fake: Any, serve: Any) -> None:
        s = serve(fake().url, drain_timeout_s=30)
        t0 = time.monotonic()
        os.kill(s.proc.pid, signal.SIGTERM)
        assert s.proc.wait(timeout=10) == 0
        assert time.monotonic() - t0 < 5
        assert "Traceback" not in s.log()

    def test_an_upstream_url_without_v1_warns_once_and_is_not_ready(self, fake: Any, serve: Any) -> None:
        up = fake()
        s = serve(up.url, drain_timeout_s=5, api_root="")
        r = httpx.get(s.url + "/health/readiness", timeout=5)
        assert r.status_code == 503 and r.json()["upstream"].startswith("answers 404: GET ")
        os.kill(s.proc.pid, signal.SIGTERM)
        assert s.proc.wait(timeout=20) == 0
        warnings = [line for line in s.log().splitlines() if "config warning" in line]
        expected = (f"WARNING:     ragtrim serve: config warning: upstream.url '{up.url}' has no API version in "
                    "its path: the gateway appends /chat/completions to it, and vLLM, llama.cpp's server and OpenAI "
                    f"serve that only under /v1; if requests get upstream_404, write '{up.url}/v1'")
        assert warnings == [expected], s.log()
