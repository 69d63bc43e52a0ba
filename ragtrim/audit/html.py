"""The audit report as one static HTML page: inline SVG plots drawn here (no JavaScript, no fonts or scripts
from a network, no plotting library), tables, and the advice; every number comes from the report dict.

Every plot carries its title, axis labels and units as visible SVG text. A value label is drawn only where it fits
(its estimated width, ``text_width``, within its bar), so labels never run into each other; the tables beside the
plots hold every value.
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrim.audit.levers import headline_split
from ragtrim.audit.reader import PARTS

COLORS = {"system": "#4e79a7", "history": "#f28e2b", "context": "#59a14f", "question": "#e15759", "other": "#9c755f",
          "before": "#bab0ac", "after": "#59a14f", "log": "#4e79a7"}
_W = 720
_TOP = 30  # below the title
CHAR_EM = 0.62
"""Estimated width of a character in em of the sans-serif fonts used (digits and lower case are narrower): an upper
bound for deciding whether a label fits."""
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:960px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}td:not(:first-child){white-space:nowrap}.note{color:#666;font-size:12px}.kpi{display:inline-block;
margin:4px 18px 4px 0;vertical-align:top}.kpi b{display:block;font-size:20px}svg{display:block;margin:12px 0}
li{margin:4px 0}code{background:#f4f4f4;padding:0 3px}
.first{background:#f6f9fc;border:1px solid #c9d6e3;border-radius:6px;padding:8px 16px;margin:16px 0}
.first h2{margin-top:8px;border:none}.first ol{padding-left:20px}.first li{margin:8px 0}
.warn{background:#fff4e5;border:1px solid #f0b266;border-radius:6px;padding:8px 16px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _n(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _e("-" if value is None else value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.3g}"
    return _e(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _tokens(value: Any) -> str:
    return "-" if value is None else f"{_n(value)} tokens"


def text_width(s: str, size: float) -> float:
    """Estimated width in pixels of ``s`` at font ``size`` (see ``CHAR_EM``)."""
    return len(s) * size * CHAR_EM


def _svg(plot_id: str, height: float, body: Sequence[str], title: str) -> str:
    """A plot: its title as visible text at the top (and as the accessible name), then the body."""
    return (f'<svg data-plot="{plot_id}" id="plot-{plot_id}" xmlns="http://www.w3.org/2000/svg" width="{_W}" '
            f'height="{height:.0f}" viewBox="0 0 {_W} {height:.0f}" role="img" aria-label="{_e(title)}">'
            f'<title>{_e(title)}</title>'
            + _text(10, 18, title, size=14, weight="bold", cls="plot-title") + "".join(body) + "</svg>")


def _text(x: float, y: float, s: str, *, anchor: str = "start", size: int = 12, color: str = "#222",
          weight: str = "normal", cls: str = "", rotate: bool = False) -> str:
    extra = f' class="{cls}"' if cls else ""
    extra += f' font-weight="{weight}"' if weight != "normal" else ""
    extra += f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}"{extra}>'
            f"{_e(s)}</text>")


def _rect(x: float, y: float, w: float, h: float, color: str, tip: str = "") -> str:
    title = f"<title>{_e(tip)}</title>" if tip else ""
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" fill="{color}">{title}</rect>'


def _line(x1: float, y1: float, x2: float, y2: float, color: str = "#999") -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}"/>'


def _legend(items: Sequence[tuple[str, str]], y: float, x: float = 10.0) -> list[str]:
    """Legend entries left to right, wrapping to a new row when the next one would pass the right edge."""
    out: list[str] = []
    for label, color in items:
        w = 16 + text_width(label, 12) + 14
        if x + w > _W - 10 and x > 10:
            x, y = 10.0, y + 18
        out += [_rect(x, y - 10, 12, 12, color), _text(x + 16, y, label)]
        x += w
    return out


def _legend_rows(items: Sequence[tuple[str, str]], x: float = 10.0) -> int:
    rows, pos = 1, x
    for label, _ in items:
        w = 16 + text_width(label, 12) + 14
        if pos + w > _W - 10 and pos > 10:
            rows, pos = rows + 1, 10.0
        pos += w
    return rows


def nice_axis(value: float, *, most: int = 6) -> tuple[float, int]:
    """(top, ticks): the lowest axis end at or above ``value`` made of 2 to ``most`` round steps (1, 2, 2.5 or 5
    times a power of ten), so that ticks read 0, 500k, 1M, 1.5M rather than 0, 365k, 730k."""
    if value <= 0:
        return 1.0, 4
    best: tuple[float, int] | None = None
    base = 10 ** math.floor(math.log10(value))
    for power in (base / 10, base, base * 10):
        for m in (1, 2, 2.5, 5):
            step = m * power
            k = math.ceil(value / step - 1e-9)
            if 2 <= k <= most and (best is None or k * step < best[0]):
                best = (k * step, k)
    return best or (value, 4)


def _ticks(top: float, fmt: Callable[[float], str], n: int) -> list[tuple[float, str]]:
    return [(top * i / n, fmt(top * i / n)) for i in range(n + 1)]


def stacked_share(plot_id: str, title: str, rows: Sequence[tuple[str, Mapping[str, float]]], *, x_label: str,
                  totals: Sequence[str] | None = None, legend: Sequence[tuple[str, str]] | None = None,
                  label_width: int = 150) -> str:
    """One horizontal bar per row, split by part, on a 0-100 % axis of ``x_label``. ``totals`` are drawn at each
    bar's end (what the row adds up to, as the text beside the plot says it)."""
    right = 90 if totals else 20
    bar_w = _W - label_width - right
    body: list[str] = []
    for r, (label, values) in enumerate(rows):
        y = _TOP + r * 34
        body.append(_text(label_width - 8, y + 16, label, anchor="end"))
        x = float(label_width)
        for part in PARTS:
            v = values.get(part, 0.0) or 0.0
            w = v * bar_w
            body.append(_rect(x, y, w, 24, COLORS[part], f"{label} {part}: {_pct(v)}"))
            if w >= text_width(_pct(v), 11) + 6:
                body.append(_text(x + w / 2, y + 16, _pct(v), anchor="middle", size=11, color="#fff"))
            x += w
        if totals:
            body.append(_text(x + 6, y + 16, totals[r], weight="bold", cls="bar-total"))
    axis_y = _TOP + len(rows) * 34 + 2
    body.append(_line(label_width, axis_y, label_width + bar_w, axis_y))
    for value, tick in _ticks(1.0, lambda v: f"{100 * v:.0f}%", 4):
        x = label_width + value * bar_w
        body += [_line(x, axis_y, x, axis_y + 4), _text(x, axis_y + 16, tick, anchor="middle", size=11)]
    body.append(_text(label_width + bar_w / 2, axis_y + 34, x_label, anchor="middle", cls="axis-label"))
    items = list(legend) if legend else [(p, COLORS[p]) for p in PARTS]
    body += _legend(items, axis_y + 56)
    return _svg(plot_id, axis_y + 56 + 18 * _legend_rows(items), body, title)


