"""``ragtrim gate``: judge one serving change at a time (trimmed prompts, a lower ``max_model_len``, quantized weights,
an FP8 KV cache, another runtime) against a baseline on a golden set, as the operator's CI step.

Each arm is an OpenAI-compatible endpoint (optionally with ragtrim's trim on the client side, or a ragtrim gateway
in front). The gate measures accuracy (exact match, token F1, contains), refusals of unanswerable questions, JSON
format compliance, TTFT, latency, output speed and tokens; compares each change with the baseline item by item
(McNemar, paired bootstrap); and passes or fails it against thresholds. ``run_gate(items, arms, out_dir)`` returns
the report; the command is ``ragtrim gate run``. The HTTP client needs the ``serve`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragtrim.gate.arms import Arm, ArmsFile, TrimSpec, load_arms, redact_url
    from ragtrim.gate.builders import JSON_ANSWER_SCHEMA, golden_from_log, golden_from_squad
    from ragtrim.gate.client import ArmNotReady
    from ragtrim.gate.core import run_gate, write_report
    from ragtrim.gate.golden import GoldenItem, load_golden, write_golden
    from ragtrim.gate.judging import JudgeConfig
    from ragtrim.gate.records import RequestRecord
    from ragtrim.gate.runner import RunConfig
    from ragtrim.gate.scoring import Judgement, exact_match, is_refusal, judge, token_f1
    from ragtrim.gate.verdict import Thresholds

# Loaded on first use, so that `ragtrim --help` and the CLI's start pay for none of it.
_MODULES = {
    "Arm": "arms",
    "ArmNotReady": "client",
    "ArmsFile": "arms",
    "GoldenItem": "golden",
    "JSON_ANSWER_SCHEMA": "builders",
    "JudgeConfig": "judging",
    "Judgement": "scoring",
    "RequestRecord": "records",
    "RunConfig": "runner",
    "Thresholds": "verdict",
    "TrimSpec": "arms",
    "exact_match": "scoring",
    "golden_from_log": "builders",
    "golden_from_squad": "builders",
    "is_refusal": "scoring",
    "judge": "scoring",
    "load_arms": "arms",
    "load_golden": "golden",
    "redact_url": "arms",
    "run_gate": "core",
    "token_f1": "scoring",
    "write_golden": "golden",
    "write_report": "core",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "JSON_ANSWER_SCHEMA",
    "Arm",
    "ArmNotReady",
    "ArmsFile",
    "GoldenItem",
    "JudgeConfig",
    "Judgement",
    "RequestRecord",
    "RunConfig",
    "Thresholds",
    "TrimSpec",
    "exact_match",
    "golden_from_log",
    "golden_from_squad",
    "is_refusal",
    "judge",
    "load_arms",
    "load_golden",
    "redact_url",
    "run_gate",
    "token_f1",
    "write_golden",
    "write_report",
]
