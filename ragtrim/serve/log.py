"""The opt-in JSONL request log: one line per request with ids, token counts per part, outcome and timings.

Prompt text is written only with ``log_text = true`` (the forwarded request) or ``log_request = true`` (the request
as the client sent it, an OpenAI body under ``request``): the input for ``ragtrim audit``.
"""

from __future__ import annotations

import json
import threading
import time
from typing import IO, Any, Protocol


class _Record(Protocol):
    request_id: str
    endpoint: str
    started: float
    outcome: str
    status: int
    upstream: str
    queue_ms: float
    upstream_ttft_ms: float | None
    completion_tokens: int | None
    charged_tokens: int
    error: str
    extra: dict[str, Any]

    @property
    def identity(self) -> Any: ...

    @property
    def prepared(self) -> Any: ...


class RequestLog:
    def __init__(self, path: str, *, log_text: bool = False, log_request: bool = False) -> None:
        self.path = path
        self.log_text = log_text
        self.log_request = log_request
        self._file: IO[str] | None = None
        self._lock = threading.Lock()

    def entry(self, rec: _Record, now: float) -> dict[str, Any]:
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
            "error": rec.error or None,
            "timings_ms": {
                "total": round((now - rec.started) * 1000, 3),
                "trim": round(p.trim_ms, 3) if p else None,
                "queue": round(rec.queue_ms, 3),
                "upstream_ttft": round(rec.upstream_ttft_ms, 3) if rec.upstream_ttft_ms is not None else None,
            },
        }
        if p is not None:
            e["model"] = p.body.get("model")
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
            e["removed_fields"] = list(p.removed_fields)
            if self.log_text:
                e["forwarded"] = p.body
        raw = rec.extra.get("request_body")
        if self.log_request and isinstance(raw, bytes):
            try:
                e["request"] = json.loads(raw)
            except ValueError:  # logged as sent, so that a bad request can be read back
                e["request"] = raw.decode("utf-8", "replace")
        return e

    def write(self, rec: _Record, now: float) -> None:
        line = json.dumps(self.entry(rec, now), ensure_ascii=False, default=str)
        with self._lock:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (kept open)
            self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