def grouped_bars(plot_id: str, title: str, groups: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]],
                 *, x_label: str, y_label: str, fmt: Callable[[float], str] = _pct,
                 tick_fmt: Callable[[float], str] | None = None, max_value: float | None = None) -> str:
    """Vertical bars: for each group, one bar per series (name, color, values), on a y axis of ``y_label``."""
    top, n_ticks = (max_value, 4) if max_value else nice_axis(max([v for _, _, vs in series for v in vs] + [1e-9]))
    left, plot_h = 78, 180
    base = _TOP + 24 + plot_h
    gw = (_W - left - 10) / max(1, len(groups))
    bw = min(40.0, (gw - 12) / max(1, len(series)))
    body = [_line(left, base, _W - 10, base), _line(left, base - plot_h, left, base)]
    for value, tick in _ticks(top, tick_fmt or fmt, n_ticks):
        y = base - plot_h * value / top
        body += [_line(left - 4, y, left, y), _text(left - 6, y + 4, tick, anchor="end", size=11)]
    body.append(_text(10, _TOP + 6, f"\u2191 {y_label}", size=11, cls="axis-label"))
    for g, group in enumerate(groups):
        gx = left + g * gw + (gw - bw * len(series)) / 2
        for s, (name, color, values) in enumerate(series):
            v = values[g]
            h = plot_h * v / top if top else 0
            x = gx + s * bw
            body.append(_rect(x + 1, base - h, bw - 2, h, color, f"{group} {name}: {fmt(v)}"))
            label = fmt(v)
            if v > 0 and text_width(label, 10) <= bw - 2:
                body.append(_text(x + bw / 2, base - h - 4, label, anchor="middle", size=10))
    size = 12 if all(text_width(g, 12) <= gw - 4 for g in groups) else 11
    stagger = any(text_width(g, size) > gw - 4 for g in groups)  # alternate rows when neighbours would touch
    for g, group in enumerate(groups):
        body.append(_text(left + g * gw + gw / 2, base + 16 + (14 * (g % 2) if stagger else 0), group,
                          anchor="middle", size=size))
    below = base + (50 if stagger else 36)
    body.append(_text(left + (_W - 10 - left) / 2, below, x_label, anchor="middle", cls="axis-label"))
    items = [(name, color) for name, color, _ in series]
    body += _legend(items, below + 22)
    return _svg(plot_id, below + 22 + 18 * _legend_rows(items), body, title)


