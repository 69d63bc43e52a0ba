"""Where the prompt tokens go: exact token counts per part for every request, their distributions, the largest
requests, and how histories grow per conversation. Memory stays bounded: distributions are exact histograms.

Each aggregate can ``absorb`` the aggregate of a later stretch of the input (another file, or a later byte range of
the same file, read by another process): the result is exactly what one pass over both stretches gives. Integer
histograms add up, top lists break ties by position in the input, and conversations that cross the boundary are
joined (``ConversationGrowth``).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Any

from ragtrim.audit.reader import PARTS, AuditRequest, Part
from ragtrim.text.tokens import TokenCounter, count_batch

TOP_K = 10
Position = tuple[int, int]
"""Where a request is in the audited input: the file's place among the logs given (0 for the first), and its line."""
SHARE_BINS = 10_000
"""Per-request shares are kept in basis points (0.01 %), so their percentiles are exact to that resolution."""


class CountCache:
    """Token counts of texts, each distinct text encoded once (batched), keyed by the text's hash.

    Bounded: past ``max_entries`` the oldest half is forgotten (a forgotten text is counted again, never guessed).
    Keys are Python's 64-bit string hashes; two different texts would have to collide to share a count.
    """

    def __init__(self, counter: TokenCounter, *, max_entries: int = 1_000_000, num_threads: int = 2) -> None:
        self.counter = counter
        self.max_entries = max_entries
        self.num_threads = num_threads
        self._counts: dict[int, int] = {}
        self.texts_encoded = 0
        self.chars_encoded = 0
        self.lookups = 0

    def counts(self, texts: Sequence[str]) -> list[int]:
        cache = self._counts
        keys = [hash(t) for t in texts]
        missing: dict[int, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in cache and k not in missing:
                missing[k] = t
        if missing:
            fresh = count_batch(self.counter, list(missing.values()), num_threads=self.num_threads)
            cache.update(zip(missing, fresh, strict=True))
            self.texts_encoded += len(missing)
            self.chars_encoded += sum(map(len, missing.values()))
        self.lookups += len(keys)
        out = [cache[k] for k in keys]
        if len(cache) > self.max_entries:
            for k in list(islice(cache, len(cache) // 2)):
                del cache[k]
        return out

    def stats(self) -> dict[str, Any]:
        return {"distinct_texts_encoded": self.texts_encoded, "chars_encoded": self.chars_encoded,
                "text_lookups": self.lookups, "cache_entries": len(self._counts)}


def add_stats(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Counting statistics of two processes added up (``CountCache.stats`` of each)."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in dict.fromkeys([*a, *b])}


class Histogram:
    """An exact histogram of non-negative integers: percentiles equal those of the full list of values."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.n = 0
        self.total = 0

    def add(self, value: int) -> None:
        self.counts[value] += 1
        self.n += 1
        self.total += value

    def absorb(self, other: Histogram) -> None:
        """Add ``other``'s values (exact: a histogram of integers is its own mergeable summary)."""
        self.counts.update(other.counts)
        self.n += other.n
        self.total += other.total

    def percentile(self, q: float) -> float:
        """Linear interpolation between closest ranks (numpy's default, as ``ragtrim.plan.percentile``)."""
        if not self.n:
            return math.nan
        pos = (self.n - 1) * q / 100
        lo, hi = math.floor(pos), math.ceil(pos)
        v_lo = v_hi = None
        seen = 0
        for value in sorted(self.counts):
            seen += self.counts[value]
            if v_lo is None and seen > lo:
                v_lo = value
            if seen > hi:
                v_hi = value
                break
        assert v_lo is not None and v_hi is not None  # ranks lie within n by construction
        return v_lo + (v_hi - v_lo) * (pos - lo)

    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan

    def max(self) -> int:
        return max(self.counts) if self.counts else 0

    def summary(self, scale: float = 1.0) -> dict[str, float | None]:
        return {"mean": _r(self.mean() / scale), "p50": _r(self.percentile(50) / scale),
                "p95": _r(self.percentile(95) / scale), "p99": _r(self.percentile(99) / scale),
                "max": _r(self.max() / scale)}

    def bins(self, edges: Sequence[int]) -> list[int]:
        """Counts of values in [edges[i], edges[i+1]); the last bin is open-ended."""
        out = [0] * len(edges)
        for value, c in self.counts.items():
            i = max(0, _bisect_right(edges, value) - 1)
            out[i] += c
        return out


def _bisect_right(edges: Sequence[int], value: int) -> int:
    lo, hi = 0, len(edges)
    while lo < hi:
        mid = (lo + hi) // 2
        if value < edges[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _r(x: float, digits: int = 4) -> float | None:
    """Rounded; ``None`` (JSON null) for the NaN of an empty distribution."""
    return None if math.isnan(x) else round(x, digits)


class TopK:
    """The ``k`` largest (value, request id) pairs seen; ties keep the request earlier in the input, so the list does
    not depend on the order in which stretches of the input were read and merged."""

    def __init__(self, k: int = TOP_K) -> None:
        self.k = k
        self._heap: list[tuple[int, tuple[int, int], str, dict[str, Any]]] = []  # (value, -position, id, extra)

    def beats(self, value: int) -> bool:
        """Whether ``value``, offered after everything in the list, would enter it (cheap: lets callers skip building
        the entry)."""
        return value > 0 and (len(self._heap) < self.k or value > self._heap[0][0])

    def offer(self, value: int, request_id: str, extra: Mapping[str, Any] | None = None,
              position: Position = (0, 0)) -> None:
        if value <= 0:  # a top list of zeros says nothing
            return
        self._push((value, (-position[0], -position[1]), request_id, dict(extra or {})))

    def _push(self, item: tuple[int, tuple[int, int], str, dict[str, Any]]) -> None:
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, item)
        elif item[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, item)

    def absorb(self, other: TopK) -> None:
        for item in other._heap:
            self._push(item)

    def items(self) -> list[dict[str, Any]]:
        return [{"request_id": rid, "tokens": v, **extra}
                for v, _, rid, extra in sorted(self._heap, key=lambda i: i[:2], reverse=True)]


class Breakdown:
    """Token totals and distributions per part across the log."""

    def __init__(self) -> None:
        self.requests = 0
        self.by_endpoint: Counter[str] = Counter()
        self.part_totals: dict[Part, int] = dict.fromkeys(PARTS, 0)
        self.part_hist: dict[Part, Histogram] = {p: Histogram() for p in PARTS}
        self.share_hist: dict[Part, Histogram] = {p: Histogram() for p in PARTS}
        self.prompt_hist = Histogram()
        self.output_hist = Histogram()
        self.total_hist = Histogram()  # prompt + output per request, for the planner's max_model_len
        self.documents_hist = Histogram()
        self.pretrimmed = 0
        self.top: dict[str, TopK] = {name: TopK() for name in ("prompt", "context", "history", "system")}

    def add(self, req: AuditRequest, parts: Mapping[Part, int], output_tokens: int,
            position: Position = (0, 0)) -> int:
        prompt = sum(parts.values())
        self.requests += 1
        self.by_endpoint[req.endpoint] += 1
        self.pretrimmed += req.pretrimmed
        totals, part_hist, share_hist = self.part_totals, self.part_hist, self.share_hist
        for p in PARTS:
            v = parts[p]
            totals[p] += v
            part_hist[p].add(v)
            share_hist[p].add(round(v * SHARE_BINS / prompt) if prompt else 0)
        self.prompt_hist.add(prompt)
        self.output_hist.add(output_tokens)
        self.total_hist.add(prompt + output_tokens)
        self.documents_hist.add(sum(1 for s in req.segments if s.part == "context"))
        for name, value in (("prompt", prompt), ("context", parts["context"]), ("history", parts["history"]),
                            ("system", parts["system"])):
            top = self.top[name]
            if top.beats(value):
                top.offer(value, req.request_id, {"line": req.line}, position)
        return prompt

    def absorb(self, other: Breakdown) -> None:
        self.requests += other.requests
        self.by_endpoint.update(other.by_endpoint)
        self.pretrimmed += other.pretrimmed
        for p in PARTS:
            self.part_totals[p] += other.part_totals[p]
            self.part_hist[p].absorb(other.part_hist[p])
            self.share_hist[p].absorb(other.share_hist[p])
        for mine, theirs in ((self.prompt_hist, other.prompt_hist), (self.output_hist, other.output_hist),
                             (self.total_hist, other.total_hist), (self.documents_hist, other.documents_hist)):
            mine.absorb(theirs)
        for name, top in self.top.items():
            top.absorb(other.top[name])

    def to_dict(self) -> dict[str, Any]:
        total = sum(self.part_totals.values())
        parts = {}
        for p in PARTS:
            parts[p] = {
                "tokens": self.part_totals[p],
                "share_of_total": round(self.part_totals[p] / total, 4) if total else 0.0,
                "per_request_tokens": self.part_hist[p].summary(),
                "per_request_share": self.share_hist[p].summary(scale=SHARE_BINS),
            }
        return {
            "requests": self.requests,
            "by_endpoint": dict(sorted(self.by_endpoint.items())),
            "prompt_tokens": total,
            "prompt_tokens_per_request": self.prompt_hist.summary(),
            "output_tokens_per_request": self.output_hist.summary(),
            "context_pieces_per_request": self.documents_hist.summary(),
            "parts": parts,
            "pretrimmed_requests": self.pretrimmed,
            "top_requests": {name: top.items() for name, top in self.top.items()},
        }


class ConversationGrowth:
    """History tokens per conversation, in log order: how fast histories grow and how large they get.

    A conversation is the log's explicit id, else the hash of its system prompt and first user message (every
    request of one chat repeats both); a request with no history and no id starts a new one. At most
    ``max_conversations`` are followed at once: the least recently seen is closed and folded into the statistics.

    ``mergeable``: this aggregate covers a later stretch of the input, to be absorbed by the one before it. A
    conversation whose first request here continues a chat (it has history, or an explicit id) may have begun in
    the earlier stretch, so it is held, not folded, until ``absorb`` joins it to the earlier part; the first request
    of every key is remembered for that (``first_seen``).
    """

    def __init__(self, *, max_conversations: int = 200_000, mergeable: bool = False) -> None:
        self.max_conversations = max_conversations
        self.mergeable = mergeable
        # key -> [requests, first history, last history, max history, first request id, first position, held]
        self._open: OrderedDict[int | str, list[Any]] = OrderedDict()
        self.first_seen: dict[int | str, bool] = {}  # key -> its first request here continues a chat
        self._held: dict[int | str, list[Any]] = {}  # closed here, but may continue an earlier stretch's chat
        self.started = 0
        self.closed_early = 0
        self._turns = Histogram()
        self._max_history = Histogram()
        self._growth = Histogram()  # history tokens added per request, rounded
        self._top = TopK()

    @staticmethod
    def key(req: AuditRequest) -> int | str:
        if req.conversation is not None:
            return req.conversation
        first_user = next((s.text for s in req.segments if s.role == "user" and s.part in ("history", "question")), "")
        return hash((tuple(req.texts("system")), first_user))

    def _close(self, k: int | str, c: list[Any]) -> None:
        if c[6]:
            self._held[k] = c
        else:
            self._fold(c)

    def _fold(self, c: list[Any]) -> None:
        if c[0] > 1:
            self._turns.add(c[0])
            self._max_history.add(c[3])
            self._growth.add(round(max(0, c[2] - c[1]) / (c[0] - 1)))
            self._top.offer(c[3], c[4], {"requests": c[0]}, c[5])

    def add(self, req: AuditRequest, history_tokens: int, position: Position = (0, 0)) -> None:
        k = self.key(req)
        c = self._open.get(k)
        restart = req.conversation is None and history_tokens == 0
        held = False
        if self.mergeable and k not in self.first_seen:
            self.first_seen[k] = held = not restart
        if c is not None and restart:
            # The same opening with no history: a new conversation (a repeated question), not a next turn.
            self._close(k, self._open.pop(k))
            c = None
        if c is None:
            if len(self._open) >= self.max_conversations:
                self._close(*self._open.popitem(last=False))
                self.closed_early += 1
            self.started += 1
            self._open[k] = [1, history_tokens, history_tokens, history_tokens, req.request_id, position, held]
            return
        self._open.move_to_end(k)
        c[0] += 1
        c[2] = history_tokens
        c[3] = max(c[3], history_tokens)

    def absorb(self, later: ConversationGrowth) -> None:
        """Append the conversations of ``later``, the next stretch of the input (``mergeable``; it is used up):
        a chat open here that ``later`` continues becomes one conversation, one that ``later`` restarts is closed.
        Exact while fewer than ``max_conversations`` are open at once."""
        joined = 0
        for k in [k for k in self._open if k in later.first_seen]:
            c = self._open.pop(k)
            if not later.first_seen[k]:
                self._fold(c)
                continue
            b = later._held.pop(k, None)
            still_open = b is None
            if b is None:
                b = later._open[k]
            both = [c[0] + b[0], c[1], b[2], max(c[3], b[3]), c[4], c[5], False]
            joined += 1
            if still_open:
                later._open[k] = both
            else:
                self._fold(both)
        for c in later._held.values():
            self._fold(c)
        for mine, theirs in ((self._turns, later._turns), (self._max_history, later._max_history),
                             (self._growth, later._growth)):
            mine.absorb(theirs)
        self._top.absorb(later._top)
        self.started += later.started - joined
        self.closed_early += later.closed_early
        for k, c in later._open.items():
            c[6] = False
            self._open[k] = c
        while len(self._open) > self.max_conversations:
            self._fold(self._open.popitem(last=False)[1])
            self.closed_early += 1

    def finish(self) -> None:
        """Close every open conversation (call once, at the end of the log)."""
        while self._open:
            self._fold(self._open.popitem(last=False)[1])
        for c in self._held.values():
            self._fold(c)
        self._held.clear()

    def to_dict(self) -> dict[str, Any]:
        self.finish()
        return {
            "conversations": self.started,
            "multi_request_conversations": self._turns.n,
            "requests_per_conversation": self._turns.summary(),
            "max_history_tokens": self._max_history.summary(),
            "history_tokens_added_per_request": self._growth.summary(),
            "largest_histories": [{"first_request_id": t["request_id"], "max_history_tokens": t["tokens"],
                                   "requests": t["requests"]} for t in self._top.items()],
            "closed_early": self.closed_early,
        }


def part_tokens(req: AuditRequest, counts: Iterable[int], image_tokens: int = 0) -> dict[Part, int]:
    """Tokens per part of one request, from the counts of its segments (in order), its fixed framing tokens and
    ``image_tokens`` for each of its images (in the part that holds the image)."""
    out: dict[Part, int] = dict.fromkeys(PARTS, 0)
    for seg, n in zip(req.segments, counts, strict=True):
        out[seg.part] += n
    out["other"] += req.fixed_tokens
    if image_tokens:
        for part in req.images:
            out[part] += image_tokens
    return out
