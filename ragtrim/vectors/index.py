"""Filling the passage-vector store ahead of time: ``index_passages`` (the API) and ``read_corpus`` behind
``ragtrim index CORPUS``.

A passage is stored under the text the relevance stage will see: the HTML stage's cleaned text for markup, the text
as given otherwise. Its vector is the one the scorer that will read it computes (the same model, backend and word
pieces: by default the ``auto`` scorer's), so a later trim finds it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ragtrim.errors import InputError, VectorStoreError
from ragtrim.scoring.base import Scorer
from ragtrim.scoring.embedding import CachedEmbedder
from ragtrim.scoring.registry import get_scorer
from ragtrim.vectors.store import VectorStore

TEXT_FIELDS = ("text", "page_content", "content", "contents", "passage")
"""The keys ``read_corpus`` takes a JSONL record's text from, in this order (or ``text_field``)."""


@dataclass(frozen=True)
class IndexReport:
    """What ``index_passages`` did: ``passages`` read, ``stored`` new vectors per embedder (summed), ``already``
    there intact, ``repaired`` (found damaged: computed again and overwritten), ``embedders`` (their names),
    ``seconds``."""

    passages: int
    stored: int
    already: int
    repaired: int
    embedders: tuple[str, ...]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def embedders_of(scorer: object) -> list[CachedEmbedder]:
    """The model scorers inside ``scorer`` (a cascade's stages, a hybrid's parts, a rerank's), in order, once."""
    found: list[CachedEmbedder] = []

    def walk(s: object) -> None:
        if isinstance(s, str):
            s = get_scorer(s)
        if isinstance(s, CachedEmbedder):
            if all(s is not f for f in found):
                found.append(s)
            return
        parts = getattr(s, "parts", None)
        if callable(parts):
            for part in parts():
                walk(part)
        for attr in ("first", "second"):
            inner = getattr(s, attr, None)
            if inner is not None:
                walk(inner)

    walk(scorer)
    return found


def resolve_index_scorer(scorer: Scorer | str) -> Scorer:
    """The scorer whose vectors to store: ``"auto"`` is what ``trim()`` uses on this host."""
    if scorer == "auto":
        from ragtrim.scoring.auto import choose

        return get_scorer(choose().scorer)
    return get_scorer(scorer)


def _with_store(embedder: CachedEmbedder, store: str | VectorStore | None) -> CachedEmbedder:
    """``embedder`` writing to ``store`` instead of its own (a copy with the same parameters)."""
    params = {**embedder.get_params(), "vector_store": store}
    return type(embedder)(**params)


