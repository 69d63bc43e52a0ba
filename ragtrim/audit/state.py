"""The audit's partial aggregates: ``AuditState`` holds every number of a stretch of the input (token shares and
their distributions, conversations, the prefix cache, documents, the savings sample, what was skipped per file), and
``absorb`` appends the state of the next stretch. Both engines use it: the local one reads every file into one
state; the Ray engine reads shards in parallel and absorbs their states in input order, with the same result.

``Workspace`` is what reading needs in one process and is never merged: the token counter, the count cache and the
document cache.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ragtrim.audit.breakdown import (
    Breakdown,
    ConversationGrowth,
    CountCache,
    Position,
    add_stats,
    part_tokens,
)
from ragtrim.audit.config import AuditConfig
from ragtrim.audit.duplicates import DocumentAnalysis, DocumentCache
from ragtrim.audit.prefix import DEFAULT_CACHE_TOKENS, PrefixAnalysis
from ragtrim.audit.reader import MAX_SKIP_EXAMPLES, AuditRequest, SkipLog
from ragtrim.audit.savings import PrioritySample
from ragtrim.audit.shards import LogShard, read_shard
from ragtrim.errors import RagtrimError
from ragtrim.text.tokens import TokenCounter, get_counter

_HASH_PROBE = "ragtrim.audit: text keys"
"""Every key of a text is Python's ``hash`` of it, which differs between processes unless PYTHONHASHSEED is set;
states to be merged must have hashed alike (the Ray engine sets the seed for its workers)."""


class HashSeedMismatch(RagtrimError):
    """Two states to merge were made by processes that hash text differently (a different PYTHONHASHSEED)."""


def cache_tokens_of(cfg: AuditConfig) -> int:
    """The prefix cache's size: the configured one, else the planned GPU's KV cache, else the default."""
    if cfg.prefix_cache_tokens is not None:
        return cfg.prefix_cache_tokens
    return cfg.planner.kv_cache_tokens() if cfg.planner else DEFAULT_CACHE_TOKENS


@dataclass(slots=True)
class FileInput:
    """How one log file was read: its format, lines read, requests, lines skipped, and where reading stopped early
    (a truncated gzip stream). The stretches of a file read apart add up in order (``absorb``)."""

    ordinal: int
    path: str
    skipped: SkipLog = field(default_factory=SkipLog)
    requests: int = 0

    def absorb(self, later: FileInput) -> None:
        s, t = self.skipped, later.skipped
        s.counts.update(t.counts)
        s.examples.extend(t.examples[:max(0, MAX_SKIP_EXAMPLES - len(s.examples))])
        s.lines_read += t.lines_read
        s.formats_seen = s.formats_seen or t.formats_seen
        if t.stopped_after_line is not None:
            s.stopped_after_line, s.stop_reason = t.stopped_after_line, t.stop_reason
        self.requests += later.requests

    def to_dict(self) -> dict[str, Any]:
        s = self.skipped
        return {"path": self.path, "format": s.log_format, "requests": self.requests, "lines_read": s.lines_read,
                "complete": s.stopped_after_line is None, "stopped_after_line": s.stopped_after_line,
                "stop_reason": s.stop_reason,
                "skipped_lines": {"total": s.total, "by_reason": dict(sorted(s.counts.items()))}}


class Workspace:
    """What reading needs in one process: the token counter, the cache of text counts and of document analyses."""

    def __init__(self, cfg: AuditConfig, documents: DocumentAnalysis) -> None:
        self.counter: TokenCounter = get_counter(cfg.tokenizer)
        self.counts = CountCache(self.counter, num_threads=cfg.num_threads)
        self.documents: DocumentCache = documents.cache(self.counts, html=cfg.html_share)


class AuditState:
    """Every number of the audit over a stretch of the input, before the report is made of it.

    ``mergeable``: the stretch may start after the input's beginning, so the parts whose numbers depend on what came
    before (conversations that began earlier, the prefix cache's first requests, documents seen earlier) keep what
    ``absorb`` needs to make them exact."""

    def __init__(self, cfg: AuditConfig, *, mergeable: bool = False) -> None:
        self.cache_tokens = cache_tokens_of(cfg)
        self.breakdown = Breakdown()
        self.growth = ConversationGrowth(mergeable=mergeable)
        self.prefix = PrefixAnalysis(capacity_tokens=self.cache_tokens, block_size=cfg.block_size,
                                     keep_text=cfg.keep_text, mergeable=mergeable)
        self.documents = DocumentAnalysis(threshold=cfg.near_threshold, max_docs=cfg.max_docs,
                                          keep_text=cfg.keep_text, mergeable=mergeable)
        savings = cfg.savings
        self.sample = PrioritySample(savings.sample if savings else 0, savings.seed if savings else 0)
        self.images: Counter[str] = Counter()
        self.uncounted: Counter[str] = Counter()
        self.files: dict[int, FileInput] = {}
        self.counting: dict[str, Any] = {}
        self.read_seconds = 0.0
        self.hash_check: int | None = hash(_HASH_PROBE)

    def read(self, shard: LogShard, workspace: Workspace, cfg: AuditConfig) -> None:
        """Read ``shard`` into this state (shards of the input in order)."""
        started = time.perf_counter()
        file = FileInput(shard.ordinal, shard.path)
        requests = read_shard(shard, skipped=file.skipped, context_tag=cfg.context_tag)
        before = dict(workspace.counts.stats())
        for batch in _batches(requests, cfg.batch_size):
            self.add_batch(batch, shard.ordinal, workspace, cfg)
            file.requests += len(batch)
        self._add_file(file)
        after = workspace.counts.stats()
        self.counting = add_stats(self.counting, {k: after[k] - before.get(k, 0) for k in after
                                                  if k != "cache_entries"})
        self.read_seconds += time.perf_counter() - started

    def _add_file(self, file: FileInput) -> None:
        mine = self.files.get(file.ordinal)
        if mine is None:
            self.files[file.ordinal] = file
        else:
            mine.absorb(file)

    def add_batch(self, batch: list[AuditRequest], ordinal: int, workspace: Workspace, cfg: AuditConfig) -> None:
        flat = workspace.counts.counts([s.text for r in batch for s in r.segments])
        per_request: list[list[int]] = []
        pos = 0
        for r in batch:
            per_request.append(flat[pos:pos + len(r.segments)])
            pos += len(r.segments)
        positions: list[Position] = [(ordinal, r.line) for r in batch]
        self.documents.add_batch(batch, per_request, workspace.documents, positions)
        for req, seg_counts, position in zip(batch, per_request, positions, strict=True):
            parts = part_tokens(req, seg_counts, cfg.image_tokens)
            if req.images:
                self.images.update(req.images)
            if req.uncounted:
                self.uncounted.update(req.uncounted)
            output = req.output_tokens if req.output_tokens is not None else cfg.default_output_tokens
            prompt = self.breakdown.add(req, parts, output, position)
            self.growth.add(req, parts["history"], position)
            self.prefix.add(req, [hash(s.text) for s in req.segments], seg_counts, prompt)
            if cfg.savings is not None:
                self.sample.offer(position, (req, parts, output))

    def absorb(self, later: AuditState) -> None:
        """Append ``later``, the state of the next stretch of the input (made ``mergeable``; it is used up)."""
        if self.hash_check is not None and later.hash_check is not None and self.hash_check != later.hash_check:
            raise HashSeedMismatch("two audit states hashed text differently (their processes had different "
                                   "PYTHONHASHSEED values), so their keys cannot be matched; run every worker with "
                                   "the same PYTHONHASHSEED (the Ray engine sets it for its workers)")
        self.hash_check = later.hash_check if self.hash_check is None else self.hash_check
        self.breakdown.absorb(later.breakdown)
        self.growth.absorb(later.growth)
        self.prefix.absorb(later.prefix)
        self.documents.absorb(later.documents)
        self.sample.absorb(later.sample)
        self.images.update(later.images)
        self.uncounted.update(later.uncounted)
        for ordinal in sorted(later.files):
            self._add_file(later.files[ordinal])
        self.counting = add_stats(self.counting, later.counting)
        self.read_seconds += later.read_seconds

    def ordered_files(self) -> list[FileInput]:
        return [self.files[k] for k in sorted(self.files)]


def empty_state(cfg: AuditConfig) -> AuditState:
    """The state of no input yet, to absorb the shards' states into (its keys are those of the first absorbed)."""
    state = AuditState(cfg)
    state.hash_check = None
    return state


def audit_shard(shard: LogShard, cfg: AuditConfig, workspace: Workspace | None = None) -> AuditState:
    """The mergeable state of one shard (what a worker of the Ray engine computes); ``workspace`` carries the
    caches from one shard to the next in the same process."""
    state = AuditState(cfg, mergeable=True)
    state.read(shard, workspace if workspace is not None else Workspace(cfg, state.documents), cfg)
    return state


def merge_in_order(states: Iterable[AuditState], cfg: AuditConfig) -> AuditState:
    """The state of the whole input from its shards' states, given in input order."""
    total = empty_state(cfg)
    for state in states:
        total.absorb(state)
    return total


def _batches(items: Iterable[AuditRequest], size: int) -> Iterator[list[AuditRequest]]:
    batch: list[AuditRequest] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
