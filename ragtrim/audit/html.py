"""The audit report as one static HTML page: inline SVG plots drawn here (no JavaScript, no fonts or scripts
from a network, no plotting library), tables, and the advice; every number comes from the report dict.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrim.audit.reader import PARTS

COLORS = {"system": "#4e79a7", "history": "#f28e2b", "context": "#59a14f", "question": "#e15759", "other": "#9c755f",
          "before": "#bab0ac", "after": "#59a14f", "log": "#4e79a7"}
_W = 720
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:960px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:12px}.kpi{display:inline-block;
margin:4px 18px 4px 0}.kpi b{display:block;font-size:20px}svg{display:block;margin:8px 0}
li{margin:4px 0}code{background:#f4f4f4;padding:0 3px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _n(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _e("-" if value is None else value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.3g}"
    return _e(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _svg(plot_id: str, height: int, body: Sequence[str], title: str) -> str:
    return (f'<svg data-plot="{plot_id}" id="plot-{plot_id}" xmlns="http://www.w3.org/2000/svg" width="{_W}" '
            f'height="{height}" viewBox="0 0 {_W} {height}" role="img" aria-label="{_e(title)}">'
            f'<title>{_e(title)}</title>' + "".join(body) + "</svg>")


def _text(x: float, y: float, s: str, *, anchor: str = "start", size: int = 12, color: str = "#222") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}">'
            f"{_e(s)}</text>")


def _rect(x: float, y: float, w: float, h: float, color: str, tip: str = "") -> str:
    title = f"<title>{_e(tip)}</title>" if tip else ""
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" fill="{color}">{title}</rect>'


def _legend(items: Sequence[tuple[str, str]], y: float) -> list[str]:
    out, x = [], 10.0
    for label, color in items:
        out += [_rect(x, y - 10, 12, 12, color), _text(x + 16, y, label)]
        x += 24 + 7.5 * len(label)
    return out


def stacked_share(plot_id: str, title: str, rows: Sequence[tuple[str, Mapping[str, float]]],
                  label_width: int = 150) -> str:
    """One horizontal bar per row, split by part; values are shares of the row (0..1)."""
    bar_w = _W - label_width - 20
    body: list[str] = []
    for r, (label, shares) in enumerate(rows):
        y = 10 + r * 34
        body.append(_text(label_width - 8, y + 16, label, anchor="end"))
        x = float(label_width)
        for part in PARTS:
            v = shares.get(part, 0.0) or 0.0
            w = v * bar_w
            body.append(_rect(x, y, w, 24, COLORS[part], f"{label} {part}: {_pct(v)}"))
            if w > 34:
                body.append(_text(x + w / 2, y + 16, _pct(v), anchor="middle", size=11, color="#fff"))
            x += w
    height = 10 + len(rows) * 34 + 24
    body += _legend([(p, COLORS[p]) for p in PARTS], height - 8)
    return _svg(plot_id, height, body, title)


def grouped_bars(plot_id: str, title: str, groups: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]],
                 *, fmt: Any = _pct, max_value: float | None = None) -> str:
    """Vertical bars: for each group, one bar per series (name, color, values)."""
    top = max_value or max([v for _, _, vs in series for v in vs] + [1e-9])
    plot_h, base = 180, 200
    gw = (_W - 60) / max(1, len(groups))
    bw = min(40.0, (gw - 16) / max(1, len(series)))
    body = [f'<line x1="50" y1="{base}" x2="{_W - 10}" y2="{base}" stroke="#999"/>']
    for g, group in enumerate(groups):
        gx = 50 + g * gw + (gw - bw * len(series)) / 2
        for s, (name, color, values) in enumerate(series):
            v = values[g]
            h = plot_h * v / top if top else 0
            x = gx + s * bw
            body.append(_rect(x + 1, base - h, bw - 2, h, color, f"{group} {name}: {fmt(v)}"))
            body.append(_text(x + bw / 2, base - h - 4, fmt(v), anchor="middle", size=10))
        body.append(_text(50 + g * gw + gw / 2, base + 16, group, anchor="middle"))
    body += _legend([(name, color) for name, color, _ in series], base + 40)
    return _svg(plot_id, base + 50, body, title)


def histogram(plot_id: str, title: str, edges: Sequence[int], series: Sequence[tuple[str, str, Sequence[float]]]) -> str:
    """Distributions over the same bins (each series as shares of its requests), bars side by side."""
    labels = [f"{e // 1024}k" if e >= 1024 and e % 1024 == 0 else _short(e) for e in edges]  # 1k = 1,024 tokens
    return grouped_bars(plot_id, title, [f"{lab}+" for lab in labels], series)


def _short(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.3g}M"
    return f"{n / 1000:.3g}k" if n >= 1000 else f"{n:.3g}"


def ranked_bars(plot_id: str, title: str, rows: Sequence[tuple[str, float, str]], label_width: int = 200) -> str:
    """Horizontal bars, largest first: (label, value, tooltip)."""
    top = max([v for _, v, _ in rows] + [1])
    body: list[str] = []
    for r, (label, value, tip) in enumerate(rows):
        y = 8 + r * 24
        w = (_W - label_width - 90) * value / top
        body += [_text(label_width - 8, y + 13, label[:32], anchor="end"),
                 _rect(label_width, y, w, 18, COLORS["log"], tip),
                 _text(label_width + w + 6, y + 13, _n(value), size=11)]
    if not rows:
        body.append(_text(10, 24, "no requests"))
    return _svg(plot_id, 16 + max(1, len(rows)) * 24, body, title)


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
    plots["part_share"] = stacked_share("part_share", "Share of all prompt tokens by part",
                                        [("all requests", {p: parts[p]["share_of_total"] for p in PARTS})])
    plots["part_share_per_request"] = grouped_bars(
        "part_share_per_request", "Share of each request's prompt by part (p50, p95)", list(PARTS),
        [("p50", "#76b7b2", [parts[p]["per_request_share"]["p50"] or 0 for p in PARTS]),
         ("p95", "#4e79a7", [parts[p]["per_request_share"]["p95"] or 0 for p in PARTS])], max_value=1.0)
    dist = r["prompt_distribution"]
    series = [("log", COLORS["log"], dist["log"])]
    if dist.get("sample_after"):
        series += [("sample before", COLORS["before"], dist["sample_before"]),
                   ("sample after ragtrim", COLORS["after"], dist["sample_after"])]
    plots["prompt_tokens_before_after"] = histogram(
        "prompt_tokens_before_after", "Prompt tokens per request (share of requests per bin)", dist["edges"], series)
    pc = r["prefix_cache"]
    plots["prefix_cache"] = stacked_share(
        "prefix_cache", "Prompt tokens a prefix cache could serve, by part",
        [(name, {p: d["served_tokens_by_part"][p] / max(1, b["prompt_tokens"]) for p in PARTS})
         for name, d in (("as logged", pc["as_logged"]), ("recommended order", pc["recommended_order"]))])
    if "savings" in r and r["savings"].get("sampled_requests"):
        sv = r["savings"]["parts"]
        plots["savings_by_part"] = grouped_bars(
            "savings_by_part", "Tokens per part in the whole log: now and after ragtrim (estimate)", list(PARTS),
            [("now", COLORS["before"], [float(parts[p]["tokens"]) for p in PARTS]),
             ("after ragtrim", COLORS["after"],
              [float(parts[p]["tokens"] - sv[p]["log_tokens_saved_estimate"]) for p in PARTS])], fmt=_short)
    top = b["top_requests"]["prompt"]
    plots["top_requests"] = ranked_bars("top_requests", "Largest prompts (tokens) by request id",
                                        [(t["request_id"], t["tokens"], f"line {t['line']}") for t in top])
    return plots


def render_html(r: Mapping[str, Any]) -> str:
    """The whole page for report ``r`` (``run_audit``'s dict)."""
    plots = _plots(r)
    b, pc, docs = r["breakdown"], r["prefix_cache"], r["documents"]
    out = [(f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ragtrim audit: "
           f"{_e(Path(str(r['input']['path'])).name)}</title><style>{_CSS}</style></head><body>"),
           f"<h1>ragtrim audit: {_e(Path(str(r['input']['path'])).name)}</h1>",
           _kpi("requests", _n(b["requests"])), _kpi("prompt tokens", _n(b["prompt_tokens"])),
           _kpi("p50 / p95 prompt", f"{_n(b['prompt_tokens_per_request']['p50'])} / "
                                    f"{_n(b['prompt_tokens_per_request']['p95'])}"),
           _kpi("prefix-cacheable as logged", _pct(pc["as_logged"]["served_share_of_prompt_tokens"]))]
    if "savings" in r and r["savings"].get("sampled_requests"):
        s = r["savings"]["prompt"]
        out.append(_kpi("ragtrim would save", f"{_pct(s['saved_share'])} "
                                              f"[{_pct(s['saved_share_ci95'][0])}, {_pct(s['saved_share_ci95'][1])}]"))
    out.append(f'<p class="note">Tokenizer {_e(r["tokenizer"])}; {_n(r["input"]["skipped_lines"]["total"])} lines '
               f"skipped; request text {'included' if r['text_included'] else 'left out (--no-text)'}.</p>")

    out += ["<h2>Where the tokens go</h2>", plots["part_share"], plots["part_share_per_request"],
            _table(["part", "tokens", "share", "p50 / request", "p95 / request", "p50 share", "p95 share"],
                   [[p, d["tokens"], _pct(d["share_of_total"]), d["per_request_tokens"]["p50"],
                     d["per_request_tokens"]["p95"], _pct(d["per_request_share"]["p50"]),
                     _pct(d["per_request_share"]["p95"])] for p, d in b["parts"].items()])]

    sysd = pc["system_prompts"]
    out += ["<h2>Shared prefixes</h2>", plots["prefix_cache"],
            (f"<p>A prefix cache of {_n(pc['capacity_tokens'])} tokens ({_n(pc['block_size'])}-token blocks) could serve "
            f"<b>{_pct(pc['as_logged']['served_share_of_prompt_tokens'])}</b> of prompt tokens as the log orders them, "
            f"<b>{_pct(pc['recommended_order']['served_share_of_prompt_tokens'])}</b> in the recommended order. "
            f"{_n(sysd['distinct_system_prompts'])} distinct system prompts; "
            f"{_n(sysd['requests_without_system_prompt'])} requests have none.</p>")]
    if pc["advice"]:
        out.append("<ul>" + "".join(f"<li>{_e(a['text'])}</li>" for a in pc["advice"]) + "</ul>")
    if sysd["top_variants"]:
        out.append(_table(["system prompt", "requests", "share", "tokens", "same start as top (chars)"],
                          [[v.get("preview", f"variant {i + 1}"), v["requests"], _pct(v["share_of_requests"]),
                            v["tokens"], v["common_prefix_chars_with_top"]] for i, v in enumerate(sysd["top_variants"])]))

    w, a, h = docs["within_request"], docs["across_requests"], docs["html"]
    out += ["<h2>Documents</h2>",
            _table(["", "pieces", "tokens", "share of context", "share of prompt"],
                   [["retrieved context", docs["context_pieces"], docs["context_tokens"], "100%",
                     _pct(b["parts"]["context"]["share_of_total"])],
                    ["exact duplicates in a request", w["exact_duplicate_pieces"], w["exact_duplicate_tokens"], "", ""],
                    ["near duplicates in a request", w["near_duplicate_pieces"], w["near_duplicate_tokens"],
                     _pct(w["duplicate_share_of_context"]), _pct(w["duplicate_share_of_prompt"])],
                    ["HTML boilerplate", h["html_pieces"], h["boilerplate_tokens"],
                     _pct(h["boilerplate_share_of_context"]), _pct(h["boilerplate_share_of_prompt"])],
                    ["retrieved again by a later request", "", a["repeated_tokens"],
                     _pct(a["repeated_share_of_context"]), ""]])]
    if a["most_retrieved"]:
        out.append(_table(["most retrieved document", "requests", "tokens", "first request"],
                          [[d.get("preview", "-"), d["requests"], d["tokens"], d["first_request_id"]]
                           for d in a["most_retrieved"]]))

    conv = r["conversations"]
    out += ["<h2>Conversations</h2>",
            (f"<p>{_n(conv['conversations'])} conversations, {_n(conv['multi_request_conversations'])} with more than "
            f"one request; history tokens added per request p50 {_n(conv['history_tokens_added_per_request']['p50'])}, "
            f"largest history p95 {_n(conv['max_history_tokens']['p95'])} tokens.</p>")]
    if conv["largest_histories"]:
        out.append(_table(["first request", "requests", "largest history (tokens)"],
                          [[c["first_request_id"], c["requests"], c["max_history_tokens"]]
                           for c in conv["largest_histories"]]))

    out += _savings_html(r, plots)
    out += ["<h2>Top offenders</h2>", plots["top_requests"]]
    for name, rows in (("most duplicate tokens", docs["top_requests"]["duplicates"]),
                       ("most boilerplate tokens", docs["top_requests"]["boilerplate"]),
                       ("largest history", b["top_requests"]["history"])):
        if rows:
            out.append(f"<p><b>{_e(name)}</b></p>" + _table(["request id", "tokens", "line"],
                                                           [[t["request_id"], t["tokens"], t["line"]] for t in rows]))
    out.append(f'<h2>Method</h2><p class="note">{_e(pc["method"])}. Near duplicates: MinHash '
               f'{_n(docs["method"]["num_perm"])} permutations, signature agreement >= '
               f'{docs["method"]["near_threshold"]}. Audit took {_n(r["run"]["seconds"])} s, peak memory '
               f'{_n(r["run"]["peak_rss_mib"])} MiB. Every number is in the JSON report beside this page.</p>')
    out.append(f'<script type="application/json" id="plots">{_e(json.dumps(list(plots)))}</script></body></html>')
    return "\n".join(out)


def _savings_html(r: Mapping[str, Any], plots: Mapping[str, str]) -> list[str]:
    if "savings" not in r or not r["savings"].get("sampled_requests"):
        return ["<h2>What ragtrim would save</h2><p>Not measured (--sample skipped).</p>",
                plots["prompt_tokens_before_after"]]
    s = r["savings"]
    out = ["<h2>What ragtrim would save</h2>",
           (f"<p>ragtrim's pipeline ({_e(_budget_text(s['config']['budget']))}, scorer {_e(s['config']['scorer'])}, "
           f"history stage keeping {_n(s['config']['history_turns'])} turns) on {_n(s['sampled_requests'])} requests; "
           f"{_e(s['interval'])}.</p>"), plots["savings_by_part"], plots["prompt_tokens_before_after"],
           _table(["part", "saved share", "95% interval", "log tokens saved (estimate)"],
                  [[p, _pct(d["saved_share"]), f"{_pct(d['saved_share_ci95'][0])} - {_pct(d['saved_share_ci95'][1])}",
                    d["log_tokens_saved_estimate"]] for p, d in s["parts"].items()]),
           _table(["stage", "tokens saved in the sample", "share of the sample's prompt tokens"],
                  [[k, v["sample_tokens_saved"], _pct(v["saved_share_of_prompt"])] for k, v in s["by_stage"].items()]),
           (f"<p class=\"note\">ragtrim's own time per request: p50 {_n(s['trim_ms_per_request']['p50'])} ms, "
           f"p95 {_n(s['trim_ms_per_request']['p95'])} ms on this machine.</p>")]
    if "plan" in r:
        p = r["plan"]
        out.append(f"<h2>On the GPU: {_e(p['model'])}, {_n(p['gpu_mem_gib'])} GiB</h2>")
        out.append(_table(["workload", "requests", "p95 prompt", "p95 request", "--max-model-len",
                           "concurrency at p95"],
                          [[w["workload"], w["requests"], w["input_p95_tokens"], w["request_p95_tokens"],
                            w["recommended_max_model_len"], w["max_concurrency_p95"]] for w in p["workloads"]]))
        if "freed" in p:
            f = p["freed"]
            out.append(f"<p>Trimming frees {_n(f['kv_tokens_freed_per_p95_request'])} KV tokens per p95 request "
                       f"({_n(f['kv_mib_per_p95_request_before'])} to {_n(f['kv_mib_per_p95_request_after'])} MiB), "
                       f"concurrency at p95 {_n(f['concurrency_p95_before'])} to {_n(f['concurrency_p95_after'])}, "
                       f"<code>--max-model-len</code> {_n(f['max_model_len_before'])} to "
                       f"{_n(f['max_model_len_after'])}.</p>")
    if "ttft" in r:
        t = r["ttft"]
        out.append(f"<p>TTFT from the measured curve ({_e(t['curve'])}): p50 {_n(t['ttft_ms_before']['p50'])} ms to "
                   f"{_n(t['ttft_ms_after']['p50'])} ms, p95 {_n(t['ttft_ms_before']['p95'])} ms to "
                   f"{_n(t['ttft_ms_after']['p95'])} ms. {_e(t['note'])}.</p>")
    return out


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
