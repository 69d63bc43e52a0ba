"""Shared prefixes: how many prompt tokens a prefix cache (vLLM's automatic prefix caching) could serve, as the
log orders each prompt and in the cache-friendly order, which system prompts repeat, and what to change.

The cache is simulated over the log in order: an LRU of prompt prefixes at segment granularity (a message, a
document), holding at most ``capacity_tokens``; a request is served the tokens of its longest cached leading run
of whole segments, rounded down to full KV blocks and never its last token (vLLM recomputes it).

Stretches of the log read apart merge exactly (``PrefixCacheSim.absorb``). An LRU of byte-bounded entries holds, at
any moment, the most recently used prefixes back to the first one that no longer fits: its content depends only on
the requests since the distinct prefixes they used first exceeded the capacity. So a stretch read from an empty
cache is exact from its first eviction on; the requests before it (the head) are kept and replayed on the cache the
earlier stretch left.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ragtrim.audit.reader import PARTS, AuditRequest, Part

DEFAULT_CACHE_TOKENS = 1_000_000
MAX_SYSTEM_VARIANTS = 10_000
PREVIEW_CHARS = 160
_TEMPLATE_VARIANTS = 200  # most used system-prompt variants grouped into templates for the advice
_KEEP_CHARS = 4000  # of each system prompt variant, to find where variants start to differ
_ORDER_RANK: dict[Part, int] = {"system": 0, "other": 1, "history": 2, "context": 3, "question": 4}


class PrefixCacheSim:
    """An LRU prefix cache over segment chains; ``serve`` returns the tokens one request would get from it.

    ``mergeable``: this simulation starts a later stretch of the log from an empty cache; its requests up to and
    including the first one that evicts (whose result depends on what the earlier stretch left in the cache) are
    kept in ``head`` and not counted, for ``absorb`` to replay."""

    def __init__(self, *, capacity_tokens: int = DEFAULT_CACHE_TOKENS, block_size: int = 16,
                 mergeable: bool = False) -> None:
        self.capacity_tokens = capacity_tokens
        self.block_size = block_size
        self._lru: OrderedDict[int, int] = OrderedDict()
        self._held = 0
        self.served_tokens = 0
        self.served_by_part: dict[Part, int] = dict.fromkeys(PARTS, 0)
        self.prompt_tokens = 0
        self.requests_with_hit = 0
        self.evicted_tokens = 0
        self.recording = mergeable
        self.head: list[tuple[tuple[int, ...], tuple[int, ...], tuple[Part, ...], int]] = []

    def serve(self, keys: Sequence[int], tokens: Sequence[int], parts: Sequence[Part], prompt_tokens: int) -> int:
        if self.recording:
            self.head.append((tuple(keys), tuple(tokens), tuple(parts), prompt_tokens))
            served, evicted = self._run(keys, tokens, parts, prompt_tokens, count=False)
            self.recording = not evicted
            return served
        return self._run(keys, tokens, parts, prompt_tokens, count=True)[0]

    def _run(self, keys: Sequence[int], tokens: Sequence[int], parts: Sequence[Part], prompt_tokens: int, *,
             count: bool) -> tuple[int, bool]:
        lru = self._lru
        touch = lru.move_to_end
        n_keys = len(keys)
        chain = 0
        matched = 0
        i = 0
        while i < n_keys:  # the leading run of cached prefixes
            chain = hash((chain, keys[i]))
            if chain not in lru:
                break
            touch(chain)
            matched += tokens[i]
            i += 1
        matched_upto = i
        cap = self.capacity_tokens
        held = self._held
        evicted = 0
        evictions = False
        while i < n_keys:  # the rest is cached now, for the requests after this one
            n = tokens[i]
            if chain in lru:  # left behind when its parent prefix was evicted
                touch(chain)
            elif 0 < n <= cap:
                lru[chain] = n
                held += n
                while held > cap:
                    old = lru.popitem(last=False)[1]
                    held -= old
                    evicted += old
                    evictions = True
            i += 1
            if i < n_keys:
                chain = hash((chain, keys[i]))
        self._held = held
        served = max(0, min(matched, prompt_tokens - 1)) // self.block_size * self.block_size
        if not count:
            return served, evictions
        self.evicted_tokens += evicted
        self.prompt_tokens += prompt_tokens
        self.served_tokens += served
        if served:
            self.requests_with_hit += 1
            left = served
            for j in range(matched_upto):
                take = min(left, tokens[j])
                self.served_by_part[parts[j]] += take
                left -= take
        return served, evictions

    def absorb(self, later: PrefixCacheSim) -> None:
        """Append ``later``, the next stretch of the log (``mergeable``): its head is replayed on this cache, the
        rest of its counts are exact as they are."""
        for keys, tokens, parts, prompt in later.head:
            self._run(keys, tokens, parts, prompt, count=True)
        if not later.recording:  # it evicted: its cache no longer depends on what came before it
            self._lru, self._held = later._lru, later._held
        self.served_tokens += later.served_tokens
        self.prompt_tokens += later.prompt_tokens
        self.requests_with_hit += later.requests_with_hit
        self.evicted_tokens += later.evicted_tokens
        for p in PARTS:
            self.served_by_part[p] += later.served_by_part[p]

    def to_dict(self) -> dict[str, Any]:
        share = self.served_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
        return {
            "served_tokens": self.served_tokens,
            "served_share_of_prompt_tokens": round(share, 4),
            "served_tokens_by_part": dict(self.served_by_part),
            "requests_with_a_hit": self.requests_with_hit,
            "evicted_tokens": self.evicted_tokens,
        }


def recommended_order(parts: Sequence[Part], texts: Sequence[str]) -> list[int]:
    """Indices of a prompt's segments in the cache-friendly order: system prompt, tool definitions, earlier turns
    (as they were), retrieved context in a stable order (by its text, the same in every process), the question
    last."""
    return sorted(range(len(parts)),
                  key=lambda i: (_ORDER_RANK[parts[i]], texts[i] if parts[i] == "context" else "", i))


class PrefixAnalysis:
    """Both cache simulations, the system-prompt variants, and the ordering facts the advice is made of."""

    def __init__(self, *, capacity_tokens: int = DEFAULT_CACHE_TOKENS, block_size: int = 16,
                 keep_text: bool = True, mergeable: bool = False) -> None:
        self.as_logged = PrefixCacheSim(capacity_tokens=capacity_tokens, block_size=block_size, mergeable=mergeable)
        self.recommended = PrefixCacheSim(capacity_tokens=capacity_tokens, block_size=block_size,
                                          mergeable=mergeable)
        self.keep_text = keep_text
        self.system_variants: dict[int, list[Any]] = {}  # key -> [requests, tokens per request, preview, text]
        self.system_variants_overflow = 0
        self.requests_without_system = 0
        self.context_in_system = 0
        self.question_before_context = 0
        self.context_before_history = 0

    def add(self, req: AuditRequest, keys: Sequence[int], tokens: Sequence[int], prompt_tokens: int) -> None:
        parts = [s.part for s in req.segments]
        self.as_logged.serve(keys, tokens, parts, prompt_tokens)
        order = recommended_order(parts, [seg.text for seg in req.segments])
        self.recommended.serve([keys[i] for i in order], [tokens[i] for i in order], [parts[i] for i in order],
                               prompt_tokens)
        self._facts(req, parts)
        system = [i for i, p in enumerate(parts) if p == "system"]
        if not system:
            self.requests_without_system += 1
            return
        key = hash(tuple(keys[i] for i in system))
        v = self.system_variants.get(key)
        if v is None:
            if len(self.system_variants) >= MAX_SYSTEM_VARIANTS:
                self.system_variants_overflow += 1
                return
            text = "\n".join(req.segments[i].text for i in system)[:_KEEP_CHARS]
            v = self.system_variants[key] = [0, sum(tokens[i] for i in system), text]
        v[0] += 1

    def absorb(self, later: PrefixAnalysis) -> None:
        """Append ``later``, the next stretch of the log. System prompt variants are exact while there are at most
        ``MAX_SYSTEM_VARIANTS`` of them."""
        self.as_logged.absorb(later.as_logged)
        self.recommended.absorb(later.recommended)
        for key, v in later.system_variants.items():
            mine = self.system_variants.get(key)
            if mine is not None:
                mine[0] += v[0]
            elif len(self.system_variants) < MAX_SYSTEM_VARIANTS:
                self.system_variants[key] = v
            else:
                self.system_variants_overflow += v[0]
        self.system_variants_overflow += later.system_variants_overflow
        self.requests_without_system += later.requests_without_system
        self.context_in_system += later.context_in_system
        self.question_before_context += later.question_before_context
        self.context_before_history += later.context_before_history

    def _facts(self, req: AuditRequest, parts: Sequence[Part]) -> None:
        segs = req.segments
        if any(s.part == "context" and s.role in ("system", "developer") for s in segs):
            self.context_in_system += 1
        ctx = [i for i, p in enumerate(parts) if p == "context"]
        if ctx:
            q = [i for i, p in enumerate(parts) if p == "question"]
            if q and q[-1] < ctx[-1]:
                self.question_before_context += 1
            h = [i for i, p in enumerate(parts) if p == "history"]
            if h and ctx[0] < h[-1]:
                self.context_before_history += 1

    def system_summary(self, requests: int) -> dict[str, Any]:
        ranked = sorted(self.system_variants.values(), key=lambda v: -v[0])
        top_text = ranked[0][2] if ranked else ""
        variants = []
        for count, toks, text in ranked[:10]:
            item: dict[str, Any] = {"requests": count, "share_of_requests": round(count / requests, 4) if requests
                                    else 0.0, "tokens": toks,
                                    "common_prefix_chars_with_top": _common_prefix(text, top_text),
                                    "chars": len(text)}
            if self.keep_text:
                item["preview"] = text[:PREVIEW_CHARS]
            variants.append(item)
        repeated = sum(v[0] * v[1] for v in ranked if v[0] > 1)
        return {
            "distinct_system_prompts": len(ranked) + self.system_variants_overflow,
            "requests_without_system_prompt": self.requests_without_system,
            "system_tokens_in_repeated_prompts": repeated,
            "top_variants": variants,
        }

    def advice(self, requests: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        logged = self.as_logged.to_dict()["served_share_of_prompt_tokens"]
        better = self.recommended.to_dict()["served_share_of_prompt_tokens"]
        if better - logged >= 0.01:
            out.append({"id": "reorder", "gain_share_of_prompt_tokens": round(better - logged, 4), "text": (
                f"Order every prompt the same way: system prompt, tool definitions, earlier turns, the retrieved "
                f"documents in a stable order (by document, not by per-query score), the question last. A prefix "
                f"cache would then serve {better:.1%} of prompt tokens instead of {logged:.1%}.")})
        if self.context_in_system:
            out.append({"id": "context_in_system", "requests": self.context_in_system, "text": (
                f"{self.context_in_system:,} requests put retrieved context inside the system message, so "
                "everything after it differs per request and misses the cache: move it after the stable instructions.")})
        if self.question_before_context:
            out.append({"id": "question_first", "requests": self.question_before_context, "text": (
                f"{self.question_before_context:,} requests end with documents, not with the question: put the question "
                "last, so that the documents can be shared by requests that retrieve them.")})
        if self.context_before_history:
            out.append({"id": "context_before_history", "requests": self.context_before_history, "text": (
                f"{self.context_before_history:,} requests put documents before earlier turns: the conversation "
                "prefix then changes every turn; put the history first.")})
        templates = _templates(sorted(self.system_variants.values(), key=lambda v: -v[0])[:_TEMPLATE_VARIANTS])
        for members in templates:
            head = members[0][2]
            shared = min(_common_prefix(v[2], head) for v in members[1:])
            n = sum(v[0] for v in members)
            out.append({"id": "system_prompt_variants", "variants": len(members), "requests": n,
                        "common_prefix_chars": shared, "text": (
                f"{len(members)} system prompts ({n:,} requests) are one template that differs only after character "
                f"{shared:,} (a date, a name, a setting?): move the part that varies to the end of the system prompt "
                "or into the user message, so that the stable part is cached once for all of them.")})
        return out


def _templates(variants: Sequence[list[Any]]) -> list[list[list[Any]]]:
    """Groups of system-prompt variants (most used first) that are one text but for a short stretch, largest
    group first; only groups of two or more."""
    groups: list[list[list[Any]]] = []
    for v in variants:
        for g in groups:
            head = g[0][2]
            if _differing_chars(v[2], head) <= 0.2 * max(len(v[2]), len(head)):
                g.append(v)
                break
        else:
            groups.append([v])
    return sorted((g for g in groups if len(g) > 1), key=lambda g: -sum(v[0] for v in g))


def _differing_chars(a: str, b: str) -> int:
    """Characters of the longer text outside the common prefix and suffix of the two."""
    p = _common_prefix(a, b)
    s = _common_prefix(a[p:][::-1], b[p:][::-1])
    return max(len(a), len(b)) - p - s


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
