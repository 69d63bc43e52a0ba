"""``ragtrim audit``: where a service's prompt tokens go (system prompt, history, retrieved context, question), what
a prefix cache could serve, and what ragtrim would save, from a log of OpenAI-format requests.

``run_audit(path, AuditConfig(...))`` returns the report as a dict; ``write_report`` writes its JSON and HTML.
Names load on first access, so ``ragtrim --help`` does not pay for the audit's modules.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "PARTS": "ragtrim.audit.reader",
    "PLOTS": "ragtrim.audit.core",
    "AuditConfig": "ragtrim.audit.core",
    "AuditRequest": "ragtrim.audit.reader",
    "PlannerConfig": "ragtrim.audit.capacity",
    "SavingsConfig": "ragtrim.audit.savings",
    "Segment": "ragtrim.audit.reader",
    "TTFTCurve": "ragtrim.audit.savings",
    "parse_request": "ragtrim.audit.reader",
    "read_requests": "ragtrim.audit.reader",
    "run_audit": "ragtrim.audit.core",
    "write_report": "ragtrim.audit.core",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragtrim.audit' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "PARTS",
    "PLOTS",
    "AuditConfig",
    "AuditRequest",
    "PlannerConfig",
    "SavingsConfig",
    "Segment",
    "TTFTCurve",
    "parse_request",
    "read_requests",
    "run_audit",
    "write_report",
]
