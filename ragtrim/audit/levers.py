"""The report's "what to do first": the two or three biggest levers in the audited log, each with the tokens it
saves, what that does to the KV cache and concurrency, and the one config line that pulls it.

Every number comes from the report's own sections: the savings run (documents, history), the prefix-cache
simulation (reordering) and the planner (``--max-model-len``); a lever's KV figures re-plan the sampled requests
with only that lever's tokens removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragtrim.audit.capacity import PlannerConfig
from ragtrim.audit.reader import Part
from ragtrim.audit.savings import SampleRecord

MAX_LEVERS = 3


def _kv(records: Sequence[SampleRecord], part: Part, planner: PlannerConfig | None) -> dict[str, Any] | None:
    """KV tokens per p95 request (input p95 + output p95, the planner's shape) and concurrency at p95, before and
    after removing ``part``'s saved tokens from the sampled requests."""
    if not records:
        return None
    from ragtrim.plan.planner import plan
    from ragtrim.plan.workload import Workload

    w_before = Workload.from_requests([(r.prompt_before, r.output_tokens) for r in records], name="before")
    w_after = Workload.from_requests([(r.prompt_before - r.saved[part], r.output_tokens) for r in records],
                                     name="after")
    out: dict[str, Any] = {"kv_tokens_per_p95_request_before": w_before.request_p95_tokens,
                           "kv_tokens_per_p95_request_after": w_after.request_p95_tokens,
                           "kv_tokens_freed_per_p95_request": w_before.request_p95_tokens - w_after.request_p95_tokens}
    if planner is not None:
        model, request = planner.build()
        b, a = plan(model, request, [w_before, w_after]).workloads
        out.update(concurrency_p95_before=b.max_concurrency_p95, concurrency_p95_after=a.max_concurrency_p95,
                   kv_mib_per_p95_request_before=round(b.kv_bytes_per_request_p95 / 2**20, 1),
                   kv_mib_per_p95_request_after=round(a.kv_bytes_per_request_p95 / 2**20, 1))
    return out


def _kv_text(kv: Mapping[str, Any] | None, model: str | None) -> str:
    if kv is None:
        return ""
    text = (f"frees {kv['kv_tokens_freed_per_p95_request']:,} KV tokens per p95 request "
            f"({kv['kv_tokens_per_p95_request_before']:,} -> {kv['kv_tokens_per_p95_request_after']:,} tokens)")
    if "concurrency_p95_before" in kv:
        text += (f"; concurrent p95 requests on {model}: {kv['concurrency_p95_before']:,} -> "
                 f"{kv['concurrency_p95_after']:,}")
    return text


def levers(report: Mapping[str, Any], records: Sequence[SampleRecord], planner: PlannerConfig | None,
           *, history_turns: int) -> list[dict[str, Any]]:
    """The biggest levers, largest token saving first; the ``--max-model-len`` lever (with a planner) closes the
    list, as it saves no token but sets the concurrency the server guarantees."""
    prompt_tokens = report["breakdown"]["prompt_tokens"]
    model = report.get("plan", {}).get("model")
    found: list[dict[str, Any]] = []
    savings = report.get("savings", {})
    if savings.get("sampled_requests"):
        budget = savings["config"]["budget"]
        stages = savings["by_stage"]
        done_by = ", ".join(f"{s} {v['sample_tokens_saved']:,}" for s, v in stages.items()
                            if s != "history" and v["sample_tokens_saved"] > 0)
        context = savings["parts"]["context"]
        if context["log_tokens_saved_estimate"] > 0:
            kv = _kv(records, "context", planner)
            if budget is None:
                title = "Clean HTML and drop duplicate documents (lossless)"
                config = 'trim.budget = "lossless"'
                where = ("[trim] in ragtrim serve's config; ragtrim.api.lossless_pipeline().run(chunks) in Python "
                         "(rerun the audit with --budget 0.25 to measure a budget as well)")
            else:
                share = f"{budget:g}" if budget < 1 else f"{int(budget)}"
                title = "Trim retrieved documents to a budget"
                config = f"trim.budget = {share}"
                where = "[trim] in ragtrim serve's config; ragtrim.trim(chunks, query, budget=...) in Python"
            found.append({
                "id": "documents", "title": title, "tokens_saved": context["log_tokens_saved_estimate"],
                "share_of_prompt": round(context["log_tokens_saved_estimate"] / prompt_tokens, 4),
                "tokens_basis": (f"{100 * context['saved_share']:.1f}% of the context tokens of "
                                 f"{savings['sampled_requests']:,} trimmed requests"
                                 + (f" (by stage, tokens in the sample: {done_by})" if done_by else "")
                                 + ", applied to the log's context tokens"),
                "kv": kv, "kv_text": _kv_text(kv, model), "config": config, "config_where": where})
        history = savings["parts"]["history"]
        if history["log_tokens_saved_estimate"] > 0:
            kv = _kv(records, "history", planner)
            found.append({
                "id": "history", "title": f"Fold conversation turns older than the last {history_turns}",
                "tokens_saved": history["log_tokens_saved_estimate"],
                "share_of_prompt": round(history["log_tokens_saved_estimate"] / prompt_tokens, 4),
                "tokens_basis": (f"{100 * history['saved_share']:.1f}% of the history tokens of the trimmed "
                                 "requests, applied to the log's history tokens"),
                "kv": kv, "kv_text": _kv_text(kv, model), "config": f"trim.history_turns = {history_turns}",
                "config_where": "[trim] in ragtrim serve's config; ragtrim.compress_history(...) in Python"})
    pc = report["prefix_cache"]
    gain = pc["recommended_order"]["served_tokens"] - pc["as_logged"]["served_tokens"]
    if gain > 0 and gain >= 0.01 * prompt_tokens:
        found.append({
            "id": "prefix_order", "title": "Order every prompt the same way for the prefix cache",
            "tokens_saved": gain, "share_of_prompt": round(gain / prompt_tokens, 4),
            "tokens_basis": (f"prompt tokens a {pc['capacity_tokens']:,}-token prefix cache serves: "
                             f"{100 * pc['as_logged']['served_share_of_prompt_tokens']:.1f}% as logged, "
                             f"{100 * pc['recommended_order']['served_share_of_prompt_tokens']:.1f}% in the "
                             "recommended order; served tokens skip prefill, they still sit in the KV cache"),
            "kv": None, "kv_text": "prefill time, not KV: shared blocks are held once for all the requests that share "
                                   "them",
            "config": "system prompt, tools, earlier turns, documents sorted by id, question last",
            "config_where": "in the application that builds the prompt, with vLLM's --enable-prefix-caching (on by "
                            "default in vLLM's V1 engine)"})
    found.sort(key=lambda lever: -lever["tokens_saved"])
    plan_section = report.get("plan")
    max_len = _max_len_lever(plan_section) if plan_section else None
    chosen = found[:MAX_LEVERS - 1] if max_len else found[:MAX_LEVERS]
    if max_len:
        chosen.append(max_len)
    every = (plan_section or {}).get("freed")
    for lever in chosen:
        kv = lever["kv"] or {}
        if every and "concurrency_p95_after" in kv and kv["concurrency_p95_after"] != every["concurrency_p95_after"]:
            lever["kv_text"] += (f" with this lever alone ({every['concurrency_p95_before']:,} -> "
                                 f"{every['concurrency_p95_after']:,} with every lever, as under On the GPU)")
    for rank, lever in enumerate(chosen, 1):
        lever["rank"] = rank
        n, share = lever["tokens_saved"], 100 * lever["share_of_prompt"]
        lever["saves_text"] = ("saves no prompt tokens" if not n else
                               f"{n:,} more prompt tokens ({share:.1f}% of the log) served from the prefix cache "
                               "instead of prefilled" if lever["id"] == "prefix_order" else
                               f"saves {n:,} prompt tokens ({share:.1f}% of the log)")
    return chosen


def headline_split(report: Mapping[str, Any]) -> str:
    """How the headline saving (measured on the sampled requests) divides into the levers (estimated over the whole
    log: each part's saved share applied to the log's tokens of that part), so that the two figures read as one:
    ``documents 66.8% (lever 1) + history 1.9% (lever 2) = 68.7% of the whole log``. Empty without a savings run."""
    savings = report.get("savings", {})
    prompt_tokens = report["breakdown"]["prompt_tokens"]
    if not savings.get("sampled_requests") or not prompt_tokens:
        return ""
    ranks = {lever["id"]: lever["rank"] for lever in report.get("levers", [])}
    terms, total = [], 0
    for part, lever in (("context", "documents"), ("history", "history")):
        saved = savings["parts"][part]["log_tokens_saved_estimate"]
        if saved:  # a negative part (history folding that adds tokens) is part of the sum too
            total += saved
            where = f" (lever {ranks[lever]})" if lever in ranks else " (adds tokens)" if saved < 0 else ""
            terms.append(f"{part if part != 'context' else 'documents'} {100 * saved / prompt_tokens:.1f}%{where}")
    if not terms:
        return ""
    return f"{' + '.join(terms)} = {100 * total / prompt_tokens:.1f}% of the whole log's prompt tokens"


def _max_len_lever(p: Mapping[str, Any]) -> dict[str, Any] | None:
    log = p["workloads"][0]
    rec, conc_rec = log["recommended_max_model_len"], log["max_concurrency_at_recommended_len"]
    model_max, conc_max = p.get("model_max_len"), log.get("max_concurrency_at_model_max_len")
    if model_max is None or conc_max is None or rec >= model_max or conc_rec <= conc_max:
        return None
    after = p.get("freed", {}).get("max_model_len_after")
    text = (f"guarantees {conc_rec:,} requests of {rec:,} tokens at once on {p['model']} instead of {conc_max:,} at "
            f"the model maximum ({model_max:,}); the log's p95 request fits {log['max_concurrency_p95']:,} at once")
    if after is not None and after < rec:
        text += f"; after trimming, --max-model-len {after:,} would do"
    return {"id": "max_model_len", "title": "Set --max-model-len to what the log needs", "tokens_saved": 0,
            "share_of_prompt": 0.0, "tokens_basis": log["max_model_len_basis"],
            "kv": {"max_model_len": rec, "guaranteed_concurrency": conc_rec, "model_max_len": model_max,
                   "guaranteed_concurrency_at_model_max": conc_max},
            "kv_text": text, "config": f"--max-model-len {rec}", "config_where": "vllm serve"}
