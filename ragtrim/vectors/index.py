"""Filling the passage-vector store ahead of time: ``index_passages`` (the API) and ``read_corpus`` behind
``ragtrim index CORPUS``.

A passage is stored under the text the relevance stage will see: the HTML stage's cleaned text for markup, the text
as given otherwise. Its vector is the one the scorer that will read it computes (the same model, backend and word
pieces: by default the ``auto`` scorer's), so a later trim finds it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
    there, ``embedders`` (their names), ``seconds``."""

    passages: int
    stored: int
    already: int
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
    store the vectors the store lacks. ``store``: a file path, ``redis://`` URL or ``VectorStore`` (default: each
    embedder's own, normally the default store). ``clean_html``: store markup under the HTML stage's cleaned text,
    which is what a trim embeds. ``progress(n)`` is called after each batch of ``n`` passages. Raises
    VectorStoreError when the scorer has no model to store vectors of, or the store fails."""
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
    count = stored = already = 0
    for batch in _batches(passages, batch_size):
        texts = [cleaner(t) for t in batch] if cleaner is not None else batch
        for embedder in embedders:
            new, old = embedder.index(texts)
            stored += new
            already += old
        count += len(batch)
        if progress is not None:
            progress(len(batch))
    return IndexReport(passages=count, stored=stored, already=already,
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


def read_corpus(paths: Sequence[str | Path], *, text_field: str | None = None,
                title_field: str | None = None) -> Iterator[str]:
    """The passages of ``paths``: a ``.jsonl`` file gives one per line (a string, or an object's ``text_field``, by
    default the first of ``TEXT_FIELDS`` present; with ``title_field``, ``"title\\ntext"`` as the NQ benchmark
    sends them); a folder gives its files in name order; any other file is one passage. Empty texts are skipped.
    Raises InputError naming the file and line of anything unreadable."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from read_corpus(sorted(p for p in path.rglob("*") if p.is_file()), text_field=text_field,
                                   title_field=title_field)
            continue
        if not path.is_file():
            raise InputError(f"corpus file {str(path)!r} does not exist")
        if path.name.endswith(".jsonl"):
            yield from _read_jsonl(path, text_field, title_field)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if text.strip():
            yield text


def _read_jsonl(path: Path, text_field: str | None, title_field: str | None) -> Iterator[str]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise InputError(f"{path}:{n}: not JSON ({exc})") from None
            text = _record_text(record, text_field, title_field, f"{path}:{n}")
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
