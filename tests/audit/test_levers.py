"""The report's levers: each config line is one the gateway takes and does what the lever says, and the headline
saving and the levers, the lever's concurrency and the GPU section's, agree or say why."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from ragtrim.audit.capacity import PlannerConfig
from ragtrim.audit.cli import summary_lines
from ragtrim.audit.core import AuditConfig, run_audit
from ragtrim.audit.html import render_html
from ragtrim.audit.savings import SavingsConfig
from ragtrim.serve.config import load_config
from ragtrim.serve.render import prepare_chat
from ragtrim.text.tokens import get_counter

REPO = Path(__file__).resolve().parents[2]
PLANNER = PlannerConfig(model_config=REPO / "tests/fixtures/configs/gemma-3-12b-it.json", gpu_mem_gib=141)
PAGE = ("<html><body><nav>Home | News | Sport | Weather | Login | Register</nav><p>The tower has three levels and a "
        "restaurant on the second one.</p><footer>Copyright 2024 Example Media. All rights reserved.</footer>"
        "</body></html>")


def write_log(path: Path) -> Path:
    """Requests whose documents repeat and carry boilerplate, some with earlier turns to fold."""
    lines = []
    for i in range(16):
        history = [{"role": "user" if j % 2 == 0 else "assistant",
                    "content": " ".join(["Thanks, that makes sense, go on please." if j % 2 == 0 else
                                         "Sure, here is a little more on that, as you asked earlier."] * 8)}
                   for j in range(2 * (i % 4))]
        docs = [PAGE, PAGE, f"The tower was finished in {1880 + i}.", "Plain passage about the river Seine."]
        lines.append(json.dumps({"model": "m", "documents": docs[: 2 + i % 3],
                                 "messages": [*history, {"role": "user", "content": f"How many levels? ({i})"}]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    return run_audit(write_log(tmp_path / "log.jsonl"),
                     AuditConfig(savings=SavingsConfig(sample=0, history_turns=2), planner=PLANNER))


def _gateway(tmp_path: Path, snippet: str) -> Any:
    path = tmp_path / "gateway.toml"
    path.write_text(f'{snippet}\n\n[upstream]\nurl = "http://127.0.0.1:9/v1"\n', encoding="utf-8")
    return load_config(path)


def test_the_lossless_lever_is_config_the_gateway_takes(report: dict[str, Any], tmp_path: Path) -> None:
    documents = next(lv for lv in report["levers"] if lv["id"] == "documents")
    assert documents["title"] == "Clean HTML and drop duplicate documents (lossless)"
    assert documents["config"] == 'trim.budget = "lossless"' and "ragtrim serve" in documents["config_where"]
    config = _gateway(tmp_path, documents["config"])
    assert config.trim.budget == "lossless"
    # the same key inside a [trim] table, as config_where says
    assert _gateway(tmp_path, '[trim]\nbudget = "lossless"').trim == config.trim
    body = {"model": "m", "documents": [PAGE, PAGE, "Plain passage about the river Seine."],
            "messages": [{"role": "user", "content": "How many levels?"}]}
    prepared = prepare_chat(body, config, get_counter(config.upstream.tokenizer))
    text = prepared.body["messages"][-1]["content"]
    assert (prepared.documents, prepared.documents_kept) == (3, 2)  # the copy dropped, nothing else
    assert "Home | News" not in text and "three levels" in text and "river Seine" in text
    assert prepared.document_tokens_after < prepared.document_tokens_before


@pytest.mark.parametrize("budget", [None, 0.25])
def test_every_gateway_lever_loads_and_sets_what_it_says(tmp_path: Path, budget: float | None) -> None:
    r = run_audit(write_log(tmp_path / "log.jsonl"),
                  AuditConfig(savings=SavingsConfig(sample=0, budget=budget, history_turns=2), planner=PLANNER))
    expected = {"documents": ("budget", "lossless" if budget is None else budget), "history": ("history_turns", 2)}
    served = [lv for lv in r["levers"] if "ragtrim serve" in lv["config_where"]]
    assert sorted(lv["id"] for lv in served) == ["documents", "history"]
    for lever in served:
        tomllib.loads(lever["config"])
        key, value = expected[lever["id"]]
        assert getattr(_gateway(tmp_path, lever["config"]).trim, key) == value, lever["config"]


def test_the_headline_is_the_sum_of_the_levers(report: dict[str, Any]) -> None:
    """The headline (the sample's saving) and lever 1 differ by the history lever; the summary says so."""
    by_id = {lv["id"]: lv for lv in report["levers"]}
    headline = next(line for line in summary_lines(report) if line.startswith("ragtrim would save"))
    documents, history = (100 * by_id[k]["share_of_prompt"] for k in ("documents", "history"))
    expected = (f"over the whole log: documents {documents:.1f}% (lever {by_id['documents']['rank']}) + history "
                f"{history:.1f}% (lever {by_id['history']['rank']}) = ")
    assert expected in headline, headline
    total = float(re.search(r"= ([\d.]+)% of the whole log", headline).group(1))  # type: ignore[union-attr]
    assert abs(total - (documents + history)) <= 0.1
    assert headline.startswith(f"ragtrim would save {100 * report['savings']['prompt']['saved_share']:.1f}% of "
                               "prompt tokens in the 16 requests trimmed")
    assert 'id="headline-split"' in render_html(report)


def test_a_levers_concurrency_says_it_is_that_lever_alone(report: dict[str, Any]) -> None:
    every = report["plan"]["freed"]
    for lever in report["levers"]:
        kv = lever["kv"] or {}
        if "concurrency_p95_after" not in kv:
            continue
        text = lever["kv_text"]
        if kv["concurrency_p95_after"] == every["concurrency_p95_after"]:
            assert "with every lever" not in text
        else:
            assert (f"{kv['concurrency_p95_before']:,} -> {kv['concurrency_p95_after']:,} with this lever alone "
                    f"({every['concurrency_p95_before']:,} -> {every['concurrency_p95_after']:,} with every lever"
                    ) in text
    page = render_html(report)
    assert (f"concurrent requests at p95 {every['concurrency_p95_before']:,} to {every['concurrency_p95_after']:,}"
            in page and "Trimming (every lever together)" in page)
