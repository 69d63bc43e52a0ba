"""Hostile requests against a real gateway: one client sends each hostile class in turn while another process polls
``/health/liveness``; per class, the probe's latency, the gateway's RSS growth, every answer's status and error code,
and whether every request reached the request log and ``/metrics``.

Targets: liveness p99 <= 50 ms and RSS growth <= 100 MB in every class; every answer other than a 200 is an
OpenAI-shaped error (``{"error": {"message", "type", "param", "code"}}``) with a code; no request missing from the
log or the metrics; concurrent readiness probes make at most one upstream call per second. The gateway
(``ragtrim serve``, uvicorn) and the fake upstream run as subprocesses on 127.0.0.1.

Run: ``ragtrim-bench serve hostile_requests`` -> ``benchmarks/results/serve/hostile_requests.json``
(``--quick`` for the small version the tests run; ``--classes a,b`` for some classes only).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import socket
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ragtrim_bench.common.host import load_average
from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile
from ragtrim_bench.serve.hostile_http import (
    CHAT,
    KEY,
    Answer,
    dechunk,
    error_code,
    json_request,
    parse_response,
    read_counting,
    request_head,
    send,
)
from ragtrim_bench.serve.load import free_port, start_process, stop_process

__all__ = ["HostileConfig", "dechunk", "error_code", "main", "nested", "parse_response", "run", "targets"]

SMALL_KEY = "sk-small"  # a key whose tpm a large request can never fit


@dataclass(frozen=True, slots=True)
class HostileConfig:
    repeats: int = 3                  # requests per class, one after another
    large_body_mb: int = 100          # a body far over the cap, declared and chunked
    large_message_mb: int = 12        # one plain message under the 16 MiB cap: parsed, counted, refused
    deep_levels: int = 300            # nesting inside metadata / response_format / tools
    escaped_documents: int = 2000     # "\u0064ocuments": the field name escaped
    many_documents: int = 5000
    document_words: int = 60
    hidden_words: int = 40_000        # text in prediction / response_format / an input_text part
    slow_body_s: float = 1.0          # a body sent in pieces over this long (under the deadline)
    stalled_connections: int = 50     # connections that send 8 of 1,000 body bytes, then nothing
    body_timeout_s: float = 2.0       # the gateway's limits.body_timeout_s for the run
    max_input_tokens: int = 8192
    huge_answer_inputs: int = 2048    # /v1/embeddings inputs per request: the answer is inputs x dims numbers
    huge_answer_dims: int = 1536      # 2,048 x 1,536: 29 MB of JSON per answer
    huge_answer_concurrency: int = 4  # answers in flight at once
    spaceless_mb: float = 12.0        # one run without a space in documents
    readiness_probes: int = 100       # unauthenticated readiness probes at once, while /models is slow
    models_ms: float = 500.0          # the fake upstream's GET /v1/models time
    probe_path: str = "/health/liveness"
    probe_interval_s: float = 0.01
    class_pause_s: float = 0.5        # quiet time after each class (RSS settles, the log catches up)
    min_window_s: float = 1.0         # a class's window lasts at least this long (fast classes too)
    client_timeout_s: float = 300.0
    classes: tuple[str, ...] = ()     # the classes to run (empty: all)

    @classmethod
    def quick(cls) -> HostileConfig:
        return cls(repeats=1, large_body_mb=20, large_message_mb=1, escaped_documents=100, many_documents=300,
                   hidden_words=12_000, slow_body_s=0.3, stalled_connections=5, body_timeout_s=1.0,
                   huge_answer_inputs=256, huge_answer_concurrency=2, spaceless_mb=0.25, readiness_probes=20,
                   models_ms=200.0, class_pause_s=0.2, min_window_s=0.3)


@dataclass(slots=True)
class ClassResult:
    cls: str
    description: str
    started_s: float = 0.0
    ended_s: float = 0.0
    answers: list[Answer] = field(default_factory=list)
    logged: bool = True  # its requests go to the request log and /metrics (probes do not)
    extra: dict[str, Any] = field(default_factory=dict)


# -- the hostile classes ---------------------------------------------------------------------------------------------
def chat(content: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": content}], **extra}


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def words(n: int, seed: int = 0) -> str:
    """``n`` words drawn from a 2,000-word vocabulary with a seeded generator: no piece of a long text repeats
    another, so the tokenizer's cache never shortcuts the count."""
    rng = random.Random(seed)
    syllables = ["al", "be", "ga", "de", "ri", "so", "pa", "to", "o", "en", "si", "mar", "ku", "lin", "ve", "dor"]
    vocab = [rng.choice(syllables) + rng.choice(syllables) + rng.choice(syllables) for _ in range(2000)]
    return " ".join(rng.choice(vocab) for _ in range(n))


