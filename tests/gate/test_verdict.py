"""ragtrim.gate.judging, ragtrim.gate.verdict and ragtrim.gate.html on records made by hand, so every number of the
report can be worked out: 20 answerable items (4 with a JSON schema), 10 unanswerable, 5 judged by agreement."""

from __future__ import annotations

from typing import Any

import pytest

from ragtrim.errors import ConfigError
from ragtrim.gate.arms import Arm
from ragtrim.gate.builders import JSON_ANSWER_SCHEMA
from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.html import PLOTS, render_html
from ragtrim.gate.judging import JudgeConfig, judge_all
from ragtrim.gate.records import RequestRecord
from ragtrim.gate.verdict import Thresholds, build_report

URL = "http://127.0.0.1:9/v1"
ARMS = [Arm(name="base", url=URL, model="m"), Arm(name="change", url=URL, model="m")]
ITEMS = (
    [GoldenItem(id=f"A{i}", question=f"question {i}?", answers=(f"ans {i}",), tags=("t1" if i < 10 else "t2",),
                schema=JSON_ANSWER_SCHEMA if i < 4 else None) for i in range(20)]
    + [GoldenItem(id=f"U{i}", question=f"impossible {i}?", answerable=False, tags=("t1",)) for i in range(10)]
    + [GoldenItem(id=f"G{i}", question=f"logged {i}?") for i in range(5)]
)


def _good(item: GoldenItem) -> str:
    if not item.answerable:
        return "unanswerable"
    if item.reference == "baseline":
        return f"agree {item.id[1:]}"
    return f'{{"answer": "ans {item.id[1:]}"}}' if item.schema is not None else f"ans {item.id[1:]}"


CHANGED = {"A0": '{"answer": "nope"}', "A1": '{"answer": "nope"}', "A2": "ans 2", "A10": "wrong", "U0": "Paris",
           "G0": "different"}


def _records() -> dict[tuple[str, str], RequestRecord]:
    out = {}
    for item in ITEMS:
        out[("base", item.id)] = RequestRecord(arm="base", item=item.id, arm_key="", item_key="", ok=True,
                                               reply=_good(item), ttft_ms=100.0, latency_ms=150.0,
                                               prompt_tokens=400, completion_tokens=6)
        if item.id == "A11":
            out[("change", item.id)] = RequestRecord(arm="change", item=item.id, arm_key="", item_key="", ok=False,
                                                     error_kind="http_500", error="boom", attempts=3)
        else:
            out[("change", item.id)] = RequestRecord(arm="change", item=item.id, arm_key="", item_key="", ok=True,
                                                     reply=CHANGED.get(item.id, _good(item)), ttft_ms=50.0,
                                                     latency_ms=100.0, prompt_tokens=100, completion_tokens=6)
    return out


def _report(**thresholds: Any) -> dict[str, Any]:
    judged = judge_all(ITEMS, ARMS, "base", _records(), JudgeConfig())
    return build_report(ITEMS, ARMS, "base", judged, Thresholds(**thresholds), JudgeConfig())


def test_arm_figures() -> None:
    r = _report()
    base, change = r["arms"]["base"], r["arms"]["change"]
    assert base["accuracy"] == {"right": 25, "n": 25, "rate": 1.0, "ci95": [pytest.approx(0.8668, abs=1e-4), 1.0]}
    assert change["accuracy"]["right"] == 20 and change["accuracy_gold"] == {
        "right": 16, "n": 20, "rate": 0.8, "ci95": change["accuracy_gold"]["ci95"]}
    assert change["refusal"]["right"] == 9 and change["format"]["right"] == 3 and change["format"]["n"] == 4
    assert change["requests"] == {"items": 35, "answered": 34, "errors": 1, "missing": 0,
                                  "error_rate": round(1 / 35, 4), "errors_by_kind": {"http_500": 1}, "retried": 1}
    assert change["ttft"]["p50_ms"] == 50.0 and change["ttft_quantiles_ms"] == [50.0] * 21
    assert base["cost_per_request"] == 406.0 and change["tokens"]["prompt_mean"] == 100.0
    assert change["output_tokens_per_s"]["p50_tps"] == 100.0  # 5 tokens after the first in 50 ms


def test_paired_comparison() -> None:
    c = _report()["changes"]["change"]["comparison"]
    assert c["accuracy"]["n"] == 25 and c["accuracy"]["drop"] == 0.2
    assert (c["accuracy"]["losses"], c["accuracy"]["gains"]) == (5, 0)
    assert c["accuracy"]["mcnemar_p"] == 0.0625  # 5 discordant pairs, all one way: 2 / 2^5
    assert c["accuracy"]["drop_ci95"][0] > 0.03 and c["accuracy"]["drop_ci95"][1] <= 0.4
    assert (c["refusal"]["drop"], c["refusal"]["mcnemar_p"]) == (0.1, 1.0)
    assert (c["format"]["n"], c["format"]["drop"]) == (4, 0.25)
    assert c["f1"]["drop"] == 0.2
    assert c["ttft"]["gain"] == 2.0 and c["ttft"]["gain_ci95"] == [2.0, 2.0] and c["ttft"]["n"] == 34
    assert c["errors"]["increase"] == round(1 / 35, 4)


def test_checks_observed_rule() -> None:
    r = _report(min_ttft_gain=1.5)
    checks = {c["check"]: c for c in r["changes"]["change"]["checks"]}
    assert r["verdict"] == "fail"
    assert [n for n, c in checks.items() if not c["passed"]] == ["accuracy", "refusal", "format", "errors"]
    assert checks["ttft_p50_gain"]["passed"] and checks["ttft_p50_gain"]["value"] == 2.0
    assert "may be noise" in checks["accuracy"]["note"]  # p 0.0625: a bigger set would tell
    assert r["failed_checks"] == ["change: accuracy", "change: refusal", "change: format", "change: errors"]


