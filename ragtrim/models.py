"""The immutable data that flows through a pipeline: chunks, the trimming context, removal records and results.

Stages never mutate these objects; they return new ones (``dataclasses.replace``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from ragtrim._util.validate import plain_number
from ragtrim.errors import InputError

Reason = Literal[
    "boilerplate",
    "empty",
    "exact_duplicate",
    "near_duplicate",
    "below_top_k",
    "low_relevance",
    "compressed",
    "duplicate_after_compression",
    "over_budget",
    "truncated",
    "history_folded",
]
"""Why a stage removed or shortened a chunk."""

REASONS: tuple[str, ...] = get_args(Reason)

Action = Literal["dropped", "shortened"]
"""``dropped``: the chunk left the context. ``shortened``: it stayed, with fewer tokens."""

_EMPTY_METADATA: Mapping[str, Any] = MappingProxyType({})

CHUNK_SEPARATOR = "\n\n"
"""What ``TrimResult.text`` puts between chunks; the hard budget counts it (``count(result.text) <= budget``)."""


def _freeze(metadata: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if metadata is None:
        return _EMPTY_METADATA
    if isinstance(metadata, MappingProxyType):
        return metadata
    if not isinstance(metadata, Mapping):
        raise InputError(f"metadata must be a mapping, got {type(metadata).__name__}")
    return MappingProxyType(dict(metadata))


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrieved passage.

    ``id`` is stable across stages: a stage may change ``text`` but never ``id``. ``token_count`` is filled in by
    the pipeline with its counter (``None`` means "not counted yet"). ``pinned`` chunks are never dropped by the
    budget stage.
    """

    text: str
    id: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_METADATA, compare=False)
    score: float | None = None
    token_count: int | None = None
    pinned: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InputError(f"chunk {self.id!r}: text must be str, got {type(self.text).__name__}")
        if not isinstance(self.id, str) or not self.id:
            raise InputError(f"chunk id must be a non-empty str, got {self.id!r}")
        if self.score is not None:
            score = plain_number(self.score)  # numpy scalars (np.float32(0.9)) are numbers too
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise InputError(f"chunk {self.id!r}: score must be a number or None, got {self.score!r}")
            try:
                as_float = float(score)
            except OverflowError:
                raise InputError(f"chunk {self.id!r}: score must be within float's range (about 1.8e308), got an "
                                 "int too large to convert") from None
            if math.isnan(as_float):
                raise InputError(f"chunk {self.id!r}: score must not be NaN")
            if score is not self.score:
                object.__setattr__(self, "score", score)
        if self.token_count is not None and (
            isinstance(self.token_count, bool) or not isinstance(self.token_count, int) or self.token_count < 0
        ):
            raise InputError(f"chunk {self.id!r}: token_count must be >= 0 (an int) or None, got {self.token_count!r}")
        if not isinstance(self.pinned, bool):
            raise InputError(f"chunk {self.id!r}: pinned must be True or False, got {self.pinned!r}")
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    def with_text(self, text: str, token_count: int | None = None) -> Chunk:
        """A copy with new text and its ``token_count`` (None: the pipeline recounts it)."""
        return dataclasses.replace(self, text=text, token_count=token_count)

    def with_score(self, score: float | None) -> Chunk:
        if type(score) is float and not math.isnan(score):  # a plain float (what scorers return): nothing to check
            return self._copy(score=score)
        return dataclasses.replace(self, score=score)

    def with_token_count(self, token_count: int) -> Chunk:
        """A copy counted: ``token_count`` an int >= 0."""
        if type(token_count) is int and token_count >= 0:
            return self._copy(token_count=token_count)
        return dataclasses.replace(self, token_count=token_count)

    def _copy(self, **changes: Any) -> Chunk:
        """A copy with ``changes`` that the caller has checked (the fields of a valid chunk need no second look)."""
        new = object.__new__(Chunk)
        for name in _CHUNK_FIELDS:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "score": self.score,
            "token_count": self.token_count,
            "pinned": self.pinned,
            "metadata": dict(self.metadata),
        }


