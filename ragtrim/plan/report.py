"""The plan as a plain-text table: model and memory first, then one column per workload."""

from __future__ import annotations

import textwrap

from ragtrim.plan.planner import Plan


def format_plan_table(p: Plan) -> str:
    """A plain-text table: model and memory first, then one column per workload."""
    swa = (
        f"{p.num_full_attention_layers} full + {p.num_sliding_window_layers} sliding (window {p.sliding_window_tokens})"
        if p.num_sliding_window_layers
        else f"{p.num_full_attention_layers} full attention"
    )
    budget = p.gpu_mem_gib * p.gpu_memory_utilization
    head = [
        f"Capacity plan: {p.model_name} ({p.architecture}), {p.num_layers} layers: {swa}",
        f"  parameters          {p.param_count:,}"
        + (f" (vision {p.vision_param_count:,})" if p.vision_param_count else ""),
        f"  weights             {p.weights_gib:.2f} GiB ({p.weight_dtype})",
        (
            f"  KV per token        {p.kv_bytes_per_token:,} B all layers, {p.kv_bytes_per_token_full_attention:,} B "
            f"full-attention layers ({p.kv_dtype})"
            + (f"; {p.kv_bytes_per_token_per_gpu:,} B all layers per GPU" if p.tensor_parallel_size > 1 else "")
        ),
        (
            f"  memory              {p.gpu_mem_gib:g} GiB x {p.gpu_memory_utilization:g} = {budget:.2f} GiB - weights "
            f"{p.weights_gib_per_gpu:.2f} - non-KV reserve {p.non_kv_overhead_gib:.2f} = KV {p.kv_memory_gib:.2f} GiB"
            + (f" per GPU, {p.tensor_parallel_size} GPUs per replica" if p.tensor_parallel_size > 1 else "")
        ),
        (
            f"  KV capacity         {p.kv_capacity_tokens:,} tokens (vLLM would log {p.vllm_kv_cache_tokens:,}, "
            f"block {p.block_size})"
        ),
        f"  model max length    {p.model_max_len:,}",
    ]

    def opt(v: float | bool | None) -> str:
        if v is None:
            return "-"
        if isinstance(v, bool):
            return "yes" if v else "no"
        return f"{v:,}" if isinstance(v, int) else f"{v:,.2f}"

    rows: list[tuple[str, list[str]]] = [
        ("requests", [opt(w.requests) for w in p.workloads]),
        (
            "input p50 / p95 / p99",
            [f"{w.input_p50_tokens} / {w.input_p95_tokens} / {opt(w.input_p99_tokens)}" for w in p.workloads],
        ),
        (
            "output p50 / p95 / p99",
            [
                f"{w.output_p50_tokens} / {w.output_p95_tokens} / {opt(w.output_p99_tokens)}"
                for w in p.workloads
            ],
        ),
        ("p95 request tokens", [opt(w.request_p95_tokens) for w in p.workloads]),
        ("KV per p95 request (MiB)", [f"{w.kv_bytes_per_request_p95 / 2**20:,.1f}" for w in p.workloads]),
        ("max concurrency at p95", [opt(w.max_concurrency_p95) for w in p.workloads]),
        (
            "fits target concurrency",
            [f"{opt(w.fits_target_concurrency)} ({opt(w.target_concurrency)})" for w in p.workloads],
        ),
        ("GPUs needed (replicas x TP)",
         [f"{w.gpus_needed:,} ({w.replicas_needed:,} x {p.tensor_parallel_size})" if w.gpus_needed is not None
          else ("- (no p95 request fits)" if w.target_concurrency is not None else "- (give --concurrency)")
          for w in p.workloads]),
        ("max_model_len (given)" if any(w.max_model_len_given for w in p.workloads) else "recommended max_model_len",
         [opt(w.recommended_max_model_len) for w in p.workloads]),
        ("concurrency at that len", [opt(w.max_concurrency_at_recommended_len) for w in p.workloads]),
        ("concurrency at model max", [opt(w.max_concurrency_at_model_max_len) for w in p.workloads]),
        ("lost by model max len", [opt(w.concurrency_lost_at_model_max_len) for w in p.workloads]),
        (
            "vLLM 'max concurrency' (rec)",
            [opt(w.vllm_max_concurrency_at_recommended_len) for w in p.workloads],
        ),
        ("vLLM 'max concurrency' (max)", [opt(w.vllm_max_concurrency_at_model_max_len) for w in p.workloads]),
        ("max input / output tokens", [f"{w.max_input_tokens} / {w.max_output_tokens}" for w in p.workloads]),
        (
            "TTFT p95 single / burst ms",
            [f"{opt(w.ttft_p95_single_ms)} / {opt(w.ttft_p95_burst_ms)}" for w in p.workloads],
        ),
        ("requests/user/min", [opt(w.max_requests_per_user_per_min) for w in p.workloads]),
    ]
    label_w = max(len(r[0]) for r in rows) + 2
    col_w = max([len(w.workload) for w in p.workloads] + [len(c) for _, cells in rows for c in cells]) + 2
    lines = head + ["", " " * label_w + "".join(w.workload.rjust(col_w) for w in p.workloads)]
    lines += [label.ljust(label_w) + "".join(c.rjust(col_w) for c in cells) for label, cells in rows]
    for w in p.workloads:
        lines.append("")
        lines.append(f"vLLM flags ({w.workload}): " + " ".join(w.vllm_flags))
        lines += textwrap.wrap(f"what it costs ({w.workload}): {w.max_model_len_statement}", width=118,
                               subsequent_indent="  ", break_on_hyphens=False)
        if w.gpus_needed is not None:
            lines.append(f"GPUs needed ({w.workload}): {w.gpus_needed:,} = {w.replicas_needed:,} replicas x "
                         f"tensor parallelism {p.tensor_parallel_size}, for {w.target_concurrency:,} concurrent "
                         f"requests at {w.max_concurrency_p95:,} per replica (p95 request)")
    if p.how_computed:
        lines += ["", "How this was computed:"]
        for step in p.how_computed:
            lines += textwrap.wrap(step, width=118, initial_indent="  - ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    for note in p.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)