def bin_labels(edges: Sequence[int]) -> list[str]:
    """``0-256``, ``256-512``, ``512-1k``, ..., ``8k+`` (from, up to but not including; 1k = 1,024 tokens), one per
    bin of ``prompt_edges``."""
    def short(e: int) -> str:
        return f"{e // 1024}k" if e >= 1024 and e % 1024 == 0 else f"{e:,}"

    out = [f"{short(a)}-{short(b)}" for a, b in itertools.pairwise(edges)]
    return [*out, f"{short(edges[-1])}+"]


def histogram(plot_id: str, title: str, edges: Sequence[int], series: Sequence[tuple[str, str, Sequence[float]]]) -> str:
    """Distributions over the same bins (each series as shares of its requests), bars side by side."""
    return grouped_bars(plot_id, title, bin_labels(edges), series,
                        x_label="prompt tokens per request (bins; 1k = 1,024 tokens)",
                        y_label="share of requests (%)", tick_fmt=lambda v: f"{100 * v:.3g}%")


def _short(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.3g}M"
    return f"{n / 1000:.3g}k" if n >= 1000 else f"{n:.3g}"


def ranked_bars(plot_id: str, title: str, rows: Sequence[tuple[str, float, str]], *, x_label: str,
                label_width: int = 200) -> str:
    """Horizontal bars, largest first: (label, value, tooltip), on an x axis of ``x_label``."""
    top, n_ticks = nice_axis(max([v for _, v, _ in rows] + [1]), most=4)
    bar_w = _W - label_width - 90
    body: list[str] = [_text(label_width - 8, _TOP + 10, "request id", anchor="end", size=11, color="#666",
                             cls="axis-label")]
    y0 = _TOP + 18
    for r, (label, value, tip) in enumerate(rows):
        y = y0 + r * 24
        w = bar_w * value / top
        body += [_text(label_width - 8, y + 13, label[:30], anchor="end"),
                 _rect(label_width, y, w, 18, COLORS["log"], tip),
                 _text(label_width + w + 6, y + 13, _n(value), size=11)]
    if not rows:
        body.append(_text(label_width, y0 + 13, "no requests"))
    axis_y = y0 + max(1, len(rows)) * 24 + 2
    body.append(_line(label_width, axis_y, label_width + bar_w, axis_y))
    for value, tick in _ticks(top, _short, n_ticks):
        x = label_width + bar_w * value / top
        body += [_line(x, axis_y, x, axis_y + 4), _text(x, axis_y + 16, tick, anchor="middle", size=11)]
    body.append(_text(label_width + bar_w / 2, axis_y + 34, x_label, anchor="middle", cls="axis-label"))
    return _svg(plot_id, axis_y + 44, body, title)


