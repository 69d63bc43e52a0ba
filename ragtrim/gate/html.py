"""The gate report as one static HTML page: the verdict, each change's checks, inline SVG plots drawn here (accuracy
against cost and against TTFT, TTFT and latency distributions), the slices where a change loses most and its worst
examples. No JavaScript, nothing loaded from a network; every number comes from the report dict.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrim.audit.html import nice_axis, text_width
from ragtrim.gate.judging import QUANTILES

PLOTS = ("accuracy_vs_cost", "accuracy_vs_ttft", "ttft_distribution", "latency_distribution")
"""The plots of the page, each an ``<svg data-plot="...">``."""
PALETTE = ("#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7")
_W, _H = 720, 330
_L, _R, _T, _B = 70, 20, 40, 60
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right;
vertical-align:top}td{white-space:nowrap}td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:12px}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}svg{display:block;margin:12px 0}
.verdict{font-size:20px;padding:8px 14px;border-radius:6px;display:inline-block}
.verdict.pass{background:#dafbe1}.verdict.fail{background:#ffebe9}td.text{text-align:left;max-width:260px;
white-space:normal;font-size:12px}code{background:#f4f4f4;padding:0 3px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _text(x: float, y: float, s: str, *, anchor: str = "start", size: int = 12, color: str = "#222",
          weight: str = "normal") -> str:
    w = f' font-weight="{weight}"' if weight != "normal" else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}"{w}>{_e(s)}</text>'


def _line(x1: float, y1: float, x2: float, y2: float, color: str = "#999", dash: str = "") -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}"{d}/>'


def _svg(plot_id: str, title: str, body: Sequence[str], height: float = _H) -> str:
    return (f'<svg data-plot="{plot_id}" id="plot-{plot_id}" xmlns="http://www.w3.org/2000/svg" width="{_W}" '
            f'height="{height:.0f}" viewBox="0 0 {_W} {height:.0f}" role="img" aria-label="{_e(title)}">'
            f"<title>{_e(title)}</title>" + _text(10, 20, title, size=14, weight="bold") + "".join(body) + "</svg>")


def _axes(x_top: float, y_top: float, x_label: str, y_label: str, x_fmt: Callable[[float], str],
          y_fmt: Callable[[float], str], x_ticks: int, y_ticks: int, x_low: float = 0.0, y_low: float = 0.0
          ) -> tuple[list[str], Callable[[float], float], Callable[[float], float]]:
    pw, ph = _W - _L - _R, _H - _T - _B

    def sx(v: float) -> float:
        return _L + pw * (v - x_low) / ((x_top - x_low) or 1)

    def sy(v: float) -> float:
        return _T + ph - ph * (v - y_low) / ((y_top - y_low) or 1)

    body = [_line(_L, _T + ph, _L + pw, _T + ph), _line(_L, _T, _L, _T + ph)]
    for i in range(x_ticks + 1):
        v = x_low + (x_top - x_low) * i / x_ticks
        body += [_line(sx(v), _T + ph, sx(v), _T + ph + 4), _text(sx(v), _T + ph + 16, x_fmt(v), anchor="middle",
                                                                  size=11)]
    for i in range(y_ticks + 1):
        v = y_low + (y_top - y_low) * i / y_ticks
        body += [_line(_L - 4, sy(v), _L, sy(v)), _line(_L, sy(v), _L + pw, sy(v), "#eee"),
                 _text(_L - 6, sy(v) + 4, y_fmt(v), anchor="end", size=11)]
    body += [_text(_L + pw / 2, _H - 22, x_label, anchor="middle"), _text(10, _T - 6, f"\u2191 {y_label}", size=11)]
    return body, sx, sy


def scatter(plot_id: str, title: str, points: Sequence[tuple[str, float, float, str]], *, x_label: str,
            y_label: str, x_fmt: Callable[[float], str]) -> str:
    """One labelled point per arm: (name, x, y, color), y a share in [0, 1] (its axis spans the points' range)."""
    if not points:
        return _svg(plot_id, title, [_text(_L, _T + 30, "no arm has the numbers this plot needs")], 80)
    x_top, xt = nice_axis(max(p[1] for p in points) * 1.1)
    ys = [p[2] for p in points]
    y_low = max(0.0, math.floor((min(ys) - 0.05) * 10) / 10)
    y_top = min(1.0, math.ceil((max(ys) + 0.05) * 10) / 10)
    body, sx, sy = _axes(x_top, y_top, x_label, y_label, x_fmt, lambda v: f"{100 * v:.0f}%", xt, 5, 0.0, y_low)
    placed: list[tuple[float, float, float]] = []  # (left, right, baseline) of the labels drawn so far
    for name, x, y, color in points:
        label = f"{name} ({_pct(y)})"
        anchor = "end" if sx(x) + 8 + text_width(label, 11) > _W - _R else "start"
        dx = -8 if anchor == "end" else 8
        left = sx(x) + dx - (text_width(label, 11) if anchor == "end" else 0)
        right = left + text_width(label, 11)
        ty = sy(y) - 8
        while any(lo < right and left < hi and abs(ty - b) < 13 for lo, hi, b in placed):
            ty += 14  # below the label it would cover
        placed.append((left, right, ty))
        body += [(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="6" fill="{color}"><title>{_e(label)}</title>'
                 "</circle>"), _text(sx(x) + dx, ty, label, anchor=anchor, size=11, color=color)]
    return _svg(plot_id, title, body)


def cdf(plot_id: str, title: str, series: Sequence[tuple[str, Sequence[float], str]], *, x_label: str) -> str:
    """Cumulative distributions from each arm's 0th..100th percentiles (every 5th): share of requests at or
    below each time."""
    series = [s for s in series if s[1]]
    if not series:
        return _svg(plot_id, title, [_text(_L, _T + 30, "no request succeeded")], 80)
    x_top, xt = nice_axis(max(max(s[1]) for s in series))
    body, sx, sy = _axes(x_top, 1.0, x_label, "share of requests at or below (%)", lambda v: f"{v:,.3g}",
                         lambda v: f"{100 * v:.0f}%", xt, 4)
    for name, qs, color in series:
        pts = " ".join(f"{sx(v):.1f},{sy(q / 100):.1f}" for v, q in zip(qs, QUANTILES, strict=True))
        body.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2">'
                    f"<title>{_e(name)}: p50 {qs[10]:,.1f}, p95 {qs[19]:,.1f}</title></polyline>")
    x = float(_L)
    for name, _, color in series:  # the legend, below the axis label
        body += [f'<rect x="{x:.1f}" y="{_H - 14:.1f}" width="12" height="4" fill="{color}"/>',
                 _text(x + 16, _H - 9, name, size=11)]
        x += 30 + text_width(name, 11)
    return _svg(plot_id, title, body)