def run_classes(port: int, cfg: HostileConfig, *, on_start: Callable[[str], None], on_end: Callable[[str], None],
                upstream_port: int | None = None) -> list[ClassResult]:
    """Every class in turn; ``on_start``/``on_end`` mark each class's window (metrics snapshots). ``upstream_port``:
    the fake upstream, whose count of ``GET /v1/models`` calls the readiness class reads."""
    r = cfg.repeats
    results: list[ClassResult] = []
    extras: dict[str, dict[str, Any]] = {}  # what a class measured besides its answers

    def run(cls: str, description: str, make: Callable[[int], list[Answer]], *, logged: bool = True,
            repeats: int | None = None) -> None:
        if cfg.classes and cls not in cfg.classes:
            return
        res = ClassResult(cls, description, logged=logged)
        on_start(cls)
        res.started_s = time.monotonic()
        for i in range(r if repeats is None else repeats):
            res.answers.extend(make(i))
        res.extra = dict(extras.pop(cls, {}))
        while time.monotonic() < res.started_s + cfg.min_window_s:  # enough probe samples for a percentile
            time.sleep(0.01)
        res.ended_s = time.monotonic()
        on_end(cls)
        results.append(res)
        time.sleep(cfg.class_pause_s)

    big = b"x" * (1 << 20)
    n_big = cfg.large_body_mb

    def large_body(i: int) -> list[Answer]:
        declared = send(port, "large_body", f"large-declared-{i}",
                        request_head(CHAT, f"large-declared-{i}", length=n_big << 20) + b'{"model":"fake","x":"',
                        [big] * n_big, gap_s=0.0005)
        chunk = b"%x\r\n" % len(big) + big + b"\r\n"
        start = b'{"model":"fake","x":"'
        chunked = send(port, "large_body", f"large-chunked-{i}",
                       request_head(CHAT, f"large-chunked-{i}", length=None) + b"%x\r\n" % len(start) + start
                       + b"\r\n", [chunk] * n_big, gap_s=0.0005)
        return [declared, chunked]

    message = json.dumps(chat(words(cfg.large_message_mb * 130_000, seed=1))).encode()

    def large_message(i: int) -> list[Answer]:
        return [json_request(port, "large_message", f"message-{i}", message)]

    deep = [json.dumps(chat("hi", **{f: nested(cfg.deep_levels)})).encode()
            for f in ("metadata", "response_format", "tools")]
    deepest = b'{"model":"fake","messages":[],"metadata":' + b"[" * 100_000 + b"]" * 100_000 + b"}"

    def deep_json(i: int) -> list[Answer]:
        return [*(json_request(port, "deep_json", f"deep-{i}-{j}", b) for j, b in enumerate(deep)),
                json_request(port, "deep_json", f"deep-{i}-100k", deepest)]

    docs = [words(cfg.document_words, seed=k) for k in range(max(cfg.escaped_documents, cfg.many_documents))]
    question = "which tower stands by the river?"

    def docs_body(n: int, escaped: bool) -> bytes:
        body = json.dumps(chat(question, documents=docs[:n], ragtrim={"budget": 400})).encode()
        return body.replace(b'"documents"', b'"\\u0064ocuments"') if escaped else body

    escaped = docs_body(cfg.escaped_documents, True)
    many = docs_body(cfg.many_documents, False)

    def escaped_keys(i: int) -> list[Answer]:
        return [json_request(port, "escaped_keys", f"escaped-{i}", escaped)]

    def many_documents(i: int) -> list[Answer]:
        return [json_request(port, "many_documents", f"many-{i}", many)]

    slow = json.dumps(chat("a slow but complete body " + words(200))).encode()
    step = max(1, len(slow) // 10)
    slow_pieces = [slow[k:k + step] for k in range(0, len(slow), step)]

    def slow_body(i: int) -> list[Answer]:
        return [send(port, "slow_body", f"slow-{i}", request_head(CHAT, f"slow-{i}", length=len(slow)),
                     slow_pieces, gap_s=cfg.slow_body_s / len(slow_pieces))]

    def stalled_body(i: int) -> list[Answer]:
        socks = []
        t0 = time.perf_counter()
        for j in range(cfg.stalled_connections):
            s = socket.create_connection(("127.0.0.1", port), timeout=cfg.client_timeout_s)
            s.sendall(request_head(CHAT, f"stalled-{i}-{j}", length=1000) + b'{"model":')
            socks.append((f"stalled-{i}-{j}", s))
        answers = []
        for rid, s in socks:
            data = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except (TimeoutError, ConnectionResetError):
                pass
            s.close()
            status, headers, body = parse_response(data)
            code, shaped = error_code(status, headers, body)
            answers.append(Answer("stalled_body", rid, status, code, shaped, (time.perf_counter() - t0) * 1000))
        return answers

    hidden = words(cfg.hidden_words)
    hidden_bodies = [
        chat("hi", prediction={"type": "content", "content": hidden}),
        chat("hi", response_format={"type": "json_schema", "json_schema": {"name": "x", "description": hidden}}),
        chat([{"type": "input_text", "text": hidden}]),
    ]

    def hidden_text(i: int) -> list[Answer]:
        return [json_request(port, "hidden_text", f"hidden-{i}-{j}", json.dumps(b).encode())
                for j, b in enumerate(hidden_bodies)]

    bad = [chat("hi", stream="yes"), chat("hi", stream=1), chat("hi", n=10_000), chat("hi", max_tokens="many")]

    def bad_types(i: int) -> list[Answer]:
        out = [json_request(port, "bad_types", f"bad-{i}-{j}", json.dumps(b).encode()) for j, b in enumerate(bad)]
        out.append(json_request(port, "bad_types", f"bad-{i}-json", b'{"model": "fake", "messages": [nope'))
        return out

    def unknown_routes(i: int) -> list[Answer]:
        return [json_request(port, "unknown_routes", f"route-{i}-404", b"{}", path="/v1/nothing-here"),
                send(port, "unknown_routes", f"route-{i}-405",
                     request_head(CHAT, f"route-{i}-405", length=0, method="GET"))]

    stream_body = json.dumps(chat("stream to an old client", stream=True)).encode()

    def framing(status: int, headers: dict[str, str], body: bytes) -> str:
        return f"transfer-encoding={headers.get('transfer-encoding', 'none')}; content-length=" \
               f"{headers.get('content-length', 'none')}; ends_with_done={body.rstrip().endswith(b'[DONE]')}"

    def http10_stream(i: int) -> list[Answer]:
        head = request_head(CHAT, f"http10-{i}", length=len(stream_body), version="1.0")
        return [send(port, "http10_stream", f"http10-{i}", head + stream_body, note=framing)]

    never = json.dumps(chat("hi", max_tokens=5000)).encode()

    def retry_hint(status: int, headers: dict[str, str], body: bytes) -> str:
        return f"x-should-retry={headers.get('x-should-retry', 'absent')}"

    def never_fits(i: int) -> list[Answer]:
        return [json_request(port, "never_fits", f"never-{i}", never, key=SMALL_KEY, note=retry_hint)]

    emb_body = json.dumps({"model": "fake-embedding", "dimensions": cfg.huge_answer_dims,
                           "input": [f"passage {k} of the corpus" for k in range(cfg.huge_answer_inputs)]}).encode()

    def huge_answers(i: int) -> list[Answer]:
        """Embeddings answers of inputs x dims numbers, several at once: passed through, never parsed whole."""
        answers: list[Answer] = []

        def one(j: int) -> None:
            rid = f"huge-{i}-{j}"
            head = request_head("/v1/embeddings", rid, length=len(emb_body))
            answers.append(read_counting(port, "huge_answers", rid, head + emb_body, timeout_s=cfg.client_timeout_s))

        threads = [threading.Thread(target=one, args=(j,)) for j in range(cfg.huge_answer_concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return answers

    spaceless = json.dumps(chat("which passage is the long one?", ragtrim={"budget": 400}, documents=[
        "x" * int(cfg.spaceless_mb * 1_000_000), "A short passage about the river."])).encode()

    def spaceless_documents(i: int) -> list[Answer]:
        return [json_request(port, "spaceless_documents", f"spaceless-{i}", spaceless, timeout_s=cfg.client_timeout_s)]

    def readiness_flood(i: int) -> list[Answer]:
        """Unauthenticated readiness probes at once while the upstream's /models is slow: they share one check."""
        before = models_calls(upstream_port)
        answers: list[Answer] = []
        lock = threading.Lock()

        def probe(j: int) -> None:
            a = send(port, "readiness_flood", f"readiness-{i}-{j}",
                     b"GET /health/readiness HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
                     timeout_s=cfg.client_timeout_s)
            with lock:
                answers.append(a)

        time.sleep(1.1)  # past the last check's one-second cache
        threads = [threading.Thread(target=probe, args=(j,)) for j in range(cfg.readiness_probes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        extras.setdefault("readiness_flood", {"upstream_models_calls": 0, "probes": 0})
        extras["readiness_flood"]["upstream_models_calls"] += models_calls(upstream_port) - before
        extras["readiness_flood"]["probes"] += len(answers)
        return answers

    run("idle", "nothing sent: the machine's own probe noise, for comparison", lambda i: [])
    run("large_body", f"{n_big} MiB bodies, declared by Content-Length and chunked, against the 16 MiB cap", large_body)
    run("large_message", f"one plain message of {cfg.large_message_mb} MB (under the cap): parsed and counted, "
        "then over max_input_tokens", large_message)
    run("deep_json", f"objects nested {cfg.deep_levels} levels in metadata, response_format and tools; 100,000 "
        "levels of arrays", deep_json)
    run("escaped_keys", f'{cfg.escaped_documents} documents under the escaped name "\\u0064ocuments"', escaped_keys)
    run("many_documents", f"{cfg.many_documents} documents of {cfg.document_words} words", many_documents)
    run("slow_body", f"a complete body sent in pieces over {cfg.slow_body_s:g} s", slow_body)
    run("stalled_body", f"{cfg.stalled_connections} connections that send 8 of 1,000 body bytes and stall",
        stalled_body)
    run("hidden_text", f"{cfg.hidden_words} words in prediction, response_format and an input_text part",
        hidden_text)
    run("bad_types", 'stream "yes" and 1, n = 10,000, max_tokens "many", broken JSON', bad_types)
    run("unknown_routes", "a 404 and a 405", unknown_routes)
    run("http10_stream", "a streamed answer to an HTTP/1.0 client", http10_stream)
    run("never_fits", "a request over its key's whole tpm window", never_fits)
    run("huge_answers", f"{cfg.huge_answer_concurrency} /v1/embeddings answers at once, each {cfg.huge_answer_inputs} "
        f"x {cfg.huge_answer_dims} numbers", huge_answers)
    run("spaceless_documents", f"one run of {cfg.spaceless_mb:g} MB without a space in documents", spaceless_documents)
    run("readiness_flood", f"{cfg.readiness_probes} unauthenticated readiness probes at once while the upstream's "
        f"/models takes {cfg.models_ms:g} ms", readiness_flood, logged=False)
    return results


def models_calls(upstream_port: int | None) -> int:
    """How many ``GET /v1/models`` the fake upstream has answered (0 without one)."""
    if upstream_port is None:
        return 0
    with urllib.request.urlopen(f"http://127.0.0.1:{upstream_port}/debug/requests", timeout=30) as r:
        return int(json.loads(r.read())["models_calls"])


# -- the probe poller (its own process, so the client's work never delays it) ----------------------------------------
def poll_probe(port: int, path: str, gateway_pid: int, interval_s: float, stop: Any, out: Any, max_s: float) -> None:
    import http.client

    samples: list[tuple[float, float, int, int]] = []  # (monotonic, ms, status, gateway RSS bytes)
    page = os.sysconf("SC_PAGE_SIZE")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    end = time.monotonic() + max_s
    while not stop.is_set() and time.monotonic() < end:
        t0 = time.perf_counter()
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        ms = (time.perf_counter() - t0) * 1000
        try:
            with open(f"/proc/{gateway_pid}/statm") as f:
                rss = int(f.read().split()[1]) * page
        except OSError:
            rss = 0
        samples.append((time.monotonic(), ms, status, rss))
        time.sleep(interval_s)
    out.put(samples)


# -- metrics and log checks ------------------------------------------------------------------------------------------
def scrape(port: int) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    totals = {"requests": 0.0, "errors": 0.0}
    for line in text.splitlines():
        if line.startswith("ragtrim_serve_requests_total{"):
            totals["requests"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("ragtrim_serve_errors_total{"):
            totals["errors"] += float(line.rsplit(" ", 1)[1])
    return totals


def read_log(path: Path, expected: int, timeout_s: float = 30.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    entries: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        entries = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                e = json.loads(line)
                entries[e["request_id"]] = e
        if len(entries) >= expected:
            break
        time.sleep(0.1)
    return entries


def gateway_config(cfg: HostileConfig, upstream_port: int, log_path: Path) -> str:
    return f"""[upstream]
url = "http://127.0.0.1:{upstream_port}/v1"

[trim]
budget = 0.25

[limits]
max_input_tokens = {cfg.max_input_tokens}
body_timeout_s = {cfg.body_timeout_s}

[keys."{KEY}"]
user = "bench"

[keys."{SMALL_KEY}"]
user = "small"
tpm = 2000

[log]
path = "{log_path}"
"""


def summarize(results: list[ClassResult], samples: list[tuple[float, float, int, int]],
              deltas: dict[str, dict[str, float]], log: dict[str, dict[str, Any]]) -> dict[str, Any]:
    classes = []
    for res in results:
        window = [s for s in samples if res.started_s <= s[0] <= res.ended_s]
        before = [s for s in samples if s[0] < res.started_s]
        base_rss = before[-1][3] if before else (window[0][3] if window else 0)
        peak_rss = max((s[3] for s in window), default=base_rss)
        lat = [s[1] for s in window]
        answers = res.answers
        non_ok = [a for a in answers if a.status != 200]
        logged = answers if res.logged else []
        missing_log = [a.request_id for a in logged if a.request_id not in log]
        wrong_log = [a.request_id for a in logged
                     if a.request_id in log and a.status and log[a.request_id]["status"] != a.status]
        d = deltas.get(res.cls, {})
        classes.append({
            "class": res.cls,
            "description": res.description,
            "requests": len(answers),
            "duration_s": round(res.ended_s - res.started_s, 3),
            "probe_samples": len(lat),
            "probe_p50_ms": round(percentile(lat, 50), 2),
            "probe_p99_ms": round(percentile(lat, 99), 2),
            "probe_max_ms": round(max(lat, default=float("nan")), 2),
            "probe_failures": sum(1 for s in window if s[2] != 200),
            "rss_start_mb": round(base_rss / 2**20, 1),
            "rss_peak_mb": round(peak_rss / 2**20, 1),
            "rss_growth_mb": round((peak_rss - base_rss) / 2**20, 1),
            "statuses": sorted({a.status for a in answers}),
            "codes": sorted({a.code for a in answers if a.code is not None}),
            "every_error_openai_shaped": all(a.openai_error for a in non_ok),
            "missing_from_log": missing_log,
            "log_status_mismatch": wrong_log,
            "metrics_requests_delta": d.get("requests", 0.0),
            "metrics_errors_delta": d.get("errors", 0.0),
            "missing_from_metrics": int(len(logged) - d.get("requests", 0.0)) if res.logged else 0,
            "errors_missing_from_metrics": int(len(non_ok) - d.get("errors", 0.0)) if res.logged else 0,
            **res.extra,
            "answers": [asdict(a) for a in answers],
        })
    return {"classes": classes}


def targets(summary: dict[str, Any]) -> dict[str, Any]:
    cs = summary["classes"]
    return {
        "probe_p99_ms_max": max(c["probe_p99_ms"] for c in cs),
        "probe_p99_le_50ms": all(c["probe_p99_ms"] <= 50 for c in cs),
        "rss_growth_mb_max": max(c["rss_growth_mb"] for c in cs),
        "rss_growth_le_100mb": all(c["rss_growth_mb"] <= 100 for c in cs),
        "every_error_openai_shaped_with_code": all(c["every_error_openai_shaped"] for c in cs),
        "nothing_missing_from_log": all(not c["missing_from_log"] and not c["log_status_mismatch"] for c in cs),
        "nothing_missing_from_metrics": all(c["missing_from_metrics"] == 0 and c["errors_missing_from_metrics"] == 0
                                            for c in cs),
        "no_request_unanswered": all(0 not in c["statuses"] for c in cs),
        # Readiness: one upstream check per flood (the probes share it), not one per probe.
        "readiness_probes_share_one_upstream_call": all(c.get("upstream_models_calls", 0) <= c["requests"] // 100 + 1
                                                        for c in cs if c["class"] == "readiness_flood"),
    }


def run(cfg: HostileConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ragtrim-hostile-") as tmp:
        up_port, gw_port = free_port(), free_port()
        log_path = Path(tmp) / "requests.jsonl"
        config_path = Path(tmp) / "gateway.toml"
        config_path.write_text(gateway_config(cfg, up_port, log_path))
        upstream = start_process(["serve-fake-upstream", "--port", str(up_port), "--base-ms", "5",
                                  "--per-1k-ms", "0", "--models-ms", str(cfg.models_ms)],
                                 f"http://127.0.0.1:{up_port}/health")
        gateway = None
        try:
            gateway = start_process(["serve", "--config", str(config_path), "--port", str(gw_port)],
                                    f"http://127.0.0.1:{gw_port}/health/liveness")
            load_before = load_average()
            ctx = mp.get_context("spawn")
            stop, out = ctx.Event(), ctx.Queue()
            poller = ctx.Process(target=poll_probe, args=(gw_port, cfg.probe_path, gateway.pid, cfg.probe_interval_s,
                                                          stop, out, 3600.0), daemon=True)
            poller.start()
            time.sleep(1.0)  # the poller's baseline
            snapshots: dict[str, dict[str, float]] = {}
            deltas: dict[str, dict[str, float]] = {}

            def on_start(cls: str) -> None:
                snapshots[cls] = scrape(gw_port)

            def on_end(cls: str) -> None:
                time.sleep(0.2)  # a stream's record is written just after its last byte
                after = scrape(gw_port)
                deltas[cls] = {k: after[k] - snapshots[cls][k] for k in after}

            t0 = time.monotonic()
            results = run_classes(gw_port, cfg, on_start=on_start, on_end=on_end, upstream_port=up_port)
            wall_s = time.monotonic() - t0
            stop.set()
            samples = out.get(timeout=60)
            poller.join(timeout=10)
            load_after = load_average()
            expected = sum(len(r.answers) for r in results if r.logged)
            log = read_log(log_path, expected)
        finally:
            if gateway is not None:
                stop_process(gateway)
            stop_process(upstream)
    summary = summarize(results, samples, deltas, log)
    return {
        "benchmark": "serve_hostile",
        "config": asdict(cfg),
        "gateway_limits": {"max_body_bytes": 16 * 1024 * 1024, "body_timeout_s": cfg.body_timeout_s,
                           "max_input_tokens": cfg.max_input_tokens, "tokenizer": "cl100k_base"},
        "load_average_before": load_before,
        "load_average_after": load_after,
        "wall_s": round(wall_s, 1),
        "targets": targets(summary),
        **summary,
    }


def format_report(report: dict[str, Any]) -> str:
    probe = report["config"]["probe_path"]
    lines = [(f"{'class':<20}{'n':>4}{'probe p50':>11}{'p99':>9}{'max':>9}{'RSS +MB':>9}  statuses / codes "
              f"(probe: {probe})")]
    for c in report["classes"]:
        lines.append(f"{c['class']:<20}{c['requests']:>4}{c['probe_p50_ms']:>9.1f}ms{c['probe_p99_ms']:>7.1f}ms"
                     f"{c['probe_max_ms']:>7.1f}ms{c['rss_growth_mb']:>9.1f}  {c['statuses']} {c['codes']}")
    lines.append("targets: " + json.dumps(report["targets"]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (the test's run)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--classes", default=None, help="comma-separated classes to run (default: all)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/serve/hostile_requests.json")
    args = parser.parse_args(argv)
    cfg = HostileConfig.quick() if args.quick else HostileConfig()
    if args.repeats is not None:
        cfg = replace(cfg, repeats=args.repeats)
    if args.classes:
        cfg = replace(cfg, classes=tuple(c.strip() for c in args.classes.split(",") if c.strip()))
    report = run(cfg)
    out = write_result(args.output or result_path(__spec__.name), report, command=command_line(__spec__.name, argv),
                       packages=["starlette", "uvicorn", "uvloop", "httptools"])
    print(format_report(report))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