def test_checks_other_rules() -> None:
    significant = _report(rule="significant", max_error_rate_increase=None)
    assert significant["verdict"] == "pass"  # no drop is unlikely to be noise at alpha 0.05
    loose = _report(rule="significant", alpha=0.1, max_error_rate_increase=None)
    failed = [c["check"] for c in loose["changes"]["change"]["checks"] if not c["passed"]]
    assert failed == ["accuracy"]  # p 0.0625 < 0.1
    confident = _report(max_accuracy_drop=0.5, max_refusal_drop=0.5, max_format_drop=None,
                        max_error_rate_increase=None, rule="confident", min_ttft_gain=2.5)
    failed = [c["check"] for c in confident["changes"]["change"]["checks"] if not c["passed"]]
    assert failed == ["ttft_p50_gain"]


def test_thresholds_can_be_turned_off() -> None:
    r = _report(max_accuracy_drop=None, max_refusal_drop=None, max_format_drop=None, max_error_rate_increase=None)
    assert r["verdict"] == "pass" and r["changes"]["change"]["checks"] == []


def test_slices_where_it_loses_most() -> None:
    s = _report()["changes"]["change"]["slices"]
    assert [(x["slice"], x["n"], x["drop"], x["losses"]) for x in s] == [
        ("json", 4, 0.5, 2), ("answerable", 25, 0.2, 5), ("t2", 10, 0.2, 2), ("t1", 20, 0.15, 3),
        ("unanswerable", 10, 0.1, 1)]


def test_worst_examples() -> None:
    w = _report()["changes"]["change"]["worst"]
    assert [(x["id"], x["kind"]) for x in w] == [("A0", "wrong"), ("A1", "wrong"), ("A10", "wrong"),
                                                 ("G0", "wrong"), ("U0", "answered"), ("A11", "error")]
    assert w[3]["reference"] == ["agree 0"] and w[3]["change_reply"] == "different"
    assert w[5]["error"] == "http_500" and w[5]["change_reply"] == "boom"
    judged = judge_all(ITEMS, ARMS, "base", _records(), JudgeConfig())
    quiet = build_report(ITEMS, ARMS, "base", judged, Thresholds(), JudgeConfig(), keep_text=False)
    assert "question" not in quiet["changes"]["change"]["worst"][0]


def test_agreement_without_a_baseline_answer() -> None:
    records = _records()
    records[("base", "G1")] = RequestRecord(arm="base", item="G1", arm_key="", item_key="", ok=False,
                                            error_kind="timeout")
    judged = judge_all(ITEMS, ARMS, "base", records, JudgeConfig())
    assert judged["change"][31].group == "no_reference"
    r = build_report(ITEMS, ARMS, "base", judged, Thresholds(), JudgeConfig())
    assert r["arms"]["change"]["no_reference"] == 1 and r["arms"]["change"]["accuracy"]["n"] == 24


def test_a_missing_record_counts_as_a_failure() -> None:
    records = _records()
    del records[("change", "A5")]
    judged = judge_all(ITEMS, ARMS, "base", records, JudgeConfig())
    r = build_report(ITEMS, ARMS, "base", judged, Thresholds(), JudgeConfig())
    assert r["arms"]["change"]["requests"]["missing"] == 1 and r["arms"]["change"]["accuracy"]["right"] == 19


def test_invalid_thresholds() -> None:
    with pytest.raises(ConfigError, match="max_accuracy_drop must be a share"):
        Thresholds(max_accuracy_drop=5)
    with pytest.raises(ConfigError, match="min_ttft_gain must be a ratio"):
        Thresholds(min_ttft_gain=0)
    with pytest.raises(ConfigError, match="rule must be one of"):
        Thresholds(rule="lenient")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown key"):
        Thresholds.from_mapping({"max_acc_drop": 0.1})
    with pytest.raises(ConfigError, match="metric must be one of"):
        JudgeConfig(metric="bleu")  # type: ignore[arg-type]


def test_html_page() -> None:
    page = render_html(_report(min_ttft_gain=1.5))
    for plot in PLOTS:
        assert f'data-plot="{plot}"' in page
    assert 'id="verdict">verdict: FAIL' in page and "Worst examples" in page and "Where it loses most" in page
    assert "<script" in page and "src=" not in page  # nothing loaded from elsewhere
    assert "&lt;" not in render_html(_report()).split("<body>")[0]


def test_an_arms_own_thresholds() -> None:
    arms = [ARMS[0], Arm(name="change", url=URL, model="m",
                         thresholds={"max_accuracy_drop": 0.25, "max_refusal_drop": None, "max_format_drop": None,
                                     "max_error_rate_increase": 0.05, "min_ttft_gain": 1.5})]
    judged = judge_all(ITEMS, arms, "base", _records(), JudgeConfig())
    r = build_report(ITEMS, arms, "base", judged, Thresholds(), JudgeConfig())
    assert r["verdict"] == "pass", r["failed_checks"]
    assert [c["check"] for c in r["changes"]["change"]["checks"]] == ["accuracy", "ttft_p50_gain", "errors"]
    assert r["changes"]["change"]["thresholds"]["max_accuracy_drop"] == 0.25
    bad = [ARMS[0], Arm(name="change", url=URL, model="m", thresholds={"min_ttft": 2})]
    with pytest.raises(ConfigError, match="arm 'change' thresholds: unknown key"):
        build_report(ITEMS, bad, "base", judge_all(ITEMS, bad, "base", _records(), JudgeConfig()), Thresholds(),
                     JudgeConfig())
