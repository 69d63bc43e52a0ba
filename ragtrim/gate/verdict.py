"""The verdict: each change compared with the baseline on the same items (McNemar for right/wrong outcomes, paired
bootstrap intervals for F1 and latency), checked against the thresholds, with the slices where it loses most and
its worst examples. ``build_report`` assembles the whole JSON report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from ragtrim._util.stats import mcnemar_exact_p, mean_difference, paired_bootstrap, percentile_ratio
from ragtrim.errors import ConfigError
from ragtrim.gate.arms import Arm
from ragtrim.gate.golden import GoldenItem, summary
from ragtrim.gate.judging import JudgeConfig, Judged, summarize_arm

Rule = Literal["observed", "significant", "confident"]
RULES: tuple[Rule, ...] = ("observed", "significant", "confident")
REPORT_VERSION = 1
MAX_TEXT = 300


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """What a change must keep or gain against the baseline (None: not checked). Drops are shares (0.01 = one
    point); gains are ratios baseline / change at ``latency_percentile`` (1.5: 1.5 times faster).

    ``rule`` decides how noise is treated: ``observed`` judges the measured value; ``significant`` fails a drop
    only when it is also unlikely to be noise (McNemar p, or the bootstrap interval for F1, below ``alpha``);
    ``confident`` passes only when the whole 95% interval meets the threshold."""

    max_accuracy_drop: float | None = 0.01
    max_refusal_drop: float | None = 0.01
    max_format_drop: float | None = 0.01
    max_f1_drop: float | None = None
    max_error_rate_increase: float | None = 0.0
    min_ttft_gain: float | None = None
    min_latency_gain: float | None = None
    latency_percentile: float = 50.0
    rule: Rule = "observed"
    alpha: float = 0.05
    bootstrap_rounds: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("max_accuracy_drop", "max_refusal_drop", "max_format_drop", "max_f1_drop",
                     "max_error_rate_increase"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1):
                raise ConfigError(f"{name} must be a share in [0, 1] (0.01 = one point), got {v!r}")
        for name in ("min_ttft_gain", "min_latency_gain"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf):
                raise ConfigError(f"{name} must be a ratio > 0 (1.5: the change is 1.5x faster), got {v!r}")
        if not 0 <= self.latency_percentile <= 100:
            raise ConfigError(f"latency_percentile must be in [0, 100], got {self.latency_percentile!r}")
        if self.rule not in RULES:
            raise ConfigError(f"rule must be one of {RULES}, got {self.rule!r}")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if isinstance(self.bootstrap_rounds, bool) or not isinstance(self.bootstrap_rounds, int) \
                or self.bootstrap_rounds < 0:
            raise ConfigError(f"bootstrap_rounds must be an integer >= 0, got {self.bootstrap_rounds!r}")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], where: str = "thresholds") -> Thresholds:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (known: "
                              f"{', '.join(sorted(names))})")
        return cls(**dict(raw))


def thresholds_for(arm: Arm, base: Thresholds) -> Thresholds:
    """The run's thresholds with the arm's own on top (``Arm.thresholds``)."""
    if not arm.thresholds:
        return base
    return Thresholds.from_mapping({**asdict(base), **arm.thresholds}, f"arm {arm.name!r} thresholds")


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits) + 0.0  # + 0.0: no "-0.0"


def _paired_outcomes(base: Sequence[Judged], cand: Sequence[Judged], group: str,
                     value: str = "correct") -> tuple[list[float], list[float]]:
    a, b = [], []
    for x, y in zip(base, cand, strict=True):
        if group == "format":
            if x.item.schema is None:
                continue
            xv, yv = x.judgement.format_ok, y.judgement.format_ok
        else:
            if x.group != group:
                continue
            xv, yv = getattr(x.judgement, value), getattr(y.judgement, value)
        if xv is None or yv is None:
            continue
        a.append(float(xv))
        b.append(float(yv))
    return a, b


def _binary(a: Sequence[float], b: Sequence[float], t: Thresholds) -> dict[str, Any] | None:
    if not a:
        return None
    losses = sum(1 for x, y in zip(a, b, strict=True) if x > y)
    gains = sum(1 for x, y in zip(a, b, strict=True) if y > x)
    _, low, high = paired_bootstrap(a, b, mean_difference, rounds=t.bootstrap_rounds, seed=t.seed)
    base, cand = sum(a) / len(a), sum(b) / len(b)
    return {"n": len(a), "baseline": _r(base), "change": _r(cand), "drop": _r(base - cand),
            "drop_ci95": [_r(-high), _r(-low)], "losses": losses, "gains": gains,
            "mcnemar_p": _r(mcnemar_exact_p(losses, gains), 6)}


def _continuous(a: Sequence[float], b: Sequence[float], t: Thresholds) -> dict[str, Any] | None:
    if not a:
        return None
    _, low, high = paired_bootstrap(a, b, mean_difference, rounds=t.bootstrap_rounds, seed=t.seed)
    base, cand = sum(a) / len(a), sum(b) / len(b)
    return {"n": len(a), "baseline": _r(base), "change": _r(cand), "drop": _r(base - cand),
            "drop_ci95": [_r(-high), _r(-low)]}


def _speed(base: Sequence[Judged], cand: Sequence[Judged], attr: str, t: Thresholds) -> dict[str, Any] | None:
    a, b = [], []
    for x, y in zip(base, cand, strict=True):
        xv = getattr(x.record, attr, None) if x.record is not None and x.record.ok else None
        yv = getattr(y.record, attr, None) if y.record is not None and y.record.ok else None
        if xv is not None and yv is not None:
            a.append(float(xv))
            b.append(float(yv))
    if not a:
        return None
    q = t.latency_percentile
    gain, low, high = paired_bootstrap(a, b, percentile_ratio(q), rounds=t.bootstrap_rounds, seed=t.seed)
    out: dict[str, Any] = {"n": len(a), "percentile": q, "gain": _r(gain, 3), "gain_ci95": [_r(low, 3), _r(high, 3)]}
    for p in (50, 95, 99):
        out[f"p{p}_gain"] = _r(percentile_ratio(p)(a, b), 3)
    return out


def compare(base: Sequence[Judged], cand: Sequence[Judged], t: Thresholds) -> dict[str, Any]:
    """The paired comparison of one change with the baseline, item by item."""
    base_err = sum(1 for j in base if j.record is None or not j.record.ok) / max(1, len(base))
    cand_err = sum(1 for j in cand if j.record is None or not j.record.ok) / max(1, len(cand))
    return {
        "accuracy": _binary(*_paired_outcomes(base, cand, "answer"), t),
        "refusal": _binary(*_paired_outcomes(base, cand, "refusal"), t),
        "format": _binary(*_paired_outcomes(base, cand, "format"), t),
        "f1": _continuous(*_paired_outcomes(base, cand, "answer", "f1"), t),
        "ttft": _speed(base, cand, "ttft_ms", t),
        "latency": _speed(base, cand, "latency_ms", t),
        "errors": {"baseline_rate": _r(base_err), "change_rate": _r(cand_err), "increase": _r(cand_err - base_err)},
    }


def _drop_check(name: str, c: Mapping[str, Any] | None, threshold: float | None, t: Thresholds,
                binary: bool) -> dict[str, Any] | None:
    if threshold is None or c is None:
        return None
    drop: float = c["drop"] or 0.0
    low, high = c["drop_ci95"]
    p = c.get("mcnemar_p")
    noise = (p is not None and p >= t.alpha) if binary else (low is None or low <= 0)
    if t.rule == "observed":
        passed = drop <= threshold + 1e-12
    elif t.rule == "significant":
        passed = drop <= threshold + 1e-12 or noise
    else:
        passed = high is not None and high <= threshold + 1e-12
    note = ""
    if drop > threshold and noise:
        note = (f"the drop may be noise (McNemar p {p:.3g})" if binary else "the interval includes no drop") \
            + ": more items would tell"
    return {"check": name, "value": drop, "threshold": threshold, "direction": "at most", "ci95": [low, high],
            "p_value": p, "passed": passed, "note": note}


def _gain_check(name: str, c: Mapping[str, Any] | None, threshold: float | None, t: Thresholds) -> dict[str, Any] | None:
    if threshold is None:
        return None
    if c is None:
        return {"check": name, "value": None, "threshold": threshold, "direction": "at least", "ci95": None,
                "p_value": None, "passed": False, "note": "no request of both arms succeeded"}
    gain, (low, high) = c["gain"], c["gain_ci95"]
    passed = (gain is not None and gain >= threshold) if t.rule != "confident" else \
        (low is not None and low >= threshold)
    return {"check": name, "value": gain, "threshold": threshold, "direction": "at least", "ci95": [low, high],
            "p_value": None, "passed": passed, "note": ""}


def checks(c: Mapping[str, Any], t: Thresholds) -> list[dict[str, Any]]:
    """Each threshold applied to one comparison; checks without data (no unanswerable item for refusal) are left
    out, and listed as skipped in the report."""
    out = [
        _drop_check("accuracy", c["accuracy"], t.max_accuracy_drop, t, True),
        _drop_check("refusal", c["refusal"], t.max_refusal_drop, t, True),
        _drop_check("format", c["format"], t.max_format_drop, t, True),
        _drop_check("f1", c["f1"], t.max_f1_drop, t, False),
        _gain_check(f"ttft_p{t.latency_percentile:g}_gain", c["ttft"], t.min_ttft_gain, t),
        _gain_check(f"latency_p{t.latency_percentile:g}_gain", c["latency"], t.min_latency_gain, t),
    ]
    if t.max_error_rate_increase is not None:
        inc = c["errors"]["increase"]
        out.append({"check": "errors", "value": inc, "threshold": t.max_error_rate_increase, "direction": "at most",
                    "ci95": None, "p_value": None, "passed": inc <= t.max_error_rate_increase + 1e-12,
                    "note": ""})
    return [x for x in out if x is not None]


def slices(base: Sequence[Judged], cand: Sequence[Judged], *, top: int = 5) -> list[dict[str, Any]]:
    """Per tag (and answerable / unanswerable / json), the share right in both arms; the slices where the change
    loses most first, only those where it loses."""
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for x, y in zip(base, cand, strict=True):
        if x.judgement.correct is None or y.judgement.correct is None:
            continue
        names = [*x.item.tags, "answerable" if x.item.answerable else "unanswerable"]
        if x.item.schema is not None:
            names.append("json")
        for name in names:
            groups.setdefault(name, []).append((bool(x.judgement.correct), bool(y.judgement.correct)))
    rows: list[dict[str, Any]] = []
    for name, pairs in groups.items():
        n = len(pairs)
        b, c = sum(p[0] for p in pairs) / n, sum(p[1] for p in pairs) / n
        losses = sum(1 for p in pairs if p[0] and not p[1])
        gains = sum(1 for p in pairs if p[1] and not p[0])
        rows.append({"slice": name, "n": n, "baseline": _r(b), "change": _r(c), "drop": _r(b - c), "losses": losses,
                     "gains": gains, "mcnemar_p": _r(mcnemar_exact_p(losses, gains), 6)})
    rows.sort(key=lambda r: (-float(r["drop"] or 0), -int(r["losses"]), str(r["slice"])))
    return [r for r in rows if r["drop"] > 0][:top]


def _clip(text: str | None) -> str | None:
    return None if text is None else (text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…")


def worst(base: Sequence[Judged], cand: Sequence[Judged], *, top: int = 10, keep_text: bool = True
          ) -> list[dict[str, Any]]:
    """The items the change gets wrong and the baseline right (largest F1 loss first), then its failed requests."""
    rows = []
    for x, y in zip(base, cand, strict=True):
        lost = x.judgement.correct and y.judgement.correct is False
        failed = y.record is None or not y.record.ok
        if not (lost or (failed and x.record is not None and x.record.ok)):
            continue
        row: dict[str, Any] = {
            "id": x.item.id, "tags": list(x.item.tags), "kind": "error" if failed else
            ("refused" if y.judgement.refused and x.item.answerable else
             "answered" if not x.item.answerable else "wrong"),
            "f1_baseline": _r(x.judgement.f1), "f1_change": _r(y.judgement.f1),
            "error": (y.record.error_kind if y.record is not None else "missing") if failed else None,
            "ttft_ms_baseline": x.record.ttft_ms if x.record else None,
            "ttft_ms_change": y.record.ttft_ms if y.record else None,
        }
        if keep_text:
            row.update({"question": _clip(x.item.question), "reference": list(x.reference or ())[:3],
                        "baseline_reply": _clip(x.record.reply if x.record else None),
                        "change_reply": _clip(y.record.reply if y.record and y.record.ok
                                              else (y.record.error if y.record else None))})
        rows.append(row)
    rows.sort(key=lambda r: (r["kind"] == "error", -((r["f1_baseline"] or 0) - (r["f1_change"] or 0)), r["id"]))
    return rows[:top]


def build_report(items: Sequence[GoldenItem], arms: Sequence[Arm], baseline: str,
                 judged: Mapping[str, Sequence[Judged]], thresholds: Thresholds, judge_config: JudgeConfig, *,
                 keep_text: bool = True, run: Mapping[str, Any] | None = None,
                 golden_path: str | None = None) -> dict[str, Any]:
    """The JSON report: the golden set, each arm's figures, each change against the baseline with its checks,
    slices and worst examples, and the verdict (``pass`` when every check of every change passes)."""
    base_rows = judged[baseline]
    arm_reports = {a.name: summarize_arm(a, judged[a.name], is_baseline=a.name == baseline) for a in arms}
    changes: dict[str, Any] = {}
    failed: list[str] = []
    for arm in arms:
        if arm.name == baseline:
            continue
        t = thresholds_for(arm, thresholds)
        comparison = compare(base_rows, judged[arm.name], t)
        arm_checks = checks(comparison, t)
        ok = all(c["passed"] for c in arm_checks)
        failed += [f"{arm.name}: {c['check']}" for c in arm_checks if not c["passed"]]
        wanted = {"accuracy": t.max_accuracy_drop, "refusal": t.max_refusal_drop, "format": t.max_format_drop,
                  "f1": t.max_f1_drop}
        skipped = [name for name, thr in wanted.items() if thr is not None and comparison[name] is None]
        changes[arm.name] = {"verdict": "pass" if ok else "fail", "thresholds": asdict(t), "checks": arm_checks,
                             "skipped_checks": skipped,
                             "comparison": comparison, "slices": slices(base_rows, judged[arm.name]),
                             "worst": worst(base_rows, judged[arm.name], keep_text=keep_text)}
    return {
        "version": REPORT_VERSION,
        "verdict": "pass" if not failed else "fail",
        "failed_checks": failed,
        "baseline": baseline,
        "golden": {"path": golden_path, **summary(items)},
        "judge": {"metric": judge_config.metric, "f1_threshold": judge_config.f1_threshold,
                  "refusal_markers": list(judge_config.refusal_markers)},
        "thresholds": asdict(thresholds),
        "arms": arm_reports,
        "changes": changes,
        "run": dict(run or {}),
        "text_included": keep_text,
    }