def index_passages(passages: Iterable[str], *, scorer: Scorer | str = "auto",
                   store: str | VectorStore | None = None, batch_size: int = 256, clean_html: bool = True,
                   progress: Callable[[int], None] | None = None) -> IndexReport:
    """Embed ``passages`` with every model inside ``scorer`` (default: the ``auto`` scorer, as ``trim()``) and
    store the vectors the store lacks (and those it holds damaged). ``store``: a file path, ``redis://`` URL or ``VectorStore`` (default: each
    embedder's own, normally the default store). ``clean_html``: store markup under the HTML stage's cleaned text,
    which is what a trim embeds. ``progress(n)`` is called after each batch of ``n`` passages. Raises
    VectorStoreError when the scorer has no model to store vectors of, or the store fails; ConfigError when the
    store refuses its location (a file that is not ragtrim's)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    resolved = resolve_index_scorer(scorer)
    embedders = embedders_of(resolved)
    if not embedders:
        raise VectorStoreError(f"scorer {resolved.name!r} uses no embedding model: there are no vectors to store")
    # Copies that resolve their store now: a shared scorer may have resolved "default" before the caller (or
    # ``ragtrim index --store``) configured it.
    embedders = [_with_store(e, store if store is not None else e.vector_store) for e in embedders]
    cleaner = _html_cleaner() if clean_html else None
    started = time.perf_counter()
    count = stored = already = repaired = 0
    for batch in _batches(passages, batch_size):
        texts = [cleaner(t) for t in batch] if cleaner is not None else batch
        for embedder in embedders:
            counts = embedder.index(texts)
            stored += counts.stored
            already += counts.already
            repaired += counts.repaired
        count += len(batch)
        if progress is not None:
            progress(len(batch))
    return IndexReport(passages=count, stored=stored, already=already, repaired=repaired,
                       embedders=tuple(e.name for e in embedders), seconds=time.perf_counter() - started)


def _html_cleaner() -> Callable[[str], str]:
    from ragtrim.stages.html import HtmlCleaner

    stage = HtmlCleaner()

    def clean(text: str) -> str:
        cleaned = stage.clean(text).text
        return cleaned if cleaned else text

    return clean


def _batches(items: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InputError(f"a passage must be a str, got {type(item).__name__}")
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


STDIN_NAMES = ("-", "/dev/stdin")
"""Corpus names that mean standard input, read as JSONL (one passage a line)."""


def read_corpus(paths: Sequence[str | Path], *, text_field: str | None = None, title_field: str | None = None,
                stdin: BinaryIO | None = None) -> Iterator[str]:
    """The passages of ``paths``: a ``.jsonl`` file gives one per line (a string, or an object's ``text_field``, by
    default the first of ``TEXT_FIELDS`` present; with ``title_field``, ``"title\\ntext"`` as the NQ benchmark
    sends them); ``-`` or ``/dev/stdin`` is standard input (``stdin``, default ``sys.stdin``), read as JSONL; a folder
    gives its files in name order; any other file is one passage. Files are UTF-8, with or without a byte order mark.
    Empty texts are skipped. Raises InputError naming the file (and line) of anything unreadable: missing, not UTF-8,
    not JSON, a lone surrogate, no text field."""
    for raw in paths:
        if str(raw) in STDIN_NAMES:
            stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
            if stream is None:
                raise InputError("stdin cannot be read as bytes here; pass the corpus as a file")
            yield from _jsonl_passages(stream, "stdin", text_field, title_field)
            continue
        path = Path(raw)
        if path.is_dir():
            yield from read_corpus(sorted(p for p in path.rglob("*") if p.is_file()), text_field=text_field,
                                   title_field=title_field)
            continue
        if not path.exists():
            raise InputError(f"corpus file {str(path)!r} does not exist")
        try:
            with path.open("rb") as stream:
                if path.name.endswith(".jsonl"):
                    yield from _jsonl_passages(stream, str(path), text_field, title_field)
                    continue
                text = _decode(stream.read(), str(path))
        except OSError as exc:
            raise InputError(f"corpus file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
        if text.strip():
            yield text


def _decode(data: bytes, where: str, *, first: bool = True, unit: str = "file") -> str:
    """UTF-8 text (a byte order mark at the start of a file dropped, as ``ragtrim trim`` reads input), or an
    InputError naming ``where``; a lone surrogate cannot come out of a strict UTF-8 decoder."""
    try:
        return data.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start} of the {unit}); convert it "
                         "first, e.g. iconv -f latin1 -t utf-8") from None


def _jsonl_passages(stream: BinaryIO, name: str, text_field: str | None, title_field: str | None) -> Iterator[str]:
    # Lines split at b"\n" only: a raw U+2028 inside a JSON string is part of its line, as for ``ragtrim trim``.
    for n, raw_line in enumerate(stream, start=1):
        where = f"{name}:{n}"
        line = _decode(raw_line, where, first=n == 1, unit="line")
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InputError(f"{where}: not JSON ({exc})") from None
        text = _record_text(record, text_field, title_field, where)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"{where}: holds a lone surrogate {text[exc.start]!r} (a JSON \\u escape of half a "
                             "character); write valid Unicode text") from None
        if text.strip():
            yield text


def _record_text(record: Any, text_field: str | None, title_field: str | None, where: str) -> str:
    if isinstance(record, str):
        return record
    if not isinstance(record, dict):
        raise InputError(f"{where}: a line must be a string or an object, got {type(record).__name__}")
    fields = (text_field,) if text_field is not None else TEXT_FIELDS
    key = next((f for f in fields if f in record), None)
    if key is None or not isinstance(record[key], str):
        raise InputError(f"{where}: no text field ({' or '.join(map(repr, fields))}) holding a string")
    text: str = record[key]
    if title_field is not None:
        title = record.get(title_field)
        if isinstance(title, str) and title:
            text = f"{title}\n{text}"
    return text
