"""Large upstream answers pass through the gateway as they arrive (never held or parsed whole), with their usage read
from their last bytes; an answer that breaks after its headers reaches the client broken, not cut short."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.conftest import read_log, wait_idle

EMB = "/v1/embeddings"
AUTH = {"authorization": "Bearer sk-alice"}


def test_a_large_answer_passes_through_with_its_usage(fake: Any, gateway: Any, tmp_path: Path) -> None:
    up = fake()
    log = tmp_path / "requests.jsonl"
    keys = {"sk-alice": {"user": "alice", "org": "acme", "tpm": 1_000_000, "concurrency": 1}}
    gw, g = gateway({"upstream": {"url": up.url + "/v1"}, "keys": keys, "log": {"path": str(log)}})
    inputs = [f"passage {i} about the river" for i in range(300)]
    r = httpx.post(gw.url + EMB, json={"model": "e", "input": inputs, "dimensions": 1536}, headers=AUTH, timeout=60)
    assert r.status_code == 200 and len(r.content) > 1_000_000  # over SMALL_ANSWER_BYTES: passed through
    body = r.json()
    assert len(body["data"]) == 300 and len(body["data"][0]["embedding"]) == 1536
    usage = body["usage"]["total_tokens"]
    # Charged the estimate on admission (the whitespace tokens), then corrected to the answer's usage.
    r2 = httpx.post(gw.url + EMB, json={"model": "e", "input": "x"}, headers=AUTH)
    assert r2.headers["x-ratelimit-remaining-tokens"] == str(1_000_000 - usage - 1)
    entry = read_log(log, 1)[0]
    assert entry["outcome"] == "ok" and entry["status"] == 200
    assert entry["timings_ms"]["upstream_ttft"] is not None
    assert wait_idle(g.admission.key_gates[next(iter(g.admission.key_gates))]).in_use == 0


@pytest.fixture
def breaking_upstream() -> Iterator[str]:
    """An upstream that declares a 10 MB answer, sends 1 MB of it and closes the connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n"
                             b"\r\n" + b'{"data": [' + b"0.5, " * 200_000)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v1"
    stop.set()
    thread.join(timeout=5)
    listener.close()


def test_an_answer_broken_midway_reaches_the_client_broken(breaking_upstream: str, gateway: Any,
                                                           tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    gw, g = gateway({"upstream": {"url": breaking_upstream}, "orgs": {"default": {"concurrency": 1}},
                     "limits": {"default_org_concurrency": 1}, "log": {"path": str(log)}})
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(gw.url + EMB, json={"model": "e", "input": "x"}, timeout=30)
    entry = read_log(log, 1)[0]
    assert (entry["outcome"], entry["error_code"]) == ("upstream_error", "upstream_body_broken")
    assert wait_idle(g.org_gates["default"]).in_use == 0
    text = httpx.get(gw.url + "/metrics").text
    assert 'ragtrim_serve_errors_total{code="upstream_body_broken",endpoint="embeddings",status="200"} 1.0' in text


def test_a_small_answer_is_read_whole(fake: Any, gateway: Any) -> None:
    up = fake()
    gw, _ = gateway({"upstream": {"url": up.url + "/v1"}})
    r = httpx.post(gw.url + EMB, json={"model": "e", "input": ["a", "b"]})
    assert r.status_code == 200 and r.headers["content-length"] == str(len(r.content))
    assert json.loads(r.content)["usage"]["total_tokens"] == 2
