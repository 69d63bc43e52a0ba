"""``ragtrim audit`` on the gateway's own log of RAG traffic, checked against the gateway's own token counts.

``ragtrim serve`` (budget 0.25, BM25, ``[log] log_request = true``) runs in front of the fake upstream (prefill time
grows with the prompt); N golden NQ questions (20 passages with hard distractors, as benchmarks/gpu/gateway_e2e.py
builds them) go through it as chat requests: the passages as ``documents`` or in a ``<context>`` block, a system
prompt, and on every third request an earlier exchange. Then the audit reads the log the gateway wrote.
Run: .venv/bin/python benchmarks/audit_gateway.py [--screenshot docs/audit/gateway-rag-top.png]
  -> benchmarks/results/audit_gateway.json and the report in benchmarks/results/audit/gateway-rag/
The log itself (it holds the passages' text) goes to .cache/audit/, never into the repository.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from audit_screenshots import screenshot  # benchmarks/ is on the path of a script run from it

from ragtrim_bench.gateway_audit import GatewayAuditConfig, run

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
# The options of the other committed audits (docs/audit.md): the Gemma 3 12B config on one H200 and GPU run 4's curve.
PLANNER_ARGS = ("--model-config", "tests/fixtures/configs/gemma-3-12b-it.json", "--gpu-mem-gib", "141",
                "--ttft-curve", "benchmarks/results/gpu/summary.json", "--ttft-config", "12b_graphs_1024")


def in_repo(path: Path) -> Path:
    """``path`` relative to the repository when it lies inside it (the report and the summary name their inputs
    that way, as the other committed audits do), else absolute."""
    path = path.resolve()
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


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


def main() -> int:
    d = GatewayAuditConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=d.requests)
    parser.add_argument("--offset", type=int, default=d.offset, help="first golden NQ question")
    parser.add_argument("--budget", type=float, default=d.budget)
    parser.add_argument("--scorer", default=d.scorer)
    parser.add_argument("--log", type=Path, default=REPO / d.log, help="where the gateway writes its request log")
    parser.add_argument("--out", type=Path, default=REPO / d.report_dir, help="the audit report's folder")
    parser.add_argument("-o", "--output", type=Path, default=RESULTS / "audit_gateway.json")
    parser.add_argument("--no-planner", action="store_true", help="audit without the H200 plan and TTFT curve")
    parser.add_argument("--no-text", action="store_true", help="no prompt or document text in the report")
    parser.add_argument("--screenshot", type=Path, default=None, help="also save the report's top as this PNG")
    args = parser.parse_args()
    if os.environ.get("RAGTRIM_DATA"):  # relative to where the script was started, before the move below
        os.environ["RAGTRIM_DATA"] = str(Path(os.environ["RAGTRIM_DATA"]).resolve())
    output = in_repo(args.output)
    shot = in_repo(args.screenshot) if args.screenshot is not None else None
    extra = (() if args.no_planner else PLANNER_ARGS) + (("--no-text",) if args.no_text else ())
    cfg = GatewayAuditConfig(requests=args.requests, offset=args.offset, budget=args.budget, scorer=args.scorer,
                             log=in_repo(args.log), report_dir=in_repo(args.out), audit_args=extra)
    os.chdir(REPO)  # the data's default (../shared/data) and the paths above are the repository's
    result = run(cfg)
    result["command"] = "ragtrim " + " ".join(result.pop("argv"))
    if shot is not None:
        result["screenshot"] = str(shot)
        result["screenshot_bytes"] = screenshot(cfg.report_dir / "audit.html", shot)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    report(result)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