def _plots(r: Mapping[str, Any], colors: Mapping[str, str]) -> dict[str, str]:
    arms = r["arms"]
    cost_pts = [(n, a["cost_per_request"], a["accuracy"]["rate"], colors[n]) for n, a in arms.items()
                if a["cost_per_request"] is not None and a["accuracy"]["rate"] is not None]
    ttft_pts = [(n, a["ttft"]["p50_ms"], a["accuracy"]["rate"], colors[n]) for n, a in arms.items()
                if a["ttft"]["p50_ms"] is not None and a["accuracy"]["rate"] is not None]
    return {
        "accuracy_vs_cost": scatter("accuracy_vs_cost", "Accuracy against cost: tokens per request",
                                    cost_pts, x_label="prompt + completion tokens per request x the arm's cost weight",
                                    y_label="accuracy (answerable items)", x_fmt=lambda v: f"{v:,.0f}"),
        "accuracy_vs_ttft": scatter("accuracy_vs_ttft", "Accuracy against time to first token (p50)", ttft_pts,
                                    x_label="p50 TTFT (ms)", y_label="accuracy (answerable items)",
                                    x_fmt=lambda v: f"{v:,.3g}"),
        "ttft_distribution": cdf("ttft_distribution", "Time to first token, every successful request",
                                 [(n, a["ttft_quantiles_ms"] or [], colors[n]) for n, a in arms.items()],
                                 x_label="TTFT (ms)"),
        "latency_distribution": cdf("latency_distribution", "Total latency, every successful request",
                                    [(n, a["latency_quantiles_ms"] or [], colors[n]) for n, a in arms.items()],
                                    x_label="latency to the last token (ms)"),
    }


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], text_cols: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="text">{_e(c)}</td>' if i in text_cols else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _rate(d: Mapping[str, Any]) -> str:
    if not d["n"]:
        return "-"
    return f"{_pct(d['rate'])} <span class=\"note\">({d['right']}/{d['n']})</span>"


