"""The peer comparison's numbers, computed from its per-request cells (pure functions, no printing): answer recall
with Wilson intervals, tokens sent and overshoot per row, column, split and ratio; every peer paired against
ragtrim's default on the same requests (exact McNemar, which on the discordant pairs is the two-sided sign test);
cold cost per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragtrim_bench.common.stats import mcnemar_exact_p, mean, percentile, wilson_interval
from ragtrim_bench.peers.rows import REFERENCE_ROW

SIGNIFICANCE = 0.05
"""A paired difference with p below this is called significant in ``comparisons``."""


def _present(values: Sequence[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def records(cells: Sequence[Mapping[str, Any]], ratios: Sequence[int], timed_ratio: int = 4) -> list[dict[str, Any]]:
    """One flat record per (row, column, split, ratio). ``n_overshoot``: requests whose own output was over the
    budget (before the cut), ``mean_overshoot_tokens`` by how much on average. Cost keys only at ``timed_ratio``."""
    out: list[dict[str, Any]] = []
    for c in cells:
        n = len(c["errors"])
        cold = _present(c["cold_ms"])
        for ratio in ratios:
            r = str(ratio)
            bits = c["kept"][r]
            budgets = c["budgets"][r]
            sent, produced = c["tokens_after"][r], c["produced_tokens"][r]
            over = [p - b for p, b in zip(produced, budgets) if p is not None and p > b]
            low, high = wilson_interval(bits.count("1"), n)
            rec: dict[str, Any] = {
                "row": c["row"], "column": c["column"], "split": c["split"], "ratio": ratio, "n": n,
                "answer_recall": bits.count("1") / n if n else float("nan"), "answer_recall_ci95_low": low,
                "answer_recall_ci95_high": high, "n_errors": sum(1 for e in c["errors"] if e),
                "budget_violations": sum(1 for s, b in zip(sent, budgets) if s is not None and s > b),
                "mean_budget_tokens": mean(budgets), "mean_output_tokens": mean(_present(sent)),
                "mean_produced_tokens": mean(_present(produced)), "n_overshoot": len(over),
                "overshoot_rate": len(over) / n if n else float("nan"), "mean_overshoot_tokens": mean(over),
                "n_cut": sum(1 for x in c["cut"][r] if x), "kept_bits": bits,
                "n_timed": None, "cold_p50_ms": None, "cold_p99_ms": None,
            }
            if ratio == timed_ratio:
                rec.update(n_timed=len(cold), cold_p50_ms=percentile(cold, 50), cold_p99_ms=percentile(cold, 99))
            errors = [e for e in c["errors"] if e]
            if errors:
                rec["first_error"] = errors[0]
            out.append(rec)
    return out


def paired(reference_bits: str, peer_bits: str) -> dict[str, Any]:
    """The reference (ragtrim's default) and a peer on the same requests, the first ``len(peer_bits)`` of the
    reference's: their recalls, the requests only one kept, and the exact McNemar p."""
    n = min(len(reference_bits), len(peer_bits))
    pairs = list(zip(reference_bits[:n], peer_bits[:n]))
    only_ref = sum(1 for a, b in pairs if a == "1" and b == "0")
    only_peer = sum(1 for a, b in pairs if a == "0" and b == "1")
    ref = sum(1 for a, _ in pairs if a == "1") / n if n else float("nan")
    peer = sum(1 for _, b in pairs if b == "1") / n if n else float("nan")
    p = mcnemar_exact_p(only_ref, only_peer)
    return {"n": n, "reference_recall": ref, "peer_recall": peer, "recall_diff": ref - peer,
            "n_only_reference": only_ref, "n_only_peer": only_peer, "mcnemar_p": p,
            "peer_wins_significantly": p < SIGNIFICANCE and only_peer > only_ref,
            "reference_wins_significantly": p < SIGNIFICANCE and only_ref > only_peer}


def comparisons(cells: Sequence[Mapping[str, Any]], ratios: Sequence[int],
                reference: str = REFERENCE_ROW) -> list[dict[str, Any]]:
    """Every other row against ``reference`` per (column, split, ratio) on the requests both ran (the peer's, a
    prefix of the reference's: the same requests in the same order, checked), and pooled over the columns of each
    split and ratio (``column`` = "all")."""
    ref = {(c["column"], c["split"]): c for c in cells if c["row"] == reference}
    out: list[dict[str, Any]] = []
    pooled: dict[tuple[str, str, int], tuple[str, str]] = {}
    for c in cells:
        base = ref.get((c["column"], c["split"]))
        if c["row"] == reference or base is None:
            continue
        n = len(c["request_ids"])
        if base["request_ids"][:n] != c["request_ids"]:
            raise ValueError(f"{c['row']} and {reference} ran different requests on {c['column']} {c['split']}")
        for ratio in ratios:
            a, b = base["kept"][str(ratio)][:n], c["kept"][str(ratio)]
            out.append({"row": c["row"], "against": reference, "column": c["column"], "split": c["split"],
                        "ratio": ratio, **paired(a, b)})
            ra, rb = pooled.get((c["row"], c["split"], ratio), ("", ""))
            pooled[(c["row"], c["split"], ratio)] = (ra + a, rb + b)
    for (row, split, ratio), (a, b) in pooled.items():
        out.append({"row": row, "against": reference, "column": "all", "split": split, "ratio": ratio,
                    **paired(a, b)})
    return out


def cost_by_row(cells: Sequence[Mapping[str, Any]], reference: str = REFERENCE_ROW) -> list[dict[str, Any]]:
    """Cold cost per row over every timed request it ran (all its columns and splits; p50 per column too), and its
    p50 over the reference's."""
    rows: dict[str, list[Mapping[str, Any]]] = {}
    for c in cells:
        rows.setdefault(c["row"], []).append(c)
    out: list[dict[str, Any]] = []
    for row, cs in rows.items():
        cold = [v for c in cs for v in _present(c["cold_ms"])]
        cpu = [v for c in cs for v in _present(c["cold_cpu_s"])]
        by_column: dict[str, list[float]] = {}
        for c in cs:
            by_column.setdefault(c["column"], []).extend(_present(c["cold_ms"]))
        out.append({"row": row, "n": len(cold), "cold_p50_ms": percentile(cold, 50),
                    "cold_p99_ms": percentile(cold, 99), "cold_mean_ms": mean(cold), "cold_mean_cpu_s": mean(cpu),
                    "cold_p50_ms_by_column": {k: percentile(v, 50) for k, v in by_column.items()}})
    ref = next((r["cold_p50_ms"] for r in out if r["row"] == reference), None)
    for r in out:
        r["cold_p50_vs_default"] = r["cold_p50_ms"] / ref if ref else None
    return out


def totals(cells: Sequence[Mapping[str, Any]], ratios: Sequence[int]) -> dict[str, Any]:
    """Per row over everything it ran: requests, errors, budget violations, and how often its own output was over
    the budget (the share of request-budget pairs)."""
    out: dict[str, Any] = {}
    for c in cells:
        t = out.setdefault(c["row"], {"n_calls": 0, "errors": 0, "budget_violations": 0, "n_overshoot": 0})
        t["errors"] += sum(1 for e in c["errors"] if e)
        for ratio in ratios:
            r = str(ratio)
            t["n_calls"] += len(c["errors"])
            t["budget_violations"] += sum(1 for s, b in zip(c["tokens_after"][r], c["budgets"][r])
                                          if s is not None and s > b)
            t["n_overshoot"] += sum(1 for p, b in zip(c["produced_tokens"][r], c["budgets"][r])
                                    if p is not None and p > b)
    for t in out.values():
        t["overshoot_rate"] = t["n_overshoot"] / t["n_calls"] if t["n_calls"] else None
    return out


def summarize(result: Mapping[str, Any]) -> dict[str, Any]:
    """The summary keys of a result, from its ``cells`` and ``ratios``."""
    cells, ratios = result["cells"], result["ratios"]
    return {"records": records(cells, ratios), "comparisons": comparisons(cells, ratios),
            "cost_by_row": cost_by_row(cells), "totals": totals(cells, ratios)}
