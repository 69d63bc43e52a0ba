"""Workload side of the planner: token-length percentiles of a workload, from numbers, a JSONL request log, or the
QA savings benchmark's per-request records (untrimmed and trimmed side by side).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from ragtrim._util.jsonl import iter_jsonl
from ragtrim._util.stats import percentile
from ragtrim.errors import ConfigError, InputError

MaxLenPercentile = Literal[95, 99]


def _ptok(values: Sequence[int], q: float) -> int:
    return math.ceil(percentile(values, q) - 1e-9)


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Token-length distribution of a workload. ``total_*`` are percentiles of input+output per request, when known."""

    name: str
    input_p50_tokens: int
    input_p95_tokens: int
    output_p50_tokens: int
    output_p95_tokens: int
    input_p99_tokens: int | None = None
    output_p99_tokens: int | None = None
    total_p95_tokens: int | None = None
    total_p99_tokens: int | None = None
    requests: int | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "name" or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(
                    f"{f.name} must be a non-negative integer, got {value!r} in workload {self.name!r}"
                )
        if self.input_p95_tokens < self.input_p50_tokens:
            raise ConfigError(
                f"input_p95_tokens ({self.input_p95_tokens}) must be >= input_p50_tokens ({self.input_p50_tokens}) "
                f"in workload {self.name!r}"
            )
        if self.output_p95_tokens < self.output_p50_tokens:
            raise ConfigError(
                f"output_p95_tokens ({self.output_p95_tokens}) must be >= output_p50_tokens "
                f"({self.output_p50_tokens}) in workload {self.name!r}"
            )
        if self.input_p95_tokens + self.output_p95_tokens == 0:
            raise ConfigError(f"workload {self.name!r} has zero tokens at p95; give real token counts")

    @property
    def request_p95_tokens(self) -> int:
        """The p95 request shape: input p95 + output p95 (a conservative pairing)."""
        return self.input_p95_tokens + self.output_p95_tokens

    def total_tokens_at(self, pct: MaxLenPercentile) -> tuple[int, str]:
        """Input+output at the percentile, and how it was obtained (per-request sums beat summed percentiles)."""
        if pct == 99:
            if self.total_p99_tokens is not None:
                return self.total_p99_tokens, "p99 of per-request input+output"
            if self.input_p99_tokens is not None and self.output_p99_tokens is not None:
                return self.input_p99_tokens + self.output_p99_tokens, "input p99 + output p99"
        if self.total_p95_tokens is not None:
            return self.total_p95_tokens, "p95 of per-request input+output"
        return self.request_p95_tokens, "input p95 + output p95"

    @classmethod
    def from_percentiles(
        cls,
        *,
        name: str,
        input_p50_tokens: int,
        input_p95_tokens: int,
        output_p95_tokens: int,
        output_p50_tokens: int | None = None,
        input_p99_tokens: int | None = None,
        output_p99_tokens: int | None = None,
    ) -> Workload:
        return cls(
            name=name,
            input_p50_tokens=input_p50_tokens,
            input_p95_tokens=input_p95_tokens,
            output_p50_tokens=output_p95_tokens if output_p50_tokens is None else output_p50_tokens,
            output_p95_tokens=output_p95_tokens,
            input_p99_tokens=input_p99_tokens,
            output_p99_tokens=output_p99_tokens,
        )

    @classmethod
    def from_requests(cls, pairs: Sequence[tuple[int, int]], *, name: str) -> Workload:
        """From per-request (input_tokens, output_tokens) pairs."""
        if not pairs:
            raise InputError(f"workload {name!r} has no requests; give at least one (input, output) pair")
        ins = [p[0] for p in pairs]
        outs = [p[1] for p in pairs]
        totals = [a + b for a, b in pairs]
        return cls(
            name=name,
            input_p50_tokens=_ptok(ins, 50),
            input_p95_tokens=_ptok(ins, 95),
            input_p99_tokens=_ptok(ins, 99),
            output_p50_tokens=_ptok(outs, 50),
            output_p95_tokens=_ptok(outs, 95),
            output_p99_tokens=_ptok(outs, 99),
            total_p95_tokens=_ptok(totals, 95),
            total_p99_tokens=_ptok(totals, 99),
            requests=len(pairs),
        )

    @classmethod
    def from_jsonl(
        cls,
        path: str | Path,
        *,
        input_field: str = "prompt_tokens",
        output_field: str = "output_tokens",
        name: str | None = None,
    ) -> Workload:
        """One JSON object per line with integer ``input_field`` and ``output_field``; blank lines are skipped.
        The file is UTF-8, gzip-compressed when its name ends in ``.gz``; errors name the file and the line."""
        p = Path(path)
        pairs = [(_int_field(rec, input_field, f"{p}:{n}"), _int_field(rec, output_field, f"{p}:{n}"))
                 for n, rec in iter_jsonl(p, what="workload file")]
        return cls.from_requests(pairs, name=name or p.stem)

    @classmethod
    def from_qa_results(
        cls,
        path: str | Path,
        *,
        before_field: str = "tokens_before",
        after_field: str = "tokens_after",
        output_field: str = "output_tokens",
        default_output_tokens: int = 32,
        records_key: str | None = None,
    ) -> tuple[Workload, Workload]:
        """(untrimmed, trimmed) workloads from the QA savings benchmark's per-request records.

        The file is a list of records, or an object holding one (``records_key``, else the first list of objects
        that carries ``before_field``). Output tokens come from ``output_field`` when a record has it, else
        ``default_output_tokens``.
        """
        p = Path(path)
        try:
            raw = json.loads(_read_text(p))
        except json.JSONDecodeError as exc:
            raise InputError(f"QA results {str(p)!r} are not valid JSON: {exc}") from None
        records = _find_records(raw, before_field, records_key, p)
        before: list[tuple[int, int]] = []
        after: list[tuple[int, int]] = []
        for i, rec in enumerate(records):
            where = f"{p} record {i}"
            out = (
                _int_field(rec, output_field, where)
                if isinstance(rec, dict) and output_field in rec
                else None
            )
            out_tokens = default_output_tokens if out is None else out
            before.append((_int_field(rec, before_field, where), out_tokens))
            after.append((_int_field(rec, after_field, where), out_tokens))
        return (
            cls.from_requests(before, name="untrimmed"),
            cls.from_requests(after, name="trimmed"),
        )

    def scaled_input(self, ratio: float, *, name: str) -> Workload:
        """The same workload with every input length divided by ``ratio`` (rounded up), e.g. a 4x trim."""
        if not 0 < ratio < math.inf:
            raise ConfigError(f"trim ratio must be a finite number > 0, got {ratio}")

        def s(v: int | None) -> int | None:
            return None if v is None else math.ceil(v / ratio)

        return dataclasses.replace(
            self,
            name=name,
            input_p50_tokens=math.ceil(self.input_p50_tokens / ratio),
            input_p95_tokens=math.ceil(self.input_p95_tokens / ratio),
            input_p99_tokens=s(self.input_p99_tokens),
            total_p95_tokens=None,  # per-request sums are unknown after scaling; fall back to summed percentiles
            total_p99_tokens=None,
        )


def _read_text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"workload file {str(p)!r} does not exist") from None


def _int_field(rec: Any, key: str, where: str) -> int:
    if not isinstance(rec, dict):
        raise InputError(f"{where} must be a JSON object, got {type(rec).__name__}")
    if key not in rec:
        raise InputError(f"{where} has no field {key!r} (fields: {sorted(rec)[:10]}); name the field to read")
    value = rec[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise InputError(f"{where} field {key!r} must be a non-negative whole number, got {value!r}")
    return int(value)


def _find_records(raw: Any, field_name: str, records_key: str | None, p: Path) -> list[Any]:
    if records_key is not None:
        if not isinstance(raw, dict) or not isinstance(raw.get(records_key), list):
            raise InputError(f"QA results {str(p)!r} have no list under {records_key!r}")
        return cast(list[Any], raw[records_key])
    if isinstance(raw, list):
        return raw
    if isinstance(raw, dict):
        for value in raw.values():
            if isinstance(value, list) and value and isinstance(value[0], dict) and field_name in value[0]:
                return value
    raise InputError(
        f"QA results {str(p)!r} hold no list of records with {field_name!r}; pass records_key or the field names"
    )
