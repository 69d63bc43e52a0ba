"""What ragtrim would save: its pipeline (with the history stage) run on a uniform sample of the log's requests,
tokens saved per part and per stage with bootstrap 95 % intervals, then what that buys on a GPU through the
capacity planner (``ragtrim.plan``) and a measured TTFT-vs-prompt-tokens curve.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrim._util.stats import percentile
from ragtrim.audit.reader import PARTS, AuditRequest, Part
from ragtrim.errors import ConfigError, InputError
from ragtrim.text.tokens import TokenCounter


@dataclass(frozen=True, kw_only=True)
class SavingsConfig:
    """``sample``: requests to trim (0: every request); ``budget``: a share of each request's context tokens
    (0 < budget < 1) or a token count, ``None`` for the lossless stages only (HTML cleanup, duplicates);
    ``history_turns``: turns the history stage keeps verbatim."""

    sample: int = 200
    seed: int = 0
    budget: float | None = None
    scorer: str = "bm25"
    history_turns: int = 4
    bootstrap: int = 1000

    def __post_init__(self) -> None:
        if isinstance(self.sample, bool) or not isinstance(self.sample, int) or self.sample < 0:
            raise ConfigError(f"sample must be an integer >= 0 (0: every request), got {self.sample!r}")
        if self.budget is not None and not (self.budget > 0 and (self.budget < 1 or float(self.budget).is_integer())):
            raise ConfigError(f"budget must be a share in (0, 1) or a whole number of tokens >= 1, got {self.budget!r}")
        if self.history_turns < 1:
            raise ConfigError(f"history_turns must be >= 1, got {self.history_turns}")
        if self.bootstrap < 0:
            raise ConfigError(f"bootstrap must be >= 0, got {self.bootstrap}")


class PrioritySample:
    """A uniform random sample of ``size`` requests (all of them for ``size=0``), reproducible for a seed: each
    request gets a priority from a hash of the seed and its position in the input, and the sample is the ``size``
    lowest (a bottom-k sample). It does not depend on how the input was split: the sample of two stretches is the
    lowest ``size`` of their two samples (``absorb``)."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.seed = seed
        self.seen = 0
        self._heap: list[tuple[int, tuple[int, int], Any]] = []  # (-priority, position, item): the largest on top

    def priority(self, position: tuple[int, int]) -> int:
        digest = hashlib.blake2b(f"{self.seed}:{position[0]}:{position[1]}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big")

    def offer(self, position: tuple[int, int], item: Any) -> None:
        self.seen += 1
        self._push((-self.priority(position), position, item))

    def _push(self, entry: tuple[int, tuple[int, int], Any]) -> None:
        if self.size == 0 or len(self._heap) < self.size:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def absorb(self, other: PrioritySample) -> None:
        self.seen += other.seen
        for entry in other._heap:
            self._push(entry)

    @property
    def items(self) -> list[Any]:
        """The sampled items in input order."""
        return [item for _, _, item in sorted(self._heap, key=lambda e: e[1])]


@dataclass(frozen=True, slots=True)
class SampleRecord:
    request_id: str
    before: Mapping[Part, int]
    saved: Mapping[Part, int]
    saved_by_stage: Mapping[str, int]
    output_tokens: int
    trim_ms: float

    @property
    def prompt_before(self) -> int:
        return sum(self.before.values())

    @property
    def prompt_after(self) -> int:
        return self.prompt_before - sum(self.saved.values())


def _budget_for(budget: float | None, context_tokens: int) -> int | None:
    if budget is None:
        return None
    return math.ceil(budget * context_tokens) if budget < 1 else int(budget)


