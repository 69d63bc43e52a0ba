"""The opt-in JSONL request log: one line per request with ids, token counts per part, outcome and timings.

Prompt text is written only with ``log_text = true`` (the forwarded request) or ``log_request = true`` (the request
as the client sent it, an OpenAI body under ``request``): the input for ``ragtrim audit``. Without ``log_text`` no
client text reaches the log through other fields either: error messages that quote the request, model names and
removed field names that are not plain identifiers are left out. Lines are encoded and written by one background
thread, so a large body never costs the event loop its JSON encoding.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from ragtrim._util import gcclock
from ragtrim._util.redact import redact
from ragtrim.serve.admission import Identity
from ragtrim.serve.render import Prepared
from ragtrim.serve.responses import GatewayError

# What a model id or a field name looks like; anything else may be client text.
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")
REDACTED = "<redacted>"


def identifier_or_redacted(value: Any) -> Any:
    """``value`` when it is a plain identifier (a model id, a field name), else ``"<redacted>"`` (None stays)."""
    if value is None:
        return None
    return value if isinstance(value, str) and _IDENTIFIER.fullmatch(value) else REDACTED


@dataclass(slots=True)
class Record:
    """What one request did; fills in as the request moves, then goes to metrics and the log."""

    request_id: str
    endpoint: str
    started: float
    identity: Identity | None = None
    outcome: str = "ok"
    status: int = 200
    prepared: Prepared | None = None
    upstream: str = ""
    queue_ms: float = 0.0
    upstream_ttft_ms: float | None = None
    completion_tokens: int | None = None
    charged_tokens: int = 0
    charged: bool = False  # the rate store holds this request's charge (so a refund gives it back)
    sent: bool = False  # the request went to an upstream (from then on, a client that leaves keeps its charge)
    upstream_done: bool = False  # the upstream finished with it (auto's count of requests in flight upstream)
    error: str = ""
    error_code: str | None = None
    error_client_text: bool = False
    gc_paused_s: float = field(default_factory=gcclock.paused_s)  # the process's GC stops so far, at the start
    extra: dict[str, Any] = field(default_factory=dict)

    def fail(self, exc: GatewayError) -> None:
        self.outcome, self.status, self.error = exc.outcome, exc.status, str(exc)
        self.error_code, self.error_client_text = exc.code, exc.client_text


class RequestLog:
    def __init__(self, path: str, *, log_text: bool = False, log_request: bool = False) -> None:
        self.path = path
        self.log_text = log_text
        self.log_request = log_request
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[dict[str, Any], bytes | None] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None

    def entry(self, rec: Record, now: float) -> dict[str, Any]:
        ident = rec.identity
        p = rec.prepared
        e: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "request_id": rec.request_id,
            "endpoint": rec.endpoint,
            "user": ident.user if ident else None,
            "org": ident.org if ident else None,
            "key_id": ident.key_id if ident else None,
            "outcome": rec.outcome,
            "status": rec.status,
            "upstream": rec.upstream or None,
            "error": (redact(rec.error) or None) if self.log_text or not rec.error_client_text else None,
            "error_code": rec.error_code,
            "timings_ms": {
                "total": round((now - rec.started) * 1000, 3),
                "trim": round(p.trim_ms, 3) if p else None,
                "queue": round(rec.queue_ms, 3),
                "upstream_ttft": round(rec.upstream_ttft_ms, 3) if rec.upstream_ttft_ms is not None else None,
                "gc": round((gcclock.paused_s() - rec.gc_paused_s) * 1000, 3),
            },
        }
        if p is not None and p.trim_stage_seconds:  # the documents' trim: "pipeline" (all of it), then each stage
            e["timings_ms"]["trim_stages"] = {stage: round(s * 1000, 3) for stage, s in p.trim_stage_seconds}
        if p is not None and p.recipe:  # trim.scorer = "auto": what it chose for this request, and why
            e["recipe"] = {"name": p.recipe, "reason": p.recipe_reason}
        if p is not None:
            model = p.body.get("model")
            e["model"] = model if self.log_text else identifier_or_redacted(model)
            e["stream"] = p.stream
            e["tokens"] = {
                "prompt_before": p.prompt_tokens_before, "prompt_after": p.prompt_tokens, "saved": p.tokens_saved,
                "documents_before": p.document_tokens_before, "documents_after": p.document_tokens_after,
                "history_before": p.history_tokens_before, "history_after": p.history_tokens_after,
                "max_output": p.max_output_tokens, "completion": rec.completion_tokens,
                "charged": rec.charged_tokens,
            }
            e["documents"] = {"received": p.documents, "kept": p.documents_kept}
            e["history_turns_folded"] = p.history_turns_folded
            e["removed_fields"] = (list(p.removed_fields) if self.log_text
                                   else [identifier_or_redacted(f) for f in p.removed_fields])
            if self.log_text:
                e["forwarded"] = p.body
        return e

    def write(self, rec: Record, now: float) -> None:
        """Queue one line; the writer thread decodes the request body (``log_request``), encodes and writes it."""
        raw = rec.extra.get("request_body")
        self._queue.put((self.entry(rec, now), raw if self.log_request and isinstance(raw, bytes) else None))
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._run, name="ragtrim-request-log", daemon=True)
                    self._writer.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            entry, raw = item
            if raw is not None:
                try:
                    entry["request"] = json.loads(raw)
                except (ValueError, RecursionError):  # logged as sent, so that a bad request can be read back
                    entry["request"] = raw.decode("utf-8", "replace")
            try:
                line = json.dumps(entry, ensure_ascii=False, default=str)
            except (ValueError, RecursionError):  # a body nested past the encoder's limit
                entry["request"] = raw.decode("utf-8", "replace") if raw is not None else None
                line = json.dumps(entry, ensure_ascii=False, default=str)
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (kept open)
            self._file.write(line + "\n")

    def close(self) -> None:
        """Write what is queued, then close the file."""
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            self._queue.put(None)
            writer.join(timeout=30)
        if self._file is not None:
            self._file.close()
            self._file = None
