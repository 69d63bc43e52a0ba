"""``run_gate``: send the golden set through every arm (resuming from the results file in ``out_dir``), judge, compare
each change with the baseline, and write ``gate.json`` and ``gate.html`` beside ``results.jsonl``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragtrim.errors import InputError
from ragtrim.gate.arms import Arm, check_arms
from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.html import render_html
from ragtrim.gate.judging import JudgeConfig, judge_all
from ragtrim.gate.records import RequestRecord
from ragtrim.gate.runner import RunConfig, run_arms
from ragtrim.gate.verdict import Thresholds, build_report, thresholds_for

RESULTS_FILE = "results.jsonl"
REPORT_JSON = "gate.json"
REPORT_HTML = "gate.html"


def run_gate(items: Sequence[GoldenItem], arms: Sequence[Arm], out_dir: str | Path, *, baseline: str | None = None,
             run_config: RunConfig | None = None, thresholds: Thresholds | None = None,
             judge_config: JudgeConfig | None = None, keep_text: bool = True, golden_path: str | None = None,
             on_record: Callable[[RequestRecord], None] | None = None) -> dict[str, Any]:
    """Run the gate and return its report (``report["verdict"]`` is ``pass`` or ``fail``); results, JSON and HTML
    go to ``out_dir``. ``baseline`` defaults to the first arm. A rerun with the same ``out_dir`` sends only the
    requests the results file lacks, so an interrupted run continues and a finished one re-judges at no cost."""
    if not items:
        raise InputError("the golden set holds no item; a gate needs questions to judge")
    base = baseline or (arms[0].name if arms else "")
    check_arms(arms, base)
    t = thresholds or Thresholds()
    for arm in arms:  # a bad per-arm threshold stops the run before any request
        thresholds_for(arm, t)
    started = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = run_config or RunConfig()
    outcome = run_arms(items, arms, out / RESULTS_FILE, cfg, on_record=on_record)
    judge_cfg = judge_config or JudgeConfig()
    judged = judge_all(items, arms, base, outcome.records, judge_cfg)
    run = {"started": round(started, 3), "seconds": round(outcome.seconds, 3), "results_file": RESULTS_FILE,
           "sent": outcome.sent, "reused": outcome.reused, "stale_records_ignored": outcome.stale,
           "failed_records_sent_again": outcome.retried_errors, "torn_last_line_dropped": outcome.torn_tail,
           "concurrency": cfg.concurrency, "retries": cfg.retries, "warmup": cfg.warmup}
    report = build_report(items, arms, base, judged, t, judge_cfg, keep_text=keep_text,
                          run=run, golden_path=golden_path)
    write_report(report, out)
    return report


def write_report(report: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``gate.json`` (every number) and ``gate.html`` (the page) into ``out_dir``."""
    out = Path(out_dir)
    json_path, html_path = out / REPORT_JSON, out / REPORT_HTML
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path