def measure(req: AuditRequest, before: Mapping[Part, int], output_tokens: int, counter: TokenCounter,
            cfg: SavingsConfig) -> SampleRecord:
    """Run ragtrim on one request: the default pipeline on its context, the history stage on its earlier turns."""
    from ragtrim.api import default_pipeline
    from ragtrim.pipeline import Pipeline
    from ragtrim.stages.history import HistoryCompressor

    chunks = [{"id": str(i), "text": s.text} for i, s in enumerate(req.segments) if s.part == "context"]
    history = [{"role": s.role or "user", "content": s.text} for s in req.segments if s.part == "history"]
    stages = default_pipeline(budget=_budget_for(cfg.budget, before["context"]), scorer=cfg.scorer,  # type: ignore[arg-type]
                              tokenizer=counter).stages
    pipeline = Pipeline([HistoryCompressor(keep_last_turns=cfg.history_turns), *stages], tokenizer=counter)
    t0 = time.perf_counter()
    result = pipeline.run(chunks, query=req.question, history=history)
    trim_ms = (time.perf_counter() - t0) * 1000
    context_after = sum(counter.count(c.text) for c in result.chunks)
    history_after = before["history"]
    by_stage: dict[str, int] = {}
    for report in result.trace:
        if report.stage == "history":
            if report.info.get("folded_turn_ids"):
                history_after = sum(counter.count(m.content) for m in result.context.history) + counter.count(
                    str(report.info.get("state_text", "")))
            by_stage["history"] = before["history"] - history_after  # < 0 when the state outweighs the turns
        else:
            by_stage[report.stage] = by_stage.get(report.stage, 0) + report.tokens_saved
    saved: dict[Part, int] = dict.fromkeys(PARTS, 0)
    saved["context"] = before["context"] - context_after
    saved["history"] = before["history"] - history_after
    return SampleRecord(req.request_id, dict(before), saved, by_stage, output_tokens, trim_ms)


def _ratio_ci(befores: Sequence[int], saveds: Sequence[int], rounds: int, seed: int) -> tuple[float, float, float]:
    """sum(saved) / sum(before) and its bootstrap 95 % percentile interval (``rounds`` resamples of the requests)."""
    import numpy as np

    total = sum(befores)
    ratio = sum(saveds) / total if total else 0.0
    n = len(befores)
    if rounds == 0 or n < 2:
        return ratio, ratio, ratio
    idx = np.random.default_rng(seed).integers(0, n, size=(rounds, n))
    b = np.asarray(befores, dtype=np.float64)[idx].sum(axis=1)
    s = np.asarray(saveds, dtype=np.float64)[idx].sum(axis=1)
    stats = np.divide(s, b, out=np.zeros_like(s), where=b > 0).tolist()
    return ratio, percentile(stats, 2.5), percentile(stats, 97.5)


def summarize_savings(records: Sequence[SampleRecord], log_part_totals: Mapping[Part, int], log_requests: int,
                      cfg: SavingsConfig) -> dict[str, Any]:
    """Per part: the share of its tokens ragtrim saves in the sample (with its interval) and that share applied to
    the whole log's tokens of the part; the same for the whole prompt and per stage."""
    if not records:
        return {"sampled_requests": 0, "note": "no requests to trim"}
    exact = len(records) >= log_requests
    rounds = 0 if exact else cfg.bootstrap
    parts: dict[str, Any] = {}
    for p in PARTS:
        ratio, lo, hi = _ratio_ci([r.before[p] for r in records], [r.saved[p] for r in records], rounds, cfg.seed)
        parts[p] = {"sample_tokens_before": sum(r.before[p] for r in records),
                    "sample_tokens_saved": sum(r.saved[p] for r in records),
                    "saved_share": round(ratio, 4), "saved_share_ci95": [round(lo, 4), round(hi, 4)],
                    "log_tokens_saved_estimate": round(ratio * log_part_totals[p]),
                    "log_tokens_saved_ci95": [round(lo * log_part_totals[p]), round(hi * log_part_totals[p])]}
    log_total = sum(log_part_totals.values())
    ratio, lo, hi = _ratio_ci([r.prompt_before for r in records], [sum(r.saved.values()) for r in records], rounds,
                                cfg.seed)
    stages = sorted({s for r in records for s in r.saved_by_stage})
    sample_before = sum(r.prompt_before for r in records)
    by_stage = {s: {"sample_tokens_saved": sum(r.saved_by_stage.get(s, 0) for r in records),
                    "saved_share_of_prompt": round(sum(r.saved_by_stage.get(s, 0) for r in records) / sample_before, 4)
                    if sample_before else 0.0} for s in stages}
    trims = [r.trim_ms for r in records]
    return {
        "sampled_requests": len(records),
        "exact": exact,
        "interval": "exact (every request trimmed)" if exact else
                    f"bootstrap 95 % percentile interval over the sample ({cfg.bootstrap} resamples, seed {cfg.seed})",
        "config": {"budget": cfg.budget, "scorer": cfg.scorer, "history_turns": cfg.history_turns,
                   "sample": cfg.sample, "seed": cfg.seed},
        "parts": parts,
        "prompt": {"saved_share": round(ratio, 4), "saved_share_ci95": [round(lo, 4), round(hi, 4)],
                   "log_tokens_saved_estimate": round(ratio * log_total),
                   "log_tokens_saved_ci95": [round(lo * log_total), round(hi * log_total)]},
        "by_stage": by_stage,
        "prompt_tokens_before_per_request": _summary([r.prompt_before for r in records]),
        "prompt_tokens_after_per_request": _summary([r.prompt_after for r in records]),
        "trim_ms_per_request": _summary(trims),
        "top_saved": [{"request_id": r.request_id, "tokens_saved": sum(r.saved.values()),
                       "tokens_before": r.prompt_before}
                      for r in sorted(records, key=lambda r: -sum(r.saved.values()))[:10]],
    }


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {"mean": round(sum(values) / len(values), 3), "p50": round(percentile(values, 50), 3),
            "p95": round(percentile(values, 95), 3), "p99": round(percentile(values, 99), 3),
            "max": round(max(values), 3)}


