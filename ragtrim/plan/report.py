"""The plan as a plain-text table: model and memory first, then one column per workload, the one number that
governs (requests of the workload's p95 shape at once) marked and the others labelled with what they guarantee.

One number format everywhere: counts with thousands separators, vLLM's own concurrency figure as vLLM logs it
(``107.08x``), memory with two decimals; rows that nothing asked for are left out, not printed as ``-``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from ragtrim.plan.planner import Plan, WorkloadPlan

GOVERNS = "concurrent p95 requests (governs)"
"""The row that sets --max-num-seqs and the GPU count: requests of the workload's p95 shape whose KV fits at once."""


def _n(v: int) -> str:
    return f"{v:,}"


def _x(v: float) -> str:
    """vLLM's 'max concurrency' figure, flagged when below 1 (vLLM does not start at that length)."""
    return f"{v:,.2f}x" + (" (<1!)" if v < 1 else "")


def _pcts(values: Sequence[int | None]) -> str:
    return " / ".join(_n(v) for v in values if v is not None)


def format_plan_table(p: Plan) -> str:
    """A plain-text table: model and memory first, then one column per workload, then what governs and why."""
    ws = p.workloads
    swa = (
        f"{p.num_full_attention_layers} full + {p.num_sliding_window_layers} sliding (window "
        f"{_n(p.sliding_window_tokens or 0)})" if p.num_sliding_window_layers
        else f"{p.num_full_attention_layers} full attention"
    )
    budget = p.gpu_mem_gib * p.gpu_memory_utilization
    head = [f"Capacity plan: {p.model_name} ({p.architecture}), {p.num_layers} layers: {swa}"]
    if p.model_source:
        head.append(f"  config              {p.model_source}")
    head += [
        f"  parameters          {_n(p.param_count)}" + (f" (vision {_n(p.vision_param_count)})"
                                                          if p.vision_param_count else ""),
        f"  weights             {p.weights_gib:,.2f} GiB ({p.weight_dtype})",
        (f"  KV per token        {_n(p.kv_bytes_per_token)} B all layers, "
         f"{_n(p.kv_bytes_per_token_full_attention)} B full-attention layers ({p.kv_dtype})"
         + (f"; {_n(p.kv_bytes_per_token_per_gpu)} B all layers per GPU" if p.tensor_parallel_size > 1 else "")),
        (f"  memory              {p.gpu_mem_gib:g} GiB x {p.gpu_memory_utilization:g} = {budget:,.2f} GiB - weights "
         f"{p.weights_gib_per_gpu:,.2f} - non-KV reserve {p.non_kv_overhead_gib:,.2f} = KV {p.kv_memory_gib:,.2f} GiB"
         + (f" per GPU, {p.tensor_parallel_size} GPUs per replica" if p.tensor_parallel_size > 1 else "")),
        (f"  KV capacity         {_n(p.kv_capacity_tokens)} tokens (vLLM would log {_n(p.vllm_kv_cache_tokens)}, "
         f"block {p.block_size})"),
        f"  model max length    {_n(p.model_max_len)}",
    ]

    def row(label: str, cell: Callable[[WorkloadPlan], str]) -> tuple[str, list[str]]:
        return label, [cell(w) for w in ws]

    p99 = all(w.input_p99_tokens is not None for w in ws)
    out99 = all(w.output_p99_tokens is not None for w in ws)
    given = any(w.max_model_len_given for w in ws)
    rows: list[tuple[str, list[str]]] = []
    if all(w.requests is not None for w in ws):
        rows.append(row("requests", lambda w: _n(w.requests or 0)))
    rows += [
        row("input p50 / p95" + (" / p99" if p99 else ""),
            lambda w: _pcts([w.input_p50_tokens, w.input_p95_tokens, w.input_p99_tokens if p99 else None])),
        row("output p50 / p95" + (" / p99" if out99 else ""),
            lambda w: _pcts([w.output_p50_tokens, w.output_p95_tokens, w.output_p99_tokens if out99 else None])),
        row("p95 request tokens", lambda w: _n(w.request_p95_tokens)),
        row("KV per p95 request (MiB)", lambda w: f"{w.kv_bytes_per_request_p95 / 2**20:,.1f}"),
        row(GOVERNS, lambda w: _n(w.max_concurrency_p95)),
    ]
    if any(w.target_concurrency is not None for w in ws):
        rows.append(row("target concurrency met", lambda w: f"{'yes' if w.fits_target_concurrency else 'no'} "
                                                            f"({_n(w.target_concurrency or 0)})"))
        rows.append(row("GPUs needed (replicas x TP)",
                        lambda w: f"{_n(w.gpus_needed)} ({_n(w.replicas_needed or 0)} x {p.tensor_parallel_size})"
                        if w.gpus_needed is not None else "none fits"))
    rows += [
        row("--max-model-len (given)" if given else "--max-model-len (recommended)",
            lambda w: _n(w.recommended_max_model_len)),
        row("  full-length requests guaranteed", lambda w: _n(w.max_concurrency_at_recommended_len)),
        row("  vLLM's 'max concurrency' log", lambda w: _x(w.vllm_max_concurrency_at_recommended_len)),
        row(f"at the model maximum ({_n(p.model_max_len)})", lambda w: ""),
        row("  full-length requests guaranteed", lambda w: _n(w.max_concurrency_at_model_max_len)),
        row("  vLLM's 'max concurrency' log", lambda w: _x(w.vllm_max_concurrency_at_model_max_len)),
        row("max input / output tokens", lambda w: f"{_n(w.max_input_tokens)} / {_n(w.max_output_tokens)}"),
    ]
    if any(w.ttft_p95_single_ms is not None for w in ws):
        rows.append(row("TTFT p95 single / burst ms",
                        lambda w: f"{w.ttft_p95_single_ms or 0:,.1f} / {w.ttft_p95_burst_ms or 0:,.1f}"))
    if any(w.max_requests_per_user_per_min is not None for w in ws):
        rows.append(row("requests/user/min", lambda w: f"{w.max_requests_per_user_per_min or 0:,.2f}"))

    label_w = max(len(r[0]) for r in rows) + 2
    col_w = max([len(w.workload) for w in ws] + [len(c) for _, cells in rows for c in cells]) + 2
    lines = head + ["", " " * label_w + "".join(w.workload.rjust(col_w) for w in ws)]
    lines += [label.ljust(label_w) + "".join(c.rjust(col_w) for c in cells) for label, cells in rows]
    lines += [""] + textwrap.wrap(
        f"governs: '{GOVERNS.removesuffix(' (governs)')}': requests of the workload's p95 shape (input p95 + output "
        "p95) whose KV fits at once; --max-num-seqs and the GPU count follow from it. The rows under "
        "--max-model-len are guarantees for requests of the full length, a floor, not this workload's limit; vLLM "
        "logs the same floor at start in its own block accounting ('max concurrency'), and below 1 (<1!) it does "
        "not start at that length.", width=118, subsequent_indent="  ", break_on_hyphens=False)
    for w in ws:
        lines.append("")
        lines.append(f"vLLM flags ({w.workload}): " + " ".join(w.vllm_flags))
        lines += textwrap.wrap(f"what it costs ({w.workload}): {w.max_model_len_statement}", width=118,
                               subsequent_indent="  ", break_on_hyphens=False)
        if w.gpus_needed is not None:
            lines.append(f"GPUs needed ({w.workload}): {_n(w.gpus_needed)} = {_n(w.replicas_needed or 0)} replicas x "
                         f"tensor parallelism {p.tensor_parallel_size}, for {_n(w.target_concurrency or 0)} concurrent "
                         f"requests at {_n(w.max_concurrency_p95)} per replica (p95 request)")
    if p.how_computed:
        lines += ["", "How this was computed:"]
        for step in p.how_computed:
            lines += textwrap.wrap(step, width=118, initial_indent="  - ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    for note in p.notes:
        lines += textwrap.wrap(f"note: {note}", width=118, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(lines)
