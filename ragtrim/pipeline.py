"""Runs stages in order and checks each one's output against the contract.

The contract: a stage returns a StageOutput; it may drop chunks only with a ``dropped`` removal record, may shorten
them only with a record, and may not invent chunk ids. The pipeline counts tokens itself (a ``token_count`` that
arrives on a chunk is recounted, never trusted), times each stage, wraps anything a stage raises in an error that
names the stage, and finally checks every ``TokenBudget`` on the joined text the model receives.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragtrim._util.forks import fork_safe_lock
from ragtrim.errors import ConfigError, ContractError, RagtrimError, StageError
from ragtrim.inputs import coerce_chunks, coerce_history
from ragtrim.models import Chunk, Removal, StageOutput, StageReport, TrimContext, TrimResult
from ragtrim.stages.base import Stage, stage_from_dict
from ragtrim.text.counting import start_counts
from ragtrim.text.tokens import TokenCounter, counter_config, counter_from_config, get_counter


class Pipeline:
    """An ordered list of stages sharing one token counter.

    >>> from ragtrim.stages.budget import TokenBudget
    >>> p = Pipeline([TokenBudget(max_tokens=5)], tokenizer="whitespace")
    >>> p.run(["one two three", "four five six"]).tokens_after
    3
    """

    def __init__(
        self, stages: Sequence[Stage] = (), *, tokenizer: str | TokenCounter | None = None, prefetch: bool = True
    ) -> None:
        """``prefetch``: before the stages run, let each start what it will need (``Stage.prefetch``): the relevance
        stage's model pass then runs on ragtrim's background thread while the CPU stages work, and the result is
        the same. ``False`` runs everything in the caller's thread, one stage after another."""
        if not isinstance(prefetch, bool):
            raise ConfigError(f"prefetch must be True or False, got {prefetch!r}")
        stages = list(stages)
        for i, stage in enumerate(stages):
            if not isinstance(stage, Stage):
                raise ConfigError(
                    f"stages[{i}] must be a ragtrim Stage, got {type(stage).__name__}; "
                    "subclass ragtrim.stages.base.Stage"
                )
        self.stages = tuple(stages)
        self.tokenizer = tokenizer
        self.counter = get_counter(tokenizer)
        self.prefetch = prefetch
        self._warm = False
        self._warm_all = False
        self._warm_lock = fork_safe_lock()

    # -- config -------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokenizer": counter_config(self.counter), "stages": [s.to_dict() for s in self.stages]}
        if not self.prefetch:
            out["prefetch"] = False
        return out

    @classmethod
    def from_dict(
        cls, config: Mapping[str, Any], *, tokenizer_dirs: Sequence[str | os.PathLike[str]] = ()
    ) -> Pipeline:
        """Build a pipeline from ``to_dict()`` output. A config is data: a tokenizer file it names must lie under
        one of ``tokenizer_dirs`` or a directory listed in ``$RAGTRIM_TOKENIZER_DIRS``. Every problem, however
        malformed the config, is a ConfigError."""
        try:
            return cls._from_dict(config, tokenizer_dirs)
        except RecursionError:
            raise ConfigError("pipeline config is nested too deeply; a config is a dict of flat stage dicts") from None

    @classmethod
    def _from_dict(cls, config: Mapping[str, Any], tokenizer_dirs: Sequence[str | os.PathLike[str]]) -> Pipeline:
        if not isinstance(config, Mapping):
            raise ConfigError(f"pipeline config must be a dict, got {type(config).__name__}")
        unknown = set(config) - {"tokenizer", "stages", "prefetch"}
        if unknown:
            raise ConfigError(f"unknown pipeline config keys {sorted(unknown)}; allowed: 'tokenizer', 'stages', "
                              "'prefetch'")
        stages = config.get("stages", [])
        if not isinstance(stages, (list, tuple)):
            raise ConfigError(f"'stages' must be a list of stage dicts, got {type(stages).__name__}")
        built = [stage_from_dict(s) for s in stages]
        return cls(built, tokenizer=counter_from_config(config.get("tokenizer"), allowed_dirs=tokenizer_dirs),
                   prefetch=config.get("prefetch", True))

    def __repr__(self) -> str:
        return f"Pipeline(stages={list(self.stages)!r}, tokenizer={self.counter.name!r})"

    # -- running ------------------------------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Load every stage's heavy resources now, models included (a server calls it before taking requests).
        Without it, ``run`` loads what a request needs when it first needs it: a trim with nothing to rank (no
        query, one chunk) loads no model."""
        self._warm_up(everything=True)

    def _warm_up(self, *, everything: bool) -> None:
        """Warm the stages once: those with ``warm_up_on_first_run`` before the first run (concurrent first runs,
        e.g. a LangChain retriever under a thread pool, wait for one load instead of loading twice), all of them
        for ``warm_up()``."""
        if self._warm_all or (self._warm and not everything):
            return
        with self._warm_lock:
            for stage in self.stages:
                if (everything and not self._warm_all and not stage.warm_up_on_first_run) or (
                        not self._warm and stage.warm_up_on_first_run):
                    stage.warm_up()
            self._warm = True
            self._warm_all = self._warm_all or everything

    def run(
        self,
        chunks: Iterable[Any] | TrimContext = (),
        *,
        query: str = "",
        history: Iterable[Any] | None = None,
        state: Any = None,
    ) -> TrimResult:
        """Trim ``chunks`` (strings, dicts or Chunk objects, or a ready TrimContext) for ``query``."""
        if isinstance(chunks, TrimContext):
            context = chunks
        else:
            if query is None:
                query = ""
            if not isinstance(query, str):
                raise ConfigError(f"query must be a str, got {type(query).__name__}")
            context = TrimContext(
                query=query,
                chunks=coerce_chunks(chunks),
                history=coerce_history(history) if history is not None else (),
                state=state,
            )
        _check_unique_ids(context.chunks)
        self._warm_up(everything=False)
        counter = self.counter
        # The input is counted on worker threads (where the counter allows it) while the prefetch and, when it reads
        # no counts, the first stage work: a raw page's markup costs more to count than to extract.
        pending = start_counts(counter, [c.text for c in context.chunks])
        prefetched: list[tuple[str, float]] = []
        if self.prefetch and context.chunks and context.query.strip():
            for stage in self.stages:
                started = time.perf_counter()
                try:
                    stage.prefetch(context, counter=counter)
                except RagtrimError as exc:
                    exc.add_note(f"raised in stage {stage.name!r} (prefetch)")
                    raise
                except Exception as exc:
                    raise StageError(stage.name, f"prefetch: {type(exc).__name__}: {exc}") from exc
                prefetched.append((stage.name, time.perf_counter() - started))
        known: dict[str, tuple[str, int]] = {}
        deferred = bool(self.stages) and not self.stages[0].reads_token_counts
        if not deferred:
            context = context.with_chunks(_verified_counts(context.chunks, counter, known, pending.result()))
        tokens_before = context.total_tokens
        reports: list[StageReport] = []
        for stage in self.stages:
            started = time.perf_counter()
            try:
                out = stage.run(context, counter=counter)
            except RagtrimError as exc:
                exc.add_note(f"raised in stage {stage.name!r}")
                raise
            except Exception as exc:
                raise StageError(stage.name, f"{type(exc).__name__}: {exc}") from exc
            if not isinstance(out, StageOutput):
                raise ContractError(stage.name, f"run() must return StageOutput, got {type(out).__name__}")
            if deferred:  # the first stage ran on uncounted chunks: its accounting needs the input's counts now
                deferred = False
                context = context.with_chunks(_verified_counts(context.chunks, counter, known, pending.result()))
                tokens_before = context.total_tokens
            new_chunks = _verified_counts(out.context.chunks, counter, known)
            removals = _check_and_complete(stage.name, context.chunks, new_chunks, out.removals)
            seconds = time.perf_counter() - started
            new_context = out.context.with_chunks(new_chunks)
            reports.append(
                StageReport(
                    stage=stage.name,
                    chunks_in=len(context.chunks),
                    chunks_out=len(new_chunks),
                    tokens_in=context.total_tokens,
                    tokens_out=new_context.total_tokens,
                    removals=removals,
                    seconds=seconds,
                    info=out.info,
                )
            )
            context = new_context
        guard = self._final_budget_guard(context, counter)
        if guard is not None:
            reports.append(guard)
            context = context.with_chunks(tuple(c for c in context.chunks
                                                if c.id not in {r.chunk_id for r in guard.removals}))
        return TrimResult(
            context=context,
            trace=tuple(reports),
            tokens_before=tokens_before,
            tokens_after=context.total_tokens,
            tokenizer=counter.name,
            prefetch_seconds=tuple(prefetched),
        )

    def _final_budget_guard(self, context: TrimContext, counter: TokenCounter) -> StageReport | None:
        """Hold every TokenBudget on the text the model receives, in the final chunk order.

        A stage after the budget (``Reorder``) changes which chunk texts meet at a separator, and so the exact count;
        the lowest-priority unpinned chunks go, each with an ``over_budget`` record, until the join fits."""
        from ragtrim.stages.budget import TokenBudget, fit_joined

        budgets = [s for s in self.stages if isinstance(s, TokenBudget)]
        if not budgets or not context.chunks:
            return None
        started = time.perf_counter()
        chunks = context.chunks
        removals: list[Removal] = []
        for b in budgets:
            try:
                chunks, extra = fit_joined(chunks, counter, max_tokens=b.max_tokens,
                                           overhead=b.per_chunk_overhead_tokens, policy=b.policy, stage=FINAL_GUARD)
            except RagtrimError as exc:
                exc.add_note(f"raised in stage {FINAL_GUARD!r}")
                raise
            removals.extend(extra)
        if not removals:
            return None
        return StageReport(
            stage=FINAL_GUARD,
            chunks_in=len(context.chunks),
            chunks_out=len(chunks),
            tokens_in=context.total_tokens,
            tokens_out=sum(c.token_count or 0 for c in chunks),
            removals=tuple(removals),
            seconds=time.perf_counter() - started,
        )


FINAL_GUARD = "final_budget"
"""The trace name of the pipeline's last check: the budget on the joined output text (it appears only when it
had to remove something)."""


def _verified_counts(
    chunks: Sequence[Chunk], counter: TokenCounter, known: dict[str, tuple[str, int]],
    counted: Mapping[str, int] | None = None,
) -> tuple[Chunk, ...]:
    """The chunks with ``token_count`` set by ``counter``: a count a chunk carries is replaced, never trusted
    (a chunk claiming 1 token kept 501 under a 10-token budget). ``known`` remembers the text counted per id, so
    a text that no stage changed is not counted again; ``counted``: counts of texts made on worker threads."""
    out: list[Chunk] = []
    for c in chunks:
        if not isinstance(c, Chunk):
            out.append(c)  # _check_and_complete names the stage that returned it
            continue
        prev = known.get(c.id)
        if prev is not None and (prev[0] is c.text or prev[0] == c.text):
            n = prev[1]
        else:
            ready = counted.get(c.text) if counted else None
            n = ready if ready is not None else counter.count(c.text)
        known[c.id] = (c.text, n)
        out.append(c if c.token_count == n else c.with_token_count(n))
    return tuple(out)


def _check_unique_ids(chunks: Sequence[Chunk]) -> None:
    seen: set[str] = set()
    for c in chunks:
        if c.id in seen:
            from ragtrim.errors import InputError

            raise InputError(f"chunk ids must be unique, {c.id!r} appears twice; give each chunk its own id")
        seen.add(c.id)


def _check_and_complete(
    stage: str, before: Sequence[Chunk], after: Sequence[Chunk], removals: Sequence[Removal]
) -> tuple[Removal, ...]:
    """Check the stage's output and fill exact token numbers into its removal records."""
    by_id = {c.id: c for c in before}
    after_ids: set[str] = set()
    for c in after:
        if not isinstance(c, Chunk):
            raise ContractError(stage, f"output chunks must be Chunk objects, got {type(c).__name__}")
        if c.id not in by_id:
            raise ContractError(stage, f"returned a chunk with unknown id {c.id!r}; stages may not invent chunks")
        if c.id in after_ids:
            raise ContractError(stage, f"returned chunk {c.id!r} twice")
        after_ids.add(c.id)
    recorded: dict[str, list[Removal]] = {}
    for r in removals:
        if not isinstance(r, Removal):
            raise ContractError(stage, f"removals must be Removal records, got {type(r).__name__}")
        if r.chunk_id not in by_id:
            raise ContractError(stage, f"recorded a removal for unknown chunk id {r.chunk_id!r}")
        recorded.setdefault(r.chunk_id, []).append(r)
    after_by_id = {c.id: c for c in after}
    completed: list[Removal] = []
    for cid, chunk in by_id.items():
        records = recorded.get(cid, [])
        if cid not in after_by_id:
            if not any(r.action == "dropped" for r in records):
                raise ContractError(stage, f"chunk {cid!r} vanished without a 'dropped' removal record")
        elif (after_by_id[cid].token_count or 0) < (chunk.token_count or 0) and not records:
            raise ContractError(stage, f"chunk {cid!r} was shortened without a removal record")
        for r in records:
            if r.action == "dropped":
                if cid in after_by_id:
                    raise ContractError(stage, f"chunk {cid!r} is recorded as dropped but is still in the output")
                exact = chunk.token_count or 0
            else:
                exact = max(0, (chunk.token_count or 0) - (after_by_id.get(cid, chunk).token_count or 0))
            completed.append(r if r.tokens_removed == exact else dataclasses.replace(r, tokens_removed=exact))
    return tuple(completed)
