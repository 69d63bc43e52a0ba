"""``ragtrim audit`` on the gateway's own log of RAG traffic, checked against the gateway's own token counts.

``ragtrim serve`` (budget 0.25, BM25, ``[log] log_request = true``) runs in front of the fake upstream (prefill time
grows with the prompt); N golden NQ questions (20 passages with hard distractors, as ``gpu gateway_e2e``
builds them) go through it as chat requests: the passages as ``documents`` or in a ``<context>`` block, a system
prompt, and on every third request an earlier exchange. Then the audit reads the log the gateway wrote.
Run from the repository root: ragtrim-bench audit gateway_rag [--screenshot docs/audit/gateway-rag-top.png]
  -> benchmarks/results/audit/gateway_rag.json and the report in benchmarks/results/audit/gateway-rag/
The log itself (it holds the passages' text) goes to .cache/audit/, never into the repository.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragtrim_bench.audit.gateway_traffic import GatewayAuditConfig, run
from ragtrim_bench.audit.scale import planner_args
from ragtrim_bench.audit.screenshots import screenshot
from ragtrim_bench.common.results import command_line, result_path, results_root, shown_path, write_result


def report(result: dict[str, Any]) -> None:
    a, g = result["audit"], result["gateway"]
    print(f"{result['requests_ok']}/{result['requests_sent']} requests ok through the gateway "
          f"({result['seconds']['send']} s); audit {result['seconds']['audit']} s")
    print(f"audit: {a['prompt_tokens']:,} prompt tokens; " + ", ".join(
        f"{p} {n:,}" for p, n in a["parts"].items()) + f"; largest part: {a['largest_part']}")
    print(f"gateway: prompt_before {g['log']['prompt_before']:,}, prompt_after {g['log']['prompt_after']:,} "
          f"(saved {100 * g['saved_share_of_prompt']:.1f}%), documents {g['log']['documents_before']:,} -> "
          f"{g['log']['documents_after']:,}; /metrics prompt_in {g['metrics'].get('prompt_in', 0):,}")
    print(f"gap: the gateway counts {result['prompt_tokens_gap']:,} tokens more; its numbered documents block is "
          f"{g['numbering_tokens']:,}")
    if a["saved_share_of_prompt"] is not None:
        print(f"audit would save {100 * a['saved_share_of_prompt']:.1f}% of the prompt: context "
              f"{a['context_tokens_saved']:,} tokens (gateway removed {g['documents_saved']:,})")
    print("match:", result["match"])
    print(f"report: {result['report_bytes']}")


def main(argv: Sequence[str] | None = None) -> int:
    d = GatewayAuditConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=d.requests)
    parser.add_argument("--offset", type=int, default=d.offset, help="first golden NQ question")
    parser.add_argument("--budget", type=float, default=d.budget)
    parser.add_argument("--scorer", default=d.scorer)
    parser.add_argument("--log", type=Path, default=d.log, help="where the gateway writes its request log")
    parser.add_argument("--out", type=Path, default=None,
                        help="the audit report's folder (default: results/audit/gateway-rag)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: results/audit/gateway_rag.json")
    parser.add_argument("--no-planner", action="store_true", help="audit without the H200 plan and TTFT curve")
    parser.add_argument("--no-text", action="store_true", help="no prompt or document text in the report")
    parser.add_argument("--screenshot", type=Path, default=None, help="also save the report's top as this PNG")
    args = parser.parse_args(argv)
    extra = (() if args.no_planner else planner_args()) + (("--no-text",) if args.no_text else ())
    report_dir = Path(shown_path(args.out or results_root() / "audit" / "gateway-rag"))
    cfg = GatewayAuditConfig(requests=args.requests, offset=args.offset, budget=args.budget, scorer=args.scorer,
                             log=Path(shown_path(args.log)), report_dir=report_dir, audit_args=extra)
    result = run(cfg)
    result["audit_command"] = "ragtrim " + " ".join(result.pop("argv"))
    if args.screenshot is not None:
        result["screenshot"] = shown_path(args.screenshot)
        result["screenshot_bytes"] = screenshot(report_dir / "audit.html", args.screenshot)
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=["starlette", "uvicorn", "aiohttp"])
    report(result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
