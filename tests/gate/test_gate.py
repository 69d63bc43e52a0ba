"""``ragtrim gate`` end to end against real uvicorn upstreams on real sockets: an exact reader, one that answers a
known share wrong, a slow one, a ragtrim gateway in front, failing ones; an interrupted run continued."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx", reason="the serve extra is not installed: pip install 'ragtrim[serve]'")

from ragtrim.cli import main
from ragtrim.gate.arms import Arm, TrimSpec
from ragtrim.gate.core import run_gate
from ragtrim.gate.golden import GoldenItem, write_golden
from ragtrim.gate.runner import RunConfig
from ragtrim.gate.verdict import Thresholds
from ragtrim.serve.app import Gateway
from ragtrim.serve.config import parse_config
from ragtrim.testing import is_degraded
from tests.serve.conftest import ServerThread

QUIET = RunConfig(progress=False, warmup=1, retries=1, backoff_s=0.01)
REPO = Path(__file__).resolve().parents[2]


def _arm(name: str, server: ServerThread, **kwargs: Any) -> Arm:
    return Arm(name=name, url=server.url + "/v1", model="m", **kwargs)


def test_an_exact_change_passes_through_the_cli(reader: Callable[..., ServerThread], golden: list[GoldenItem],
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = reader(), reader()
    write_golden(golden, tmp_path / "golden.jsonl")
    code = main(["gate", "run", str(tmp_path / "golden.jsonl"), "--arm", f"base={a.url}/v1", "--arm",
                 f"same={b.url}/v1", "--model", "m", "--out", str(tmp_path / "out"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert report["verdict"] == "pass"
    for arm in ("base", "same"):
        assert report["arms"][arm]["accuracy"]["rate"] == 1.0 and report["arms"][arm]["refusal"]["rate"] == 1.0
    assert report["changes"]["same"]["comparison"]["accuracy"]["drop"] == 0.0
    assert "verdict: PASS" in out and (tmp_path / "out" / "gate.html").is_file()


def test_a_degraded_change_fails_with_the_share_it_degrades(reader: Callable[..., ServerThread],
                                                             golden: list[GoldenItem], tmp_path: Path) -> None:
    share = 0.25
    base, bad = reader(), reader(wrong_share=share)
    report = run_gate(golden, [_arm("base", base), _arm("degraded", bad)], tmp_path, run_config=QUIET)
    wrong_answerable = sum(is_degraded(i.question, share) for i in golden if i.answerable)
    wrong_unanswerable = sum(is_degraded(i.question, share) for i in golden if not i.answerable)
    assert wrong_answerable >= 3 and wrong_unanswerable >= 1  # the set exercises both
    c = report["changes"]["degraded"]
    acc = c["comparison"]["accuracy"]
    assert (acc["losses"], acc["gains"]) == (wrong_answerable, 0)
    assert acc["drop"] == round(wrong_answerable / 30, 4)
    assert c["comparison"]["refusal"]["losses"] == wrong_unanswerable
    assert report["verdict"] == "fail" and c["verdict"] == "fail"
    assert {ch["check"] for ch in c["checks"] if not ch["passed"]} >= {"accuracy", "refusal"}
    assert {w["id"] for w in c["worst"]} <= {i.id for i in golden if is_degraded(i.question, share)}


def test_the_ttft_gate_on_a_slow_upstream(reader: Callable[..., ServerThread], golden: list[GoldenItem],
                                          tmp_path: Path) -> None:
    slow, fast = reader(base_ms=400), reader(base_ms=5)  # far apart: the client's own time on a busy machine
    items = golden[:16]
    faster = run_gate(items, [_arm("slow", slow), _arm("fast", fast)], tmp_path / "a", run_config=QUIET,
                      thresholds=Thresholds(min_ttft_gain=1.5))
    check = {c["check"]: c for c in faster["changes"]["fast"]["checks"]}["ttft_p50_gain"]
    assert faster["verdict"] == "pass" and check["passed"] and check["value"] > 1.5
    slower = run_gate(items, [_arm("fast", fast), _arm("slow", slow)], tmp_path / "b", run_config=QUIET,
                      thresholds=Thresholds(min_ttft_gain=1.5))
    check = {c["check"]: c for c in slower["changes"]["slow"]["checks"]}["ttft_p50_gain"]
    assert slower["verdict"] == "fail" and not check["passed"] and check["value"] < 1 / 1.5
    assert slower["failed_checks"] == ["slow: ttft_p50_gain"]  # accuracy holds: only speed fails


def test_an_interrupted_run_continues(reader: Callable[..., ServerThread], golden: list[GoldenItem],
                                      tmp_path: Path) -> None:
    """The CLI in its own process, killed (SIGKILL: no cleanup) mid-run; the rerun sends only the rest."""
    a, b = reader(base_ms=40), reader(base_ms=40)
    write_golden(golden, tmp_path / "golden.jsonl")
    out = tmp_path / "out"
    args = ["gate", "run", str(tmp_path / "golden.jsonl"), "--arm", f"base={a.url}/v1", "--arm", f"same={b.url}/v1",
            "--model", "m", "--out", str(out), "--no-progress", "--concurrency", "2", "--warmup", "0"]
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'benchmarks'}"}
    proc = subprocess.Popen([sys.executable, "-m", "ragtrim", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_bytes().count(b"\n") >= 20:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    kept = results.read_bytes().count(b"\n")
    assert 20 <= kept < 80, kept  # killed mid-run
    served_before = sum(len(httpx.get(s.url + "/debug/requests").json()["requests"]) for s in (a, b))
    assert main([*args, "--warmup", "0"]) == 0
    report = json.loads((out / "gate.json").read_text())
    run = report["run"]
    assert run["reused"] == kept and sum(run["sent"].values()) == 80 - kept
    served_after = sum(len(httpx.get(s.url + "/debug/requests").json()["requests"]) for s in (a, b))
    assert served_after - served_before == 80 - kept  # nothing sent twice
    assert report["arms"]["same"]["accuracy"]["right"] == 30 and report["arms"]["same"]["requests"]["answered"] == 40
    assert main([*args, "--warmup", "0"]) == 0  # a finished run re-judges without sending anything
    assert json.loads((out / "gate.json").read_text())["run"]["sent"] == {"base": 0, "same": 0}


def test_ragtrim_gateway_in_front_of_an_arm(reader: Callable[..., ServerThread], servers: list[ServerThread],
                                            golden: list[GoldenItem], tmp_path: Path) -> None:
    upstream = reader(per_1k_ms=50)
    gateway = ServerThread(Gateway(parse_config({
        "upstream": {"url": upstream.url + "/v1", "tokenizer": "whitespace"},
        "trim": {"budget": 0.25, "scorer": "bm25"}})).app()).start()
    servers.append(gateway)
    spec = TrimSpec(budget=0.25, scorer="bm25", tokenizer="whitespace")
    arms = [_arm("direct", upstream), _arm("gateway", gateway, documents="field"),
            _arm("client_trim", upstream, trim=spec)]
    report = run_gate(golden, arms, tmp_path, run_config=QUIET)
    arms_r = report["arms"]
    assert arms_r["gateway"]["accuracy"]["rate"] == arms_r["client_trim"]["accuracy"]["rate"] == 1.0
    tokens = arms_r["gateway"]["tokens"]
    assert tokens["gateway_prompt_after_mean"] < tokens["gateway_prompt_before_mean"] / 2
    assert arms_r["client_trim"]["tokens"]["documents_after_mean"] < arms_r["client_trim"]["tokens"][
        "documents_before_mean"] / 3
    assert arms_r["gateway"]["tokens"]["prompt_mean"] < arms_r["direct"]["tokens"]["prompt_mean"] / 2
    # the gateway's trim and the client-side trim send the upstream the same prompt
    seen = httpx.get(upstream.url + "/debug/requests").json()["requests"]
    by_prompt: dict[str, int] = {}
    for r in seen:
        msgs = r["body"].get("messages") or []
        if msgs and msgs[-1]["content"].endswith(golden[0].question):
            by_prompt[msgs[-1]["content"]] = by_prompt.get(msgs[-1]["content"], 0) + 1
    assert sorted(by_prompt.values()) == [1, 2]  # untrimmed once (direct), trimmed twice (gateway, client)


def test_errors_are_counted_after_retries(reader: Callable[..., ServerThread], golden: list[GoldenItem],
                                          tmp_path: Path) -> None:
    a = reader()
    items = golden[:6]
    arms = [_arm("base", a), Arm(name="down", url=a.url + "/v1", model="fail-503"),
            Arm(name="refused", url=a.url + "/v1", model="fail-400")]
    report = run_gate(items, arms, tmp_path, run_config=RunConfig(progress=False, warmup=0, retries=2,
                                                                 backoff_s=0.01))
    down = report["arms"]["down"]["requests"]
    assert down["errors"] == 6 and down["errors_by_kind"] == {"http_503": 6} and down["retried"] == 6
    records = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {r["attempts"] for r in records if r["arm"] == "down"} == {3}
    assert {r["attempts"] for r in records if r["arm"] == "refused"} == {1}  # a 400 is not retried
    assert report["arms"]["down"]["accuracy"]["right"] == 0  # failures count as wrong, never dropped
    failed = {c["check"] for c in report["changes"]["down"]["checks"] if not c["passed"]}
    assert failed == {"accuracy", "errors"}


def test_secrets_never_reach_a_report(servers: list[ServerThread], reader: Callable[..., ServerThread],
                                      golden: list[GoldenItem], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A server that echoes the request's Authorization header in its error message, an arm URL with a password,
    and an arm that never answers: the key and the password appear in no file and no output line."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"error": {"message": f"bad key {request.headers.get('authorization')}"}},
                            status_code=400)

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"data": []})

    leaky = ServerThread(Starlette(routes=[Route("/v1/chat/completions", echo, methods=["POST"]),
                                           Route("/v1/models", models)])).start()
    servers.append(leaky)
    monkeypatch.setenv("GATE_TEST_KEY", "sk-planted-secret-1234")
    good = reader()
    host = good.url.removeprefix("http://")
    (tmp_path / "arms.toml").write_text(f'''
[[arm]]
name = "base"
url = "http://user:hunter2-password@{host}/v1"
model = "m"
[[arm]]
name = "leaky"
url = "{leaky.url}/v1"
model = "m"
api_key_env = "GATE_TEST_KEY"
''', encoding="utf-8")
    write_golden(golden[:4], tmp_path / "golden.jsonl")
    code = main(["gate", "run", str(tmp_path / "golden.jsonl"), "--arms", str(tmp_path / "arms.toml"), "--out",
                 str(tmp_path / "out"), "--no-progress", "--warmup", "0", "--retries", "0"])
    assert code == 1
    record = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[-1])
    assert record["error"] == "bad key Bearer ***"  # the server's message, scrubbed
    (tmp_path / "arms.toml").write_text((tmp_path / "arms.toml").read_text().replace(
        leaky.url, "http://user:hunter2-password@127.0.0.1:9"), encoding="utf-8")
    assert main(["gate", "run", str(tmp_path / "golden.jsonl"), "--arms", str(tmp_path / "arms.toml"), "--out",
                 str(tmp_path / "out2"), "--no-progress", "--ready-timeout", "0.3"]) == 2
    printed = capsys.readouterr()
    assert "did not answer GET /models" in printed.err and "user:***@127.0.0.1:9" in printed.err
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "arms.toml"]
    assert {p.name for p in written} >= {"results.jsonl", "gate.json", "gate.html"}
    for text in [printed.out, printed.err, *(p.read_text() for p in written)]:
        assert "sk-planted-secret-1234" not in text and "hunter2-password" not in text


def test_without_httpx_the_command_names_the_extra(tmp_path: Path) -> None:
    write_golden([GoldenItem(id="a", question="q?")], tmp_path / "g.jsonl")
    code = ("import importlib.abc, sys\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'httpx':\n"
            "            raise ImportError('blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import importlib.util\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'httpx' else _orig(name, *a)\n")
    script = ("import importlib.util\n_orig = importlib.util.find_spec\n" + code
              + "from ragtrim.cli import main\n"
              + f"sys.exit(main(['gate', 'run', {str(tmp_path / 'g.jsonl')!r}, '--arm', 'a=http://h/v1', '--arm', "
                "'b=http://h/v1', '--model', 'm', '--out', " + repr(str(tmp_path / "o")) + "]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    assert "pip install 'ragtrim[serve]'" in out.stderr and "httpx" in out.stderr


def test_a_golden_set_from_the_gateways_log_judged_by_agreement(
        reader: Callable[..., ServerThread], servers: list[ServerThread], golden: list[GoldenItem],
        tmp_path: Path) -> None:
    """Production traffic through a logging gateway becomes a golden set without gold answers; the baseline's
    answers are the reference, so a change that answers a known share differently loses exactly that share."""
    from ragtrim.gate.builders import golden_from_log
    from tests.serve.conftest import read_log

    upstream = reader()
    log = tmp_path / "requests.jsonl"
    gw = Gateway(parse_config({"upstream": {"url": upstream.url + "/v1", "tokenizer": "whitespace"},
                               "log": {"path": str(log), "log_request": True}}))
    gateway = ServerThread(gw.app()).start()
    servers.append(gateway)
    for item in golden:
        r = httpx.post(gateway.url + "/v1/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": f"Question: {item.question}"}],
            "documents": list(item.documents), "max_tokens": 16})
        assert r.status_code == 200
    read_log(log, len(golden))
    items, info = golden_from_log(log, sample=24, tokenizer="whitespace")
    assert len(items) == 24 and info["left_out"] == {} and all(i.reference == "baseline" for i in items)
    assert all(i.documents and i.options == {"max_tokens": 16} for i in items)
    share = 0.3
    changed = reader(wrong_share=share)
    report = run_gate(items, [_arm("base", upstream), _arm("changed", changed)], tmp_path / "out", run_config=QUIET)
    expected = sum(is_degraded(i.question.removeprefix("Question: "), share) for i in items)
    acc = report["changes"]["changed"]["comparison"]["accuracy"]
    assert acc["n"] == 24 and acc["losses"] == expected and acc["gains"] == 0
    assert report["golden"]["judged_by_agreement"] == 24
