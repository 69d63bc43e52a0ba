"""No configured secret leaves the gateway: a password or key planted in every place the config takes one, every
error path driven on real sockets (a real `ragtrim serve` process, real redis-servers, upstreams that quote the
credentials they were sent), then every response body and header, the request log, stdout and stderr (tracebacks
included) and every CLI message scanned for the secret, its URL-encoded and Basic-auth forms, and any 8 characters
of it in a row.

The paths: Redis down with ``fail_open`` false and true, Redis refusing the password (``user:pw@`` and
``?password=`` forms), the upstream and its fallback down, 5xx and 4xx answers that quote the Authorization header,
401s for clients and for /metrics, readiness, liveness, /healthz, /metrics, /v1/models, SIGHUP reloads that are
refused (a new key with a bad value, a changed state URL, an invalid URL, a file that is not UTF-8), a bug with a
traceback (logged, uncaught by the app, in a thread, a warning), the start-up line, config errors, and vector-store
warnings during trims."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.serve.conftest import RedisServer, ServerThread, free_port, start_redis

ROOT = Path(__file__).resolve().parents[2]

# Random-looking, so that no 8 characters of one appear anywhere by chance.
SECRETS = {
    "state_userinfo": "stQ7vK2mXr9Lz4Wp",      # limits.state = redis://default:<pw>@...
    "state_query": "sqH3nB8dTc6Jy1Fe",         # limits.state = redis://...?password=<pw> (a wrong one: AUTH fails)
    "vector_store": "vsM5gR1kWq8Zt3Nb",        # trim.vector_store = redis://:<pw>@...
    "upstream_userinfo": "upE9xL4pVs2Cj7Dh",   # upstream.url = http://gw-user:<pw>@...
    "upstream_api_key": "sk-upA6rN3yGf9Kw2Tq",
    "fallback_userinfo": "fbU8mC5zHt1Rx6Pv",
    "fallback_api_key": "sk-fbB2wJ7qSd4Ly9Mk",
    "metrics_token": "mtT4hX9cPn6Gz1Qr",
    "client_key_a": "sk-clD7kV3sWb8Fm2Hy",
    "client_key_b": "sk-clN1pZ6tRe4Xj9Gc",     # a key without a user name
    "reload_key": "sk-rlK8yH2nVc5Tw3Bq",       # a new key in a reloaded config
    "reload_state": "rsW6fM9xLq1Dz4Pk",
    "reload_url": "ruJ3bT7wNd2Kx8Vs",
    "config_key": "sk-cfP5qM1zLr7Hs4Dw",       # in configs that do not load
    "config_url": "cuG9kW2vYt6Bn3Xq",
}
BASIC_USERS = {"upstream_userinfo": "gw-user", "fallback_userinfo": "fb-user"}


def forms(name: str, secret: str) -> list[str]:
    """What must never appear: the secret, its URL-encoded and Basic-auth forms, and every 8 characters of it."""
    found = {secret, quote(secret, safe="")}
    if name in BASIC_USERS:
        found.add(base64.b64encode(f"{BASIC_USERS[name]}:{secret}".encode()).decode())
    found.update(secret[i:i + 8] for i in range(len(secret) - 7))
    return sorted(found)


def leaks(texts: dict[str, str]) -> list[str]:
    return [f"{where}: {name} ({form!r})" for where, text in texts.items() for name, secret in SECRETS.items()
            for form in forms(name, secret) if form in text]


@dataclass
class Seen:
    """Everything the gateway sent back or wrote, by where it came from."""

    texts: dict[str, str] = field(default_factory=dict)

    def response(self, what: str, r: httpx.Response) -> httpx.Response:
        headers = "\n".join(f"{k}: {v}" for k, v in r.headers.items())
        self.texts[f"{what} -> {r.status_code}"] = f"{headers}\n\n{r.text}"
        return r


# -- an upstream that quotes what it was sent -------------------------------------------------------------------------
def quoting_upstream() -> Any:
    """An OpenAI-compatible upstream whose errors quote the Authorization header and every request header (as some
    servers' "Incorrect API key provided: ..." do); ``model`` picks the answer."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        auth = request.headers.get("authorization", "")
        everything = "; ".join(f"{k}={v}" for k, v in request.headers.items())
        model = body.get("model")
        if model == "quote-401":
            return JSONResponse({"error": {"message": f"Incorrect API key provided: {auth}", "type": "auth",
                                           "param": None, "code": "invalid_api_key"}}, status_code=401)
        if model == "quote-400-no-code":
            return JSONResponse({"detail": f"bad credentials {auth} ({everything})"}, status_code=400)
        if model == "quote-500-text":  # the credential straddles the gateway's 500-character cut
            return PlainTextResponse("x" * (495 - len("upstream answered 500: ")) + auth + " " + everything,
                                     status_code=500)
        if model == "quote-503":
            return JSONResponse({"error": {"message": f"overloaded; you sent {everything}", "code": None}},
                                status_code=503)
        return JSONResponse({"id": "c-1", "object": "chat.completion", "model": model, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})

    return Starlette(routes=[Route("/v1/models", models, methods=["GET"]),
                             Route("/v1/chat/completions", chat, methods=["POST"])])


# -- the gateway process ------------------------------------------------------------------------------------------------
# `ragtrim serve` with two bugs planted, so that tracebacks can be seen: a request for model "trigger-bug" fails in
# the gateway's own handler (logged with its traceback), and GET /v1/models with x-trigger-bug fails past it (Starlette
# and uvicorn print the traceback); each also fails in a thread and warns, all quoting the secrets.
_RUN = r"""
import sys, threading, warnings
import ragtrim.serve.app as app

quoted = sys.argv[2]

def trouble():
    threading.Thread(target=lambda: (_ for _ in ()).throw(RuntimeError(f"a thread failed near {quoted}"))).start()
    warnings.warn(f"a warning that quotes {quoted}")

real_prepare, real_models = app.prepare_chat, app.Gateway.models

def prepare(body, config, counter):
    if body.get("model") == "trigger-bug":
        trouble()
        raise RuntimeError(f"a bug in the gateway near {quoted}")
    return real_prepare(body, config, counter)

async def models(self, request):
    if "x-trigger-bug" in request.headers:
        trouble()
        raise RuntimeError(f"a bug past the gateway's handler near {quoted}")
    return await real_models(self, request)

app.prepare_chat, app.Gateway.models = prepare, models
from ragtrim.cli import main
sys.exit(main(["serve", "--config", sys.argv[1], "--port", sys.argv[3], "--log-level", "info"]))
"""


class GatewayProcess:
    def __init__(self, tmp: Path, name: str, config: str) -> None:
        self.config = tmp / f"{name}.toml"
        self.config.write_text(config)
        self.stdout, self.stderr = tmp / f"{name}.out", tmp / f"{name}.err"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # The planted bugs quote the secrets of this config: what the process was told is secret.
        quoted = " ".join(v for v in SECRETS.values() if v in config)
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", _RUN, str(self.config), quoted, str(self.port)],
                                         cwd=ROOT, stdout=out, stderr=err)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"gateway exited with {self.proc.returncode}: {self.stderr.read_text()}")
            try:
                if httpx.get(self.url + "/health/liveness", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the gateway did not start")

    def hup(self, config: bytes) -> None:
        self.config.write_bytes(config)
        os.kill(self.proc.pid, signal.SIGHUP)
        time.sleep(0.4)

    def stop(self, seen: Seen, name: str) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        seen.texts[f"{name} stdout"] = self.stdout.read_text(errors="replace")
        seen.texts[f"{name} stderr"] = self.stderr.read_text(errors="replace")


@pytest.fixture
def redis_servers() -> Iterator[list[RedisServer]]:
    started: list[RedisServer] = []
    yield started
    for r in started:
        r.stop()
        shutil.rmtree(r.dir, ignore_errors=True)


def toml_config(*, upstream: str, fallback: str, state: str, fail_open: bool, log: Path, vectors: str,
                keys: dict[str, dict[str, Any]], api_key: str = "", fallback_api_key: str = "") -> str:
    lines = ["[upstream]", f'url = "{upstream}"', f'fallback_url = "{fallback}"', 'tokenizer = "whitespace"',
             "connect_timeout_s = 1"]
    if api_key:
        lines.append(f'api_key = "{api_key}"')
    if fallback_api_key:
        lines.append(f'fallback_api_key = "{fallback_api_key}"')
    lines += ["[trim]", "budget = 0.5", f'vector_store = "{vectors}"',
              "[limits]", f'state = "{state}"', f"fail_open = {str(fail_open).lower()}", "state_timeout_s = 0.5",
              "state_breaker_s = 0.2", "[metrics]", f'bearer_token = "{SECRETS["metrics_token"]}"',
              "[log]", f'path = "{log}"', "log_text = true", "log_request = true"]
    for key, entry in keys.items():
        lines.append(f'[keys."{key}"]')
        lines += [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


def drive(gw: GatewayProcess, seen: Seen, tag: str) -> None:
    """Every request path a client can reach, each answer kept for the scan."""
    a = {"authorization": f"Bearer {SECRETS['client_key_a']}"}
    b = {"authorization": f"Bearer {SECRETS['client_key_b']}"}

    def chat(model: str, headers: dict[str, str], **extra: Any) -> httpx.Response:
        body = {"model": model, "messages": [{"role": "user", "content": "which tower?"}],
                "documents": ["The tower stands by the river.", "Bananas are yellow."], **extra}
        return seen.response(f"{tag} chat {model}", httpx.post(gw.url + "/v1/chat/completions", json=body,
                                                               headers=headers, timeout=30))

    for model in ("ok", "quote-401", "quote-400-no-code", "quote-500-text", "quote-503", "trigger-bug"):
        chat(model, a)
    chat("ok", b, stream=True)
    chat("ok", b)  # past its rpm = 1 when the limiter runs
    chat("ok", {})  # no key
    chat("ok", {"authorization": "Bearer sk-nobody"})
    seen.response(f"{tag} models", httpx.get(gw.url + "/v1/models", headers=a))
    seen.response(f"{tag} models bug", httpx.get(gw.url + "/v1/models", headers={**a, "x-trigger-bug": "1"}))
    seen.response(f"{tag} embeddings", httpx.post(gw.url + "/v1/embeddings", json={"model": "e", "input": "x"},
                                                  headers=a))
    seen.response(f"{tag} 404", httpx.get(gw.url + "/v1/nothing", headers=a))
    for token in ("", "wrong-token", SECRETS["metrics_token"]):
        h = {"authorization": f"Bearer {token}"} if token else {}
        seen.response(f"{tag} metrics {token[:2]}", httpx.get(gw.url + "/metrics", headers=h))
    for probe in ("/health/liveness", "/health/readiness", "/healthz"):
        seen.response(f"{tag} {probe}", httpx.get(gw.url + probe))


def test_no_secret_leaves_the_gateway(tmp_path: Path, redis_servers: list[RedisServer],
                                      servers: list[ServerThread]) -> None:
    seen = Seen()
    limits_redis = start_redis("--requirepass", SECRETS["state_userinfo"])
    redis_servers.append(limits_redis)
    vectors_port = free_port()  # a vector store that is down
    quoting = ServerThread(quoting_upstream()).start()
    servers.append(quoting)
    down = f"127.0.0.1:{free_port()}"
    log1, log2 = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    keys = {SECRETS["client_key_a"]: {"user": "alice", "org": "acme", "rpm": 100}, SECRETS["client_key_b"]: {"rpm": 1}}

    # 1: the state password in userinfo (right), fail closed; the upstream's password in its URL; the fallback down,
    # with a key; a Redis vector store with a password.
    one = toml_config(
        upstream=f"http://gw-user:{SECRETS['upstream_userinfo']}@127.0.0.1:{quoting.port}/v1",
        fallback=f"http://{down}/v1", fallback_api_key=SECRETS["fallback_api_key"],
        state=f"redis://default:{SECRETS['state_userinfo']}@127.0.0.1:{limits_redis.port}/0", fail_open=False,
        vectors=f"redis://:{SECRETS['vector_store']}@127.0.0.1:{vectors_port}/0", log=log1, keys=keys)
    gw = GatewayProcess(tmp_path, "one", one)
    try:
        drive(gw, seen, "one")
        assert seen.texts["one chat ok -> 200"].endswith('"total_tokens":4}}')
        # Reloads that are refused: a new key with a bad value, a changed state URL, an invalid URL, not UTF-8.
        gw.hup(one.encode() + f'[keys."{SECRETS["reload_key"]}"]\nrpm = 0\n'.encode())
        gw.hup(one.replace(f"default:{SECRETS['state_userinfo']}@", f"default:{SECRETS['reload_state']}@").encode())
        gw.hup(one.replace(f"http://{down}/v1", f"ftp://u:{SECRETS['reload_url']}@{down}/v1").encode())
        gw.hup(one.encode() + f'# {SECRETS["reload_key"]} caf\xe9\n'.encode("latin-1"))
        limits_redis.stop()  # Redis down, fail closed
        time.sleep(1.1)
        drive(gw, seen, "one redis down")
        assert seen.texts["one redis down chat ok -> 503"]
        limits_redis.start()
        quoting.stop()  # the upstream down too: its fallback is down already
        time.sleep(1.1)
        drive(gw, seen, "one upstream down")
        m = seen.texts["one upstream down metrics mt -> 200"]
        assert 'ragtrim_serve_config_reloads_total{result="refused"} 4.0' in m
    finally:
        gw.stop(seen, "one")
    quoting = ServerThread(quoting_upstream(), port=quoting.port).start()
    servers.append(quoting)
    quoting_fallback = ServerThread(quoting_upstream()).start()
    servers.append(quoting_fallback)

    # 2: the state password as ?password= (wrong: Redis refuses it), fail open; the upstream's key; the fallback's
    # password in its URL (a 5xx of the upstream goes to the fallback, whose 5xx, quoting it, is relayed).
    two = toml_config(
        upstream=f"http://127.0.0.1:{quoting.port}/v1", api_key=SECRETS["upstream_api_key"],
        fallback=f"http://fb-user:{SECRETS['fallback_userinfo']}@127.0.0.1:{quoting_fallback.port}/v1",
        state=f"redis://127.0.0.1:{limits_redis.port}/0?password={SECRETS['state_query']}", fail_open=True,
        vectors=f"redis://127.0.0.1:{vectors_port}/0?password={SECRETS['vector_store']}", log=log2, keys=keys)
    gw = GatewayProcess(tmp_path, "two", two)
    try:
        drive(gw, seen, "two")
        assert seen.texts["two chat ok -> 200"]  # admitted without limits: Redis refuses the password
        limits_redis.stop()  # Redis down, fail open
        time.sleep(0.3)
        drive(gw, seen, "two redis down")
    finally:
        gw.stop(seen, "two")

    for log in (log1, log2):
        seen.texts[f"request log {log.name}"] = log.read_text()
    # The paths were taken: errors quoted by the upstream, tracebacks, refused reloads, the limiter's log lines.
    err_one, err_two = seen.texts["one stderr"], seen.texts["two stderr"]
    assert "Traceback" in err_one and "a bug in the gateway near" in err_one and "a thread failed near" in err_one
    assert "a bug past the gateway's handler near" in err_one and "a warning that quotes" in err_one
    assert err_one.count("config reload refused") == 4
    assert "limiter's state store fails" in err_one and "limiter's state store fails" in err_two
    assert "ragtrim serve: 127.0.0.1" in seen.texts["one stdout"]
    assert "Incorrect API key provided" in seen.texts["two chat quote-401 -> 401"]
    assert "Incorrect API key provided" in seen.texts["one chat quote-401 -> 401"]
    assert "upstream answered 500: xxx" in seen.texts["two chat quote-500-text -> 500"]
    assert "overloaded; you sent" in seen.texts["two chat quote-503 -> 503"]
    assert "bad credentials" in seen.texts["one chat quote-400-no-code -> 400"]
    assert "rate_limit_exceeded" in seen.texts["one chat ok -> 429"]
    assert "state_unavailable" in seen.texts["one redis down chat ok -> 503"]
    assert "upstream_unreachable" in seen.texts["one upstream down chat ok -> 502"]
    assert "refuses the password" in seen.texts["two /health/readiness -> 200"]
    assert leaks(seen.texts) == []


@pytest.mark.parametrize("config", [
    f'[upstream]\nurl = "http://u/v1"\n[keys."{SECRETS["config_key"]}"]\nrpm = 0\n',
    f'[upstream]\nurl = "http://u/v1"\n[keys."{SECRETS["config_key"]}"]\nrmp = 5\n',
    f'[upstream]\nurl = "http://u/v1"\n[keys."{SECRETS["config_key"]} x"]\n',
    f'[upstream]\nurl = "ftp://u:{SECRETS["config_url"]}@x/v1"\n',
    f'[upstream]\nurl = "http://u/v1"\n[limits]\nstate = "mysql://u:{SECRETS["config_url"]}@x/0"\n',
    (f'[upstream]\nurl = "http://u/v1"\n[limits]\nstate = "redis://:{SECRETS["config_url"]}@r/0"\n'
     f'[trim]\nvector_store = "redis://r/1?password={SECRETS["config_url"]}"\n'),
    f'[upstream]\nurl = "http://me:{SECRETS["config_url"]}@u/v1"\napi_key = "{SECRETS["config_key"]}"\n',
    f'[upstream]\nurl = "http://u/v1"\napi_key = "{SECRETS["config_key"]}\n',  # not TOML
    f'[upstream]\nurl = "http://u/v1"\napi_key = 5\n[metrics]\nbearer_token = "{SECRETS["config_key"]} x"\n',
], ids=["key-rpm", "key-unknown-field", "key-with-a-space", "url-scheme", "state-scheme", "shared-redis",
        "userinfo-and-key", "not-toml", "bad-types"])
def test_config_errors_quote_no_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str) -> None:
    from ragtrim.cli import main

    path = tmp_path / "gateway.toml"
    path.write_text(config)
    assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "ragtrim: error:" in err
    assert leaks({"stderr": err}) == []


def test_vector_store_warnings_during_trims(caplog: pytest.LogCaptureFixture) -> None:
    """A store that fails is logged while a trim runs (FakeEmbedder: a model scorer without a model)."""
    pytest.importorskip("starlette")
    from ragtrim.serve.app import Gateway
    from ragtrim.serve.config import parse_config
    from ragtrim.testing import FakeEmbedder
    from ragtrim.vectors import store as store_mod

    caplog.set_level(logging.DEBUG, logger="ragtrim")
    handler_text: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            handler_text.append(self.format(record))

    keep = Keep()
    keep.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logging.getLogger("ragtrim").addHandler(keep)
    try:
        for url in (f"redis://:{SECRETS['vector_store']}@127.0.0.1:{free_port()}/0",
                    f"redis://127.0.0.1:{free_port()}/0?password={SECRETS['vector_store']}"):
            Gateway(parse_config({"upstream": {"url": "http://127.0.0.1:9/v1"}, "trim": {"vector_store": url}}))
            embedder = FakeEmbedder(recipe="fake-v1", vector_store="default")
            embedder.embed(["the tower by the river", "a second passage"])
    finally:
        logging.getLogger("ragtrim").removeHandler(keep)
        store_mod._DEFAULT = None
    text = "\n".join(handler_text + [r.getMessage() for r in caplog.records])
    assert text.count("vector store redis://") >= 2, text  # both stores failed, and said so
    assert leaks({"log": text}) == []


def test_the_scan_finds_what_it_looks_for() -> None:
    """The scan itself: each form of a planted secret is found."""
    pw = SECRETS["upstream_userinfo"]
    basic = base64.b64encode(f"gw-user:{pw}".encode()).decode()
    for text in (pw, f"x{pw[3:11]}y", basic, quote(SECRETS["config_url"], safe="")):
        assert leaks({"t": text})
    assert leaks({"t": "nothing secret here, sk-nobody, key-1a2b3c4d"}) == []

