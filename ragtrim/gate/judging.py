"""Every record judged, and each arm summed up: accuracy (exact, F1, contains), refusal, format compliance, errors by
kind, TTFT and latency percentiles, output speed, tokens and cost. Items without gold answers are judged against the
baseline arm's answer (agreement); when the baseline failed on one, it has no reference and is counted as such.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragtrim._util.stats import percentile, wilson_interval
from ragtrim.errors import ConfigError
from ragtrim.gate.arms import Arm
from ragtrim.gate.golden import GoldenItem
from ragtrim.gate.records import RequestRecord
from ragtrim.gate.scoring import METRICS, REFUSAL_MARKERS, Judgement, Metric, judge


@dataclass(frozen=True, kw_only=True)
class JudgeConfig:
    """How replies are judged: ``metric`` decides whether an answer is right (``contains``: a gold answer in it as
    whole words; ``exact``; ``f1``: token F1 >= ``f1_threshold``); ``refusal_markers`` make a reply a refusal."""

    metric: Metric = "contains"
    f1_threshold: float = 0.5
    refusal_markers: tuple[str, ...] = REFUSAL_MARKERS

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ConfigError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if not 0 < self.f1_threshold <= 1:
            raise ConfigError(f"f1_threshold must be in (0, 1], got {self.f1_threshold!r}")
        if not self.refusal_markers or not all(isinstance(m, str) and m.strip() for m in self.refusal_markers):
            raise ConfigError("refusal_markers must be non-empty phrases")


@dataclass(frozen=True, kw_only=True)
class Judged:
    """One arm's reply to one item, judged. ``group``: ``answer`` (answerable, with a reference), ``refusal``
    (unanswerable), ``no_reference`` (judged by agreement, but the baseline failed)."""

    item: GoldenItem
    record: RequestRecord | None
    judgement: Judgement
    group: str
    reference: tuple[str, ...] | None = field(default=None)


def judge_all(items: Sequence[GoldenItem], arms: Sequence[Arm], baseline: str,
              records: Mapping[tuple[str, str], RequestRecord], config: JudgeConfig) -> dict[str, list[Judged]]:
    """``arm name -> [Judged per item, in item order]``. A missing record (an interrupted run) judges as a failure."""
    base_refs: dict[str, tuple[tuple[str, ...] | None, bool]] = {}
    for item in items:
        if item.reference != "baseline":
            continue
        rec = records.get((baseline, item.id))
        if rec is None or not rec.ok or rec.reply is None:
            base_refs[item.id] = (None, False)
            continue
        j = judge(item, rec.reply, None, metric=config.metric, refusal_markers=config.refusal_markers)
        base_refs[item.id] = ((j.answer,) if j.answer is not None and not j.refused else None, j.refused)
    out: dict[str, list[Judged]] = {}
    for arm in arms:
        rows = []
        for item in items:
            rec = records.get((arm.name, item.id))
            reply = rec.reply if rec is not None and rec.ok else None
            if reply is None and rec is not None and rec.ok:
                reply = ""
            expect_refusal: bool | None = None
            if item.reference == "gold":
                refs: tuple[str, ...] | None = item.answers
                group = "answer" if item.answerable else "refusal"
            else:
                refs, base_refused = base_refs[item.id]
                group = "answer" if refs is not None or base_refused else "no_reference"
                expect_refusal = base_refused
            j = judge(item, reply, refs, metric=config.metric, f1_threshold=config.f1_threshold,
                      refusal_markers=config.refusal_markers, expect_refusal=expect_refusal)
            rows.append(Judged(item=item, record=rec, judgement=j, group=group, reference=refs))
        out[arm.name] = rows
    return out


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits) + 0.0  # + 0.0: no "-0.0"


def _rate(hits: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(hits, n)
    return {"right": hits, "n": n, "rate": _round(hits / n) if n else None,
            "ci95": [_round(low), _round(high)] if n else None}


def distribution(values: Sequence[float], unit: str = "ms") -> dict[str, Any]:
    """n, mean, p50, p95, p99 and max of ``values`` (None for each when there are none)."""
    if not values:
        return {"n": 0, f"mean_{unit}": None, f"p50_{unit}": None, f"p95_{unit}": None, f"p99_{unit}": None,
                f"max_{unit}": None}
    return {"n": len(values), f"mean_{unit}": _round(sum(values) / len(values), 3),
            f"p50_{unit}": _round(percentile(values, 50), 3), f"p95_{unit}": _round(percentile(values, 95), 3),
            f"p99_{unit}": _round(percentile(values, 99), 3), f"max_{unit}": _round(max(values), 3)}


QUANTILES = tuple(range(0, 101, 5))


def quantiles(values: Sequence[float]) -> list[float] | None:
    """The 0th, 5th, ..., 100th percentiles (the report's distribution plots draw them), or None without values."""
    return [round(percentile(values, q), 3) for q in QUANTILES] if values else None


def summarize_arm(arm: Arm, rows: Sequence[Judged], *, is_baseline: bool) -> dict[str, Any]:
    """Everything the report says about one arm."""
    recs = [r.record for r in rows]
    done = [r for r in recs if r is not None]
    ok = [r for r in done if r.ok]
    errors = Counter(r.error_kind or "unknown" for r in done if not r.ok)
    answer = [r for r in rows if r.group == "answer"]
    gold_answer = [r for r in answer if r.item.reference == "gold"]
    refusal = [r for r in rows if r.group == "refusal"]
    schema = [r for r in rows if r.item.schema is not None]
    n_ans = len(answer)
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    completion = [r.completion_tokens for r in ok if r.completion_tokens is not None]
    speeds = [s for s in (r.output_tokens_per_s for r in ok) if s is not None]
    tokens_per_request = (sum(prompt) / len(prompt) + sum(completion) / max(1, len(completion))) \
        if prompt and len(prompt) == len(ok) else None
    ttfts = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    latencies = [r.latency_ms for r in ok if r.latency_ms is not None]
    before = [r.documents_before for r in ok if r.documents_before is not None]
    after = [r.documents_after for r in ok if r.documents_after is not None]
    gw_before = [r.gateway_prompt_before for r in ok if r.gateway_prompt_before is not None]
    gw_after = [r.gateway_prompt_after for r in ok if r.gateway_prompt_after is not None]
    return {
        "baseline": is_baseline,
        "config": arm.describe(),
        "requests": {"items": len(rows), "answered": len(ok), "errors": len(done) - len(ok),
                     "missing": len(rows) - len(done), "error_rate": _round((len(rows) - len(ok)) / len(rows))
                     if rows else None, "errors_by_kind": dict(sorted(errors.items())),
                     "retried": sum(1 for r in done if r.attempts > 1)},
        "accuracy": _rate(sum(1 for r in answer if r.judgement.correct), n_ans),
        "accuracy_gold": _rate(sum(1 for r in gold_answer if r.judgement.correct), len(gold_answer)),
        "exact_match": _round(sum(r.judgement.exact for r in answer) / n_ans) if n_ans else None,
        "f1": _round(sum(r.judgement.f1 for r in answer) / n_ans) if n_ans else None,
        "contains": _round(sum(r.judgement.contains for r in answer) / n_ans) if n_ans else None,
        "false_refusals": _rate(sum(1 for r in gold_answer if r.judgement.refused), len(gold_answer)),
        "refusal": _rate(sum(1 for r in refusal if r.judgement.correct), len(refusal)),
        "format": _rate(sum(1 for r in schema if r.judgement.format_ok), len(schema)),
        "no_reference": sum(1 for r in rows if r.group == "no_reference"),
        "ttft": distribution(ttfts),
        "latency": distribution(latencies),
        "ttft_quantiles_ms": quantiles(ttfts),
        "latency_quantiles_ms": quantiles(latencies),
        "trim": distribution([r.trim_ms for r in ok if r.trim_ms is not None]),
        "output_tokens_per_s": distribution(speeds, "tps"),
        "tokens": {
            "prompt_mean": _round(sum(prompt) / len(prompt), 1) if prompt else None,
            "prompt_total": sum(prompt) if prompt else None,
            "completion_mean": _round(sum(completion) / len(completion), 1) if completion else None,
            "completion_total": sum(completion) if completion else None,
            "usage_reported": sum(1 for r in ok if r.usage_source == "usage"),
            "documents_before_mean": _round(sum(before) / len(before), 1) if before else None,
            "documents_after_mean": _round(sum(after) / len(after), 1) if after else None,
            "gateway_prompt_before_mean": _round(sum(gw_before) / len(gw_before), 1) if gw_before else None,
            "gateway_prompt_after_mean": _round(sum(gw_after) / len(gw_after), 1) if gw_after else None,
        },
        "cost_per_request": _round(tokens_per_request * arm.cost_weight, 1) if tokens_per_request is not None
        else None,
    }