# -- the page -----------------------------------------------------------------------------------------------------
def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if isinstance(c, _Raw) else _n(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class _Raw(str):
    """Already-escaped HTML for a table cell."""


def _kpi(label: str, value: str) -> str:
    return f'<span class="kpi"><b>{value}</b>{_e(label)}</span>'


def _plots(r: Mapping[str, Any]) -> dict[str, str]:
    b = r["breakdown"]
    parts = b["parts"]
    plots: dict[str, str] = {}
    plots["part_share"] = stacked_share(
        "part_share", "Where the prompt tokens go: share of all prompt tokens by part",
        [("all requests", {p: parts[p]["share_of_total"] for p in PARTS})],
        x_label="share of all prompt tokens in the log (%)",
        legend=[(f"{p} {_pct(parts[p]['share_of_total'])}", COLORS[p]) for p in PARTS])
    plots["part_share_per_request"] = grouped_bars(
        "part_share_per_request", "Share of each request's prompt by part: median (p50) and p95 request",
        list(PARTS),
        [("p50 request", "#76b7b2", [parts[p]["per_request_share"]["p50"] or 0 for p in PARTS]),
         ("p95 request", "#4e79a7", [parts[p]["per_request_share"]["p95"] or 0 for p in PARTS])],
        max_value=1.0, x_label="prompt part", y_label="share of the request's prompt tokens (%)",
        tick_fmt=lambda v: f"{100 * v:.0f}%")
    dist = r["prompt_distribution"]
    series = [("whole log", COLORS["log"], dist["log"])]
    if dist.get("sample_after"):
        series += [("sample before ragtrim", COLORS["before"], dist["sample_before"]),
                   ("sample after ragtrim", COLORS["after"], dist["sample_after"])]
    plots["prompt_tokens_before_after"] = histogram(
        "prompt_tokens_before_after", "Prompt size: share of requests in each range of prompt tokens",
        dist["edges"], series)
    pc = r["prefix_cache"]
    plots["prefix_cache"] = stacked_share(
        "prefix_cache", "Prompt tokens a prefix cache could serve, by part",
        [(name, {p: d["served_tokens_by_part"][p] / max(1, b["prompt_tokens"]) for p in PARTS})
         for name, d in (("as logged", pc["as_logged"]), ("recommended order", pc["recommended_order"]))],
        x_label="share of all prompt tokens served from the cache (%)",
        totals=[_pct(pc["as_logged"]["served_share_of_prompt_tokens"]),
                _pct(pc["recommended_order"]["served_share_of_prompt_tokens"])])
    if "savings" in r and r["savings"].get("sampled_requests"):
        sv = r["savings"]["parts"]
        plots["savings_by_part"] = grouped_bars(
            "savings_by_part", "Prompt tokens per part in the whole log: now and after ragtrim (estimate)",
            list(PARTS),
            [("now", COLORS["before"], [float(parts[p]["tokens"]) for p in PARTS]),
             ("after ragtrim", COLORS["after"],
              [float(parts[p]["tokens"] - sv[p]["log_tokens_saved_estimate"]) for p in PARTS])],
            fmt=_short, x_label="prompt part", y_label="prompt tokens in the log")
    top = b["top_requests"]["prompt"]
    plots["top_requests"] = ranked_bars("top_requests", "The largest prompts",
                                        [(t["request_id"], t["tokens"], f"line {t['line']}") for t in top],
                                        x_label="prompt tokens of the request")
    return plots


def _first_block(r: Mapping[str, Any]) -> list[str]:
    """"What to do first": the levers, largest first, each with its tokens, its KV effect and its config line."""
    items = r.get("levers") or []
    if not items:
        return [('<div class="first"><h2>What to do first</h2><p>Nothing stands out: no lever saves a measurable share '
                "of this log's prompt tokens.</p></div>")]
    out = ['<div class="first" id="what-to-do-first"><h2>What to do first</h2><ol>']
    for lever in items:
        out.append(f"<li><b>{_e(lever['title'])}</b>: {_e(lever['saves_text'])}"
                   + (f"; {_e(lever['kv_text'])}" if lever["kv_text"] else "")
                   + f'.<br>Config: <code>{_e(lever["config"])}</code> '
                   f'<span class="note">({_e(lever["config_where"])}; {_e(lever["tokens_basis"])})</span></li>')
    out.append("</ol></div>")
    return out


def render_html(r: Mapping[str, Any]) -> str:
    """The whole page for report ``r`` (``run_audit``'s dict)."""
    plots = _plots(r)
    b, pc, docs, inp = r["breakdown"], r["prefix_cache"], r["documents"], r["input"]
    name = Path(str(inp["path"])).name
    per_request = b["prompt_tokens_per_request"]
    out = [(f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ragtrim audit: "
           f"{_e(name)}</title><style>{_CSS}</style></head><body>"),
           f"<h1>ragtrim audit: {_e(name)}</h1>"]
    if not inp.get("complete", True):
        out.append(f'<p class="warn" id="incomplete"><b>The log ends early.</b> Reading stopped after line '
                   f'{_n(inp["stopped_after_line"])} ({_e(inp["stop_reason"])}); this report covers the '
                   f'{_n(b["requests"])} requests read before that line.</p>')
    out += [_kpi("requests", _n(b["requests"])), _kpi("prompt tokens", _n(b["prompt_tokens"])),
            _kpi("prompt tokens per request, p50 / p95",
                 f"{_n(per_request['p50'])} / {_n(per_request['p95'])} tokens"),
            _kpi("prefix-cacheable as logged", _pct(pc["as_logged"]["served_share_of_prompt_tokens"]))]
    if "savings" in r and r["savings"].get("sampled_requests"):
        s = r["savings"]["prompt"]
        out.append(_kpi("of prompt tokens ragtrim would save in the sample (95% interval)",
                        f"{_pct(s['saved_share'])} [{_pct(s['saved_share_ci95'][0])}, "
                        f"{_pct(s['saved_share_ci95'][1])}]"))
        if headline_split(r):
            out.append(f'<p class="note" id="headline-split">Over the whole log: {_e(headline_split(r))}.</p>')
    skipped = inp["skipped_lines"]
    reasons = ", ".join(f"{k} {v:,}" for k, v in skipped["by_reason"].items())
    out.append(f'<p class="note">{_e(inp.get("format_description", "request log"))}; tokenizer '
               f'{_e(r["tokenizer"])}; {_n(skipped["total"])} lines skipped{f" ({_e(reasons)})" if reasons else ""}'
               + "".join(f"; line {e['line']}: {_e(e['reason'])}" for e in skipped["examples"][:3])
               + f"; request text {'included' if r['text_included'] else 'left out (--no-text)'}.</p>")
    images = inp.get("images", {})
    if images.get("count"):
        out.append(f'<p class="note">{_n(images["count"])} images: {_e(images["note"])}.</p>')
    if inp.get("uncounted_blocks"):
        out.append('<p class="note">Blocks with no text to count in the log (their tokens are not in the totals): '
                   + _e(", ".join(f"{k} {v:,}" for k, v in inp["uncounted_blocks"].items())) + ".</p>")
    out += _first_block(r)

    out += ["<h2>Where the tokens go</h2>", plots["part_share"], plots["part_share_per_request"],
            _table(["part", "tokens", "share of all", "p50 tokens / request", "p95 tokens / request",
                    "p50 share of a request", "p95 share of a request"],
                   [[p, d["tokens"], _pct(d["share_of_total"]), d["per_request_tokens"]["p50"],
                     d["per_request_tokens"]["p95"], _pct(d["per_request_share"]["p50"]),
                     _pct(d["per_request_share"]["p95"])] for p, d in b["parts"].items()])]

    sysd = pc["system_prompts"]
    out += ["<h2>Shared prefixes</h2>", plots["prefix_cache"],
            (f"<p>A prefix cache of {_n(pc['capacity_tokens'])} tokens ({_n(pc['block_size'])}-token blocks) could serve "
            f"<b>{_pct(pc['as_logged']['served_share_of_prompt_tokens'])}</b> of prompt tokens as the log orders them, "
            f"<b>{_pct(pc['recommended_order']['served_share_of_prompt_tokens'])}</b> in the recommended order. "
            f"{_n(sysd['distinct_system_prompts'])} distinct system prompts; "
            f"{_n(sysd['requests_without_system_prompt'])} requests have none.</p>"),
            _table(["tokens served from the cache", *PARTS, "all parts", "share of all prompt tokens"],
                   [[name, *(d["served_tokens_by_part"][p] for p in PARTS), d["served_tokens"],
                     _Raw(f"<b>{_pct(d['served_share_of_prompt_tokens'])}</b>")]
                    for name, d in (("as logged", pc["as_logged"]), ("recommended order", pc["recommended_order"]))])]
    if pc["advice"]:
        out.append("<ul>" + "".join(f"<li>{_e(a['text'])}</li>" for a in pc["advice"]) + "</ul>")
    if sysd["top_variants"]:
        out.append(_table(["system prompt", "requests", "share of requests", "tokens", "same start as top (chars)"],
                          [[v.get("preview", f"variant {i + 1}"), v["requests"], _pct(v["share_of_requests"]),
                            v["tokens"], v["common_prefix_chars_with_top"]] for i, v in enumerate(sysd["top_variants"])]))

    w, a, h = docs["within_request"], docs["across_requests"], docs["html"]
    has_context = docs["context_tokens"] > 0
    out += ["<h2>Documents</h2>",
            _table(["", "pieces", "tokens", "share of context", "share of prompt"],
                   [["retrieved context", docs["context_pieces"], docs["context_tokens"],
                     "100%" if has_context else "-", _pct(b["parts"]["context"]["share_of_total"])],
                    ["HTML boilerplate (every HTML piece)", h["html_pieces"], h["boilerplate_tokens"],
                     _pct(h["boilerplate_share_of_context"]), _pct(h["boilerplate_share_of_prompt"])],
                    ["exact duplicates in a request", w["exact_duplicate_pieces"], w["exact_duplicate_tokens"],
                     _pct(w["exact_duplicate_share_of_context"]), _pct(w["exact_duplicate_share_of_prompt"])],
                    ["near duplicates in a request", w["near_duplicate_pieces"], w["near_duplicate_tokens"],
                     _pct(w["near_duplicate_share_of_context"]), _pct(w["near_duplicate_share_of_prompt"])],
                    ["all duplicates in a request", w["exact_duplicate_pieces"] + w["near_duplicate_pieces"],
                     w["exact_duplicate_tokens"] + w["near_duplicate_tokens"],
                     _pct(w["duplicate_share_of_context"]), _pct(w["duplicate_share_of_prompt"])],
                    ["retrieved again by a later request", "", a["repeated_tokens"],
                     _pct(a["repeated_share_of_context"]), ""]]),
            ('<p class="note">Counted in the pipeline\'s order: HTML cleanup first, on every HTML piece (copies '
             "included), then duplicates on the cleaned text, weighed at their cleaned size; so the boilerplate and "
             "duplicate rows add up to what the HTML and dedup stages remove.</p>")]
    if a["most_retrieved"]:
        out.append(_table(["most retrieved document", "requests", "tokens", "first request"],
                          [[d.get("preview", "-"), d["requests"], d["tokens"], d["first_request_id"]]
                           for d in a["most_retrieved"]]))

    conv = r["conversations"]
    out += ["<h2>Conversations</h2>",
            (f"<p>{_n(conv['conversations'])} conversations, {_n(conv['multi_request_conversations'])} with more than "
            f"one request; history tokens added per request: p50 "
            f"{_tokens(conv['history_tokens_added_per_request']['p50'])}; largest history per conversation: p95 "
            f"{_tokens(conv['max_history_tokens']['p95'])}.</p>")]
    if conv["largest_histories"]:
        out.append(_table(["first request", "requests", "largest history (tokens)"],
                          [[c["first_request_id"], c["requests"], c["max_history_tokens"]]
                           for c in conv["largest_histories"]]))

    out += _savings_html(r, plots)
    out += ["<h2>Top offenders</h2>", plots["top_requests"]]
    for title, rows in (("most duplicate tokens", docs["top_requests"]["duplicates"]),
                        ("most boilerplate tokens", docs["top_requests"]["boilerplate"]),
                        ("largest history", b["top_requests"]["history"])):
        if rows:
            out.append(f"<p><b>{_e(title)}</b></p>" + _table(["request id", "tokens", "line"],
                                                            [[t["request_id"], t["tokens"], t["line"]] for t in rows]))
    out.append(f'<h2>Method</h2><p class="note">{_e(pc["method"])}. Near duplicates: MinHash '
               f'{_n(docs["method"]["num_perm"])} permutations, signature agreement >= '
               f'{docs["method"]["near_threshold"]}. Audit took {_n(r["run"]["seconds"])} s, peak memory '
               f'{_n(r["run"]["peak_rss_mib"])} MiB. Every number is in the JSON report beside this page.</p>')
    out.append(f'<script type="application/json" id="plots">{_e(json.dumps(list(plots)))}</script></body></html>')
    return "\n".join(out)


def _savings_html(r: Mapping[str, Any], plots: Mapping[str, str]) -> list[str]:
    dist = r["prompt_distribution"]
    hist_table = _table(["prompt tokens", *(name for name in ("whole log", "sample before ragtrim",
                                                              "sample after ragtrim") if name == "whole log"
                                             or dist.get("sample_after"))],
                        [[label, _pct(dist["log"][i]), *((_pct(dist["sample_before"][i]), _pct(dist["sample_after"][i]))
                                                        if dist.get("sample_after") else ())]
                         for i, label in enumerate(bin_labels(dist["edges"]))])
    if "savings" not in r or not r["savings"].get("sampled_requests"):
        return ["<h2>What ragtrim would save</h2><p>Not measured (--no-savings).</p>",
                plots["prompt_tokens_before_after"], hist_table]
    s = r["savings"]
    out = ["<h2>What ragtrim would save</h2>",
           (f"<p>ragtrim's pipeline ({_e(_budget_text(s['config']['budget']))}, scorer {_e(s['config']['scorer'])}, "
           f"history stage keeping {_n(s['config']['history_turns'])} turns) on {_n(s['sampled_requests'])} requests; "
           f"{_e(s['interval'])}.</p>"), plots["savings_by_part"], plots["prompt_tokens_before_after"], hist_table,
           _table(["part", "saved share", "95% interval", "log tokens saved (estimate)"],
                  [[p, _pct(d["saved_share"]), f"{_pct(d['saved_share_ci95'][0])} - {_pct(d['saved_share_ci95'][1])}",
                    d["log_tokens_saved_estimate"]] for p, d in s["parts"].items()]),
           _table(["stage", "tokens saved in the sample", "share of the sample's prompt tokens",
                   "whole log, counted in Documents"],
                  [[k, v["sample_tokens_saved"], _pct(v["saved_share_of_prompt"]), _whole_log(k, r)]
                   for k, v in s["by_stage"].items()]),
           (f"<p class=\"note\">ragtrim's own time per request: p50 {_n(s['trim_ms_per_request']['p50'])} ms, "
           f"p95 {_n(s['trim_ms_per_request']['p95'])} ms on this machine.</p>")]
    if "plan" in r:
        p = r["plan"]
        out.append(f"<h2>On the GPU: {_e(p['model'])}, {_n(p['gpu_mem_gib'])} GiB</h2>")
        out.append(_table(["workload", "requests", "p95 prompt (tokens)", "p95 request (tokens)", "--max-model-len",
                           "concurrent requests at p95"],
                          [[w["workload"], w["requests"], w["input_p95_tokens"], w["request_p95_tokens"],
                            w["recommended_max_model_len"], w["max_concurrency_p95"]] for w in p["workloads"]]))
        if p["workloads"] and p["workloads"][0].get("max_model_len_statement"):
            out.append(f"<p>{_e(p['workloads'][0]['max_model_len_statement'])}</p>")
        if "freed" in p:
            f = p["freed"]
            out.append(f"<p>Trimming (every lever together) frees {_n(f['kv_tokens_freed_per_p95_request'])} KV "
                       "tokens per p95 request "
                       f"({_n(f['kv_mib_per_p95_request_before'])} to {_n(f['kv_mib_per_p95_request_after'])} MiB), "
                       f"concurrent requests at p95 {_n(f['concurrency_p95_before'])} to "
                       f"{_n(f['concurrency_p95_after'])}, <code>--max-model-len</code> "
                       f"{_n(f['max_model_len_before'])} to {_n(f['max_model_len_after'])}.</p>")
    if "ttft" in r:
        t = r["ttft"]
        out.append(f"<p>TTFT from the measured curve ({_e(t['curve'])}): p50 {_n(t['ttft_ms_before']['p50'])} ms to "
                   f"{_n(t['ttft_ms_after']['p50'])} ms, p95 {_n(t['ttft_ms_before']['p95'])} ms to "
                   f"{_n(t['ttft_ms_after']['p95'])} ms. {_e(t['note'])}.</p>")
    return out


def _whole_log(stage: str, r: Mapping[str, Any]) -> str:
    """The Documents section's count for the stages it measures over the whole log (HTML boilerplate, duplicates),
    beside the sample's: with every request trimmed (--sample 0) the HTML figures are equal."""
    docs = r["documents"]
    if stage == "html":
        return f"{docs['html']['boilerplate_tokens']:,} ({_pct(docs['html']['boilerplate_share_of_prompt'])})"
    if stage == "dedup":
        w = docs["within_request"]
        return (f"{w['exact_duplicate_tokens'] + w['near_duplicate_tokens']:,} "
                f"({_pct(w['duplicate_share_of_prompt'])})")
    return ""


def _budget_text(budget: float | None) -> str:
    if budget is None:
        return "no budget: HTML cleanup and duplicates only"
    return f"budget {budget:.0%} of each request's documents" if budget < 1 else f"budget {budget:,.0f} tokens"


def prompt_edges(max_tokens: int) -> list[int]:
    """Bin edges for prompt sizes: 0, then powers of two from 256 up to the largest prompt."""
    edges = [0]
    e = 256
    while e <= max(max_tokens, 1):
        edges.append(e)
        e *= 2
    return edges if len(edges) > 1 else [0, 256]


def shares(counts: Sequence[int]) -> list[float]:
    total = sum(counts)
    return [round(c / total, 4) if total else 0.0 for c in counts]


def bin_values(values: Sequence[int], edges: Sequence[int]) -> list[int]:
    out = [0] * len(edges)
    for v in values:
        i = len(edges) - 1
        while i > 0 and v < edges[i]:
            i -= 1
        out[i] += 1
    return out