def _check_value(c: Mapping[str, Any]) -> str:
    def fmt(v: float | None) -> str:
        if v is None:
            return "-"
        return f"{v:.2f}x" if c["check"].endswith("_gain") else _pct(v)

    ci = c.get("ci95")
    ci_text = f" [{fmt(ci[0])}, {fmt(ci[1])}]" if ci and ci[0] is not None else ""
    return f"{fmt(c['value'])}{ci_text}"


def render_html(r: Mapping[str, Any]) -> str:
    """The whole page for the report ``r`` (``build_report``'s dict)."""
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(r["arms"])}
    plots = _plots(r, colors)
    g = r["golden"]
    verdict = r["verdict"]
    out = [(f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>ragtrim gate: {_e(verdict)}</title>'
           f"<style>{_CSS}</style></head><body>"),
           f"<h1>ragtrim gate: each change against <code>{_e(r['baseline'])}</code></h1>",
           f'<p class="verdict {_e(verdict)}" id="verdict">verdict: {_e(verdict.upper())}</p>',
           (f"<p>Golden set{': ' + _e(Path(g['path']).name) if g.get('path') else ''}: {g['items']:,} items, "
            f"{g['answerable']:,} answerable, {g['unanswerable']:,} unanswerable, {g['with_schema']:,} with a JSON "
            f"schema, {g['judged_by_agreement']:,} judged by agreement with the baseline. Answers judged by "
            f"<b>{_e(r['judge']['metric'])}</b>; thresholds applied by the <b>{_e(r['thresholds']['rule'])}</b> "
            "rule.</p>")]
    if r["failed_checks"]:
        out.append("<p class=\"fail\">Failed: " + _e("; ".join(r["failed_checks"])) + "</p>")
    out += ["<h2>Changes</h2>", _table(
        ["change", "verdict", "check", "measured [95% interval]", "threshold", "McNemar p", "passed", "note"],
        [[_e(name) if i == 0 else "", f'<span class="{c_["verdict"]}">{_e(c_["verdict"])}</span>' if i == 0 else "",
          _e(c["check"]), _check_value(c),
          _e(f"{c['direction']} " + (f"{c['threshold']:.2f}x" if c["check"].endswith("_gain")
                                    else _pct(c["threshold"]))),
          _num(c["p_value"], 3) if c["p_value"] is not None else "-",
          f'<span class="{"pass" if c["passed"] else "fail"}">{"yes" if c["passed"] else "no"}</span>',
          c["note"]]
         for name, c_ in r["changes"].items() for i, c in enumerate(c_["checks"] or [{
             "check": "-", "value": None, "threshold": 0, "direction": "at most", "ci95": None, "p_value": None,
             "passed": True, "note": "no check applies"}])], text_cols=(7,))]
    names = {n: f'<span style="color:{colors[n]}">\u25cf</span> {_e(n)}' + (" (baseline)" if a["baseline"] else "")
             for n, a in r["arms"].items()}
    out += ["<h2>Arms</h2>", _table(
        ["arm", "accuracy", "exact", "F1", "contains", "refusal", "false refusals", "format", "errors"],
        [[names[n], _rate(a["accuracy"]), _pct(a["exact_match"]), _pct(a["f1"]), _pct(a["contains"]),
          _rate(a["refusal"]), _rate(a["false_refusals"]), _rate(a["format"]),
          f"{a['requests']['errors'] + a['requests']['missing']}"
          + (f" <span class=\"note\">({_e(', '.join(f'{k} {v}' for k, v in a['requests']['errors_by_kind'].items()))})"
             "</span>" if a["requests"]["errors_by_kind"] else "")]
         for n, a in r["arms"].items()]),
        _table(["arm", "TTFT p50 / p95 / p99 (ms)", "latency p50 / p95 / p99 (ms)", "output tokens/s p50",
                "prompt tokens", "completion tokens", "cost / request"],
               [[names[n], f"{_num(a['ttft']['p50_ms'])} / {_num(a['ttft']['p95_ms'])} / {_num(a['ttft']['p99_ms'])}",
                 f"{_num(a['latency']['p50_ms'])} / {_num(a['latency']['p95_ms'])} / {_num(a['latency']['p99_ms'])}",
                 _num(a["output_tokens_per_s"]["p50_tps"]), _num(a["tokens"]["prompt_mean"]),
                 _num(a["tokens"]["completion_mean"]), _num(a["cost_per_request"])] for n, a in r["arms"].items()]),
        ('<p class="note">Accuracy: answerable items (errors count as wrong); refusal: unanswerable items refused; '
        "false refusals: answerable items refused; format: replies that are JSON and follow the item's schema. "
        "TTFT and latency include a client-side trim; percentiles cover successful requests, failures are counted "
        "under errors.</p>"),
        plots["accuracy_vs_cost"], plots["accuracy_vs_ttft"], plots["ttft_distribution"],
        plots["latency_distribution"]]
    for name, c in r["changes"].items():
        comp = c["comparison"]
        out.append(f"<h2>{_e(name)} against {_e(r['baseline'])}</h2>")
        rows = []
        for key in ("accuracy", "refusal", "format", "f1"):
            d = comp[key]
            if d is None:
                continue
            rows.append([_e(key), _pct(d["baseline"]), _pct(d["change"]), _pct(d["drop"]),
                         f"[{_pct(d['drop_ci95'][0])}, {_pct(d['drop_ci95'][1])}]", str(d.get("losses", "-")),
                         str(d.get("gains", "-")), _num(d.get("mcnemar_p"), 3) if "mcnemar_p" in d else "-"])
        out.append(_table(["measure", "baseline", "change", "drop", "95% interval", "losses", "gains",
                           "McNemar p"], rows))
        for key in ("ttft", "latency"):
            d = comp[key]
            if d is not None:
                out.append(f"<p>{_e(key.upper() if key == 'ttft' else 'Latency')} gain (baseline / change) at "
                           f"p{d['percentile']:g}: <b>{_num(d['gain'], 2)}x</b> [{_num(d['gain_ci95'][0], 2)}, "
                           f"{_num(d['gain_ci95'][1], 2)}]; p50 {_num(d['p50_gain'], 2)}x, p95 "
                           f"{_num(d['p95_gain'], 2)}x, p99 {_num(d['p99_gain'], 2)}x ({d['n']:,} pairs).</p>")
        if c["slices"]:
            out += ["<p><b>Where it loses most</b></p>", _table(
                ["slice", "items", "baseline right", "change right", "drop", "losses", "gains", "McNemar p"],
                [[_e(s["slice"]), str(s["n"]), _pct(s["baseline"]), _pct(s["change"]), _pct(s["drop"]),
                  str(s["losses"]), str(s["gains"]), _num(s["mcnemar_p"], 3)] for s in c["slices"]])]
        if c["worst"]:
            text = r.get("text_included", True)
            headers = ["item", "kind", "F1 base / change"] + (["question", "reference", "baseline", "change"]
                                                             if text else [])
            out += ["<p><b>Worst examples</b></p>", _table(
                headers, [[_e(w["id"]), _e(w["kind"] if not w["error"] else f"error: {w['error']}"),
                           f"{_num(w['f1_baseline'], 2)} / {_num(w['f1_change'], 2)}",
                           *((w.get("question") or "", " | ".join(w.get("reference") or []),
                              w.get("baseline_reply") or "", w.get("change_reply") or "") if text else ())]
                          for w in c["worst"]], text_cols=(3, 4, 5, 6) if text else ())]
    run = r.get("run") or {}
    out.append(f'<h2>Method</h2><p class="note">Paired on the same items: McNemar\'s exact test for right/wrong '
               f"outcomes, bootstrap 95% intervals ({r['thresholds']['bootstrap_rounds']:,} resamples, seed "
               f"{r['thresholds']['seed']}) for differences and speed-ups. Run: "
               f"{_e(json.dumps({k: v for k, v in run.items() if k != 'command'}))}. Every number is in the JSON "
               "report beside this page.</p>")
    out.append(f'<script type="application/json" id="plots">{_e(json.dumps(list(plots)))}</script></body></html>')
    return "\n".join(out)