_CHUNK_FIELDS = tuple(f.name for f in dataclasses.fields(Chunk))


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation turn. ``turn_id`` is stable (index-based when the caller gives none)."""

    role: str
    content: str
    turn_id: str

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, "turn_id": self.turn_id}


@dataclass(frozen=True, slots=True)
class TrimContext:
    """What a stage sees and returns: the query, the chunks, and optionally conversation history and its state."""

    query: str = ""
    chunks: tuple[Chunk, ...] = ()
    history: tuple[Message, ...] = ()
    state: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.query, str):
            raise InputError(f"query must be str, got {type(self.query).__name__}")
        if not isinstance(self.chunks, tuple):
            object.__setattr__(self, "chunks", tuple(self.chunks))
        if not isinstance(self.history, tuple):
            object.__setattr__(self, "history", tuple(self.history))

    def with_chunks(self, chunks: tuple[Chunk, ...] | list[Chunk]) -> TrimContext:
        return dataclasses.replace(self, chunks=tuple(chunks))

    @property
    def total_tokens(self) -> int:
        """Sum of counted chunk tokens (uncounted chunks count 0)."""
        return sum(c.token_count or 0 for c in self.chunks)


@dataclass(frozen=True, slots=True)
class Removal:
    """A record that a stage dropped or shortened a chunk, and why."""

    chunk_id: str
    stage: str
    reason: Reason
    tokens_removed: int
    detail: str = ""
    action: Action = "dropped"
    kept_id: str | None = None
    """For duplicates: the id of the chunk that was kept instead."""

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise InputError(f"removal reason must be one of {REASONS}, got {self.reason!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class StageOutput:
    """What a stage returns: the new context and the records of what it removed or shortened."""

    context: TrimContext
    removals: tuple[Removal, ...] = ()
    info: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_METADATA)
    """Free-form stage facts for the report (e.g. a history stage's folded turn ids)."""


@dataclass(frozen=True, slots=True)
class StageReport:
    """What one stage did during one run."""

    stage: str
    chunks_in: int
    chunks_out: int
    tokens_in: int
    tokens_out: int
    removals: tuple[Removal, ...]
    seconds: float
    info: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_METADATA)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_in - self.tokens_out

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "chunks_in": self.chunks_in,
            "chunks_out": self.chunks_out,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_saved": self.tokens_saved,
            "seconds": self.seconds,
            "removals": [r.to_dict() for r in self.removals],
            "info": _jsonable(self.info),
        }


@dataclass(frozen=True, slots=True)
class TrimResult:
    """The trimmed context, the per-stage trace, and token accounting."""

    context: TrimContext
    trace: tuple[StageReport, ...]
    tokens_before: int
    tokens_after: int
    tokenizer: str = ""
    prefetch_seconds: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    """Wall seconds of each stage's prefetch, by stage name, spent before the first stage ran (empty when the
    pipeline prefetched nothing); the trace's ``seconds`` do not include them. Left out of ``==``."""

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return self.context.chunks

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def ratio(self) -> float:
        """Compression ratio tokens_before / tokens_after (``inf`` when everything was removed, 1.0 on empty input)."""
        if self.tokens_after == 0:
            return 1.0 if self.tokens_before == 0 else math.inf
        return self.tokens_before / self.tokens_after

    @property
    def removals(self) -> tuple[Removal, ...]:
        return tuple(r for report in self.trace for r in report.removals)

    @property
    def text(self) -> str:
        """The kept chunks joined by blank lines (``CHUNK_SEPARATOR``), in output order: the text the model receives.

        With a ``TokenBudget`` in the pipeline, ``counter.count(result.text)`` is at most its ``max_tokens``."""
        return CHUNK_SEPARATOR.join(c.text for c in self.context.chunks)

    def to_dict(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "query": self.context.query,
            "tokenizer": self.tokenizer,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "ratio": None if math.isinf(ratio) else ratio,
            "chunks": [c.to_dict() for c in self.context.chunks],
            "state": _jsonable(self.context.state),
            "history": [m.to_dict() for m in self.context.history],
            "trace": [r.to_dict() for r in self.trace],
        }


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _jsonable(to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    return repr(value)
