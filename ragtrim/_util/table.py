"""Plain-text tables for reports (pure: returns a string, prints nothing)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "inf"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Render ``rows`` with ``columns`` given as ``(key, header)``; numbers right-aligned."""
    header = [h for _, h in columns]
    body = [[_fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in body)) if body else len(h) for i, h in enumerate(header)]
    numeric = [all(_is_num(r.get(k)) for r in rows) and bool(rows) for k, _ in columns]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(b) for b in body)])


def _is_num(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
