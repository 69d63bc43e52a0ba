"""``ragtrim audit``: where a service's prompt tokens go (system prompt, history, retrieved context, question), what
a prefix cache could serve, and what ragtrim would save, from a log of requests (OpenAI, Anthropic, batch lines, the
gateway's log or a vLLM server log).

``run_audit(path, AuditConfig(...))`` returns the report as a dict; ``write_report`` writes its JSON and HTML.
Importing this package loads no numpy and no model: the heavy parts load when an audit runs.
"""

from __future__ import annotations

from ragtrim.audit.capacity import PlannerConfig
from ragtrim.audit.config import AuditConfig
from ragtrim.audit.core import PLOTS, run_audit, write_report
from ragtrim.audit.formats import READ_FORMATS, REFUSED_FORMATS, UnsupportedLogFormat
from ragtrim.audit.reader import PARTS, AuditRequest, EmptyLogError, Segment, parse_request, read_requests
from ragtrim.audit.savings import SavingsConfig, TTFTCurve

__all__ = [
    "PARTS",
    "PLOTS",
    "READ_FORMATS",
    "REFUSED_FORMATS",
    "AuditConfig",
    "AuditRequest",
    "EmptyLogError",
    "PlannerConfig",
    "SavingsConfig",
    "Segment",
    "TTFTCurve",
    "UnsupportedLogFormat",
    "parse_request",
    "read_requests",
    "run_audit",
    "write_report",
]