# -- TTFT ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TTFTCurve:
    """Measured (prompt tokens, TTFT ms) points; ``ttft_ms`` interpolates linearly, holds the first value below the
    first point (the floor) and extends the last segment's slope above the last point."""

    points: tuple[tuple[float, float], ...]
    source: str

    def __post_init__(self) -> None:
        if len(self.points) < 2:
            raise ConfigError(f"a TTFT curve needs at least 2 points, got {len(self.points)} from {self.source}")

    def ttft_ms(self, tokens: float) -> float:
        pts = self.points
        if tokens <= pts[0][0]:
            return pts[0][1]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            if tokens <= x1:
                return y0 + (y1 - y0) * (tokens - x0) / (x1 - x0) if x1 > x0 else y1
        (x0, y0), (x1, y1) = pts[-2], pts[-1]
        return y1 + (y1 - y0) / (x1 - x0) * (tokens - x1) if x1 > x0 else y1

    @classmethod
    def load(cls, path: str | Path, *, config: str | None = None) -> TTFTCurve:
        """A JSON list of ``{"prompt_tokens", "ttft_ms"}`` objects or ``[tokens, ms]`` pairs (or ``{"points": ...}``),
        or the GPU harness's summary.json: the ``len_*`` arms of ``single_request`` for ``config`` (default: the
        first config that has them), p50 TTFT."""
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"TTFT curve {str(path)!r} cannot be read as JSON: {exc}") from None
        source = str(path)
        if isinstance(raw, dict) and isinstance(raw.get("single_request"), list):
            rows = [r for r in raw["single_request"] if isinstance(r, dict) and str(r.get("arm", "")).startswith("len_")]
            names = list(dict.fromkeys(str(r.get("config")) for r in rows))
            chosen = config or (names[0] if names else None)
            if chosen not in names:
                raise InputError(f"TTFT curve {source!r} has no len_* rows for config {chosen!r}; configs: {names}")
            raw = [(r["mean_prompt_tokens"], r["p50_ttft_ms"]) for r in rows if r.get("config") == chosen]
            source = f"{source} ({chosen}, p50 TTFT of the len_* arms)"
        elif isinstance(raw, dict) and isinstance(raw.get("points"), list):
            raw = raw["points"]
        if not isinstance(raw, list):
            raise InputError(f"TTFT curve {source!r} must be a list of points or a GPU summary.json")
        points = []
        for p in raw:
            if isinstance(p, dict):
                p = (p.get("prompt_tokens"), p.get("ttft_ms"))
            if not (isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, (int, float)) for v in p)):
                raise InputError(f"TTFT curve {source!r}: each point needs prompt_tokens and ttft_ms numbers, got {p!r}")
            points.append((float(p[0]), float(p[1])))
        return cls(tuple(sorted(points)), source)


def ttft_change(records: Sequence[SampleRecord], curve: TTFTCurve) -> dict[str, Any]:
    before = [curve.ttft_ms(r.prompt_before) for r in records]
    after = [curve.ttft_ms(r.prompt_after) for r in records]
    saved = [b - a for b, a in zip(before, after, strict=True)]
    return {"curve": curve.source, "points": [list(p) for p in curve.points],
            "ttft_ms_before": _summary(before), "ttft_ms_after": _summary(after), "ttft_ms_saved": _summary(saved),
            "note": "prefill time from the curve at each sampled request's prompt size, before and after trimming; "
                    "ragtrim's own time is trim_ms_per_request"}
