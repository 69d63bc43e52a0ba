"""``ragtrim index --engine ray CORPUS...``: the passage-vector store filled by a Ray cluster.

This process resolves the scorer (``auto``: what ``trim()`` uses on this host) and takes each of its embedders'
recipes here: the key a later trim reads is the recipe's (model, pieces, backend, the host's rounding) and the
text's. Ray Data reads the corpus files in tasks and embeds batches in an actor pool; each actor rebuilds the same
embedders (class and parameters), refuses to start when its own recipe differs from this process's (its vectors
would be keyed for rounding no trim here reads), and writes each batch through ``index_passages``, so the text a
passage is stored under is the local engine's. A batch whose vectors are already stored costs a lookup only, so a
run that stops (a worker dies: Ray restarts it and retries the batch; the whole job dies: run it again) resumes
where it was, with nothing embedded twice.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim.engines.options import RayOptions
from ragtrim.engines.ray_cluster import (
    import_ray,
    pack_error,
    quiet_data_context,
    ragtrim_error,
    ray_cluster,
    runtime_env,
    unpack_error,
    worker_count,
)
from ragtrim.errors import ConfigError, InputError, RagtrimError, VectorStoreError
from ragtrim.scoring.base import Scorer
from ragtrim.scoring.embedding import CachedEmbedder
from ragtrim.vectors.index import (
    STDIN_NAMES,
    IndexReport,
    embedders_of,
    index_passages,
    read_corpus,
    resolve_index_scorer,
)
from ragtrim.vectors.store import OFF, configure_default_store

EmbedderSpec = tuple[type[CachedEmbedder], dict[str, Any]]
BLOCK_BYTES = 256 * 2**10
"""Ray Data block size of the passages read: a few hundred passages, so that one large corpus file is spread over
every embedding actor (Ray Data's default, 128 MiB, gives one file's passages to one actor)."""


def embedder_specs(embedders: Sequence[CachedEmbedder]) -> list[EmbedderSpec]:
    """Each embedder as its class and parameters (the store left to the worker's configuration)."""
    return [(type(e), {**e.get_params(), "vector_store": "default"}) for e in embedders]


def driver_recipes(specs: Sequence[EmbedderSpec], store: str, max_bytes: int | None) -> list[str]:
    """The recipe of each embedder on this host, with ``store`` as the default store (VectorStoreError, as the
    local engine's, when one has none)."""
    configure_default_store(store, max_bytes=max_bytes)
    recipes = []
    for cls, params in specs:
        embedder = cls(**params)
        persist = embedder._persistence()
        if persist is None:
            raise VectorStoreError(f"{embedder.name} has no vector store to fill (vector_store={store!r}; a store "
                                   "needs a built-in model backend on the CPU and a store that opens)")
        recipes.append(persist.recipe)
    return recipes


def read_file(row: dict[str, Any], text_field: str | None, title_field: str | None) -> Iterator[dict[str, Any]]:
    """A Ray Data task: the passages of one corpus file (``read_corpus``: an error names the file and line, and
    comes as a last row that carries it)."""
    try:
        for text in read_corpus([row["path"]], text_field=text_field, title_field=title_field):
            yield {"text": text, "error": b""}
    except RagtrimError as exc:
        yield {"text": "", "error": pack_error(exc)}


class BatchIndexer:
    """A Ray Data actor: the embedders rebuilt here, checked against this job's recipes, and each batch of passages
    stored through ``index_passages``."""

    def __init__(self, specs: bytes, recipes: list[str], store: str, max_bytes: int | None, clean_html: bool,
                 threads: int) -> None:
        import platform

        configure_default_store(store, max_bytes=max_bytes)
        self.embedders = [_with_threads(cls, params, threads, wanted)
                          for (cls, params), wanted in zip(pickle.loads(specs), recipes, strict=True)]
        self.clean_html = clean_html
        self.error = b""  # returned for every batch: an actor that fails to start would be started again and again
        for embedder, wanted in zip(self.embedders, recipes, strict=True):
            mine = _recipe(embedder)
            if mine != wanted and not self.error:
                self.error = pack_error(VectorStoreError(
                    f"worker on {platform.node()} embeds {embedder.name} with recipe {mine!r}, not the recipe of the "
                    f"host that started the job ({wanted!r}): its vectors would be stored under keys no trim there "
                    "reads. Run the workers on hosts like the trimming hosts (same CPU kind and packages), or start "
                    "`ragtrim index` on a host like the workers"))

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        error = self.error or next((bytes(e) for e in batch["error"] if e), b"")
        texts = [str(t) for t, e in zip(batch["text"], batch["error"], strict=True) if not e]
        stored = already = repaired = 0
        if not error:
            try:
                for embedder in self.embedders:
                    report = index_passages(texts, scorer=embedder, batch_size=max(1, len(texts)),
                                            clean_html=self.clean_html)
                    stored += report.stored
                    already += report.already
                    repaired += report.repaired
            except RagtrimError as exc:  # the store failed: the job fails with it, as the local engine does
                error = pack_error(exc)
        return {"passages": np.array([len(texts)]), "stored": np.array([stored]), "already": np.array([already]),
                "repaired": np.array([repaired]), "error": np.array([error], dtype=object)}


def _recipe(embedder: CachedEmbedder) -> str | None:
    persist = embedder._persistence()
    return persist.recipe if persist is not None else None


def _with_threads(cls: type[CachedEmbedder], params: dict[str, Any], threads: int, wanted: str) -> CachedEmbedder:
    """The embedder with ``threads`` CPU threads (the CPUs its worker holds; left to itself, a model takes half the
    host's cores in every worker) when that leaves its recipe as ``wanted``, else as configured."""
    if "threads" in params and params["threads"] is None:
        fitted = cls(**{**params, "threads": threads})
        if _recipe(fitted) == wanted:
            return fitted
    return cls(**params)


def corpus_files(paths: Sequence[str | Path]) -> list[str]:
    """The files of ``paths`` in ``read_corpus``'s order (a folder: its files in name order)."""
    files: list[str] = []
    for raw in paths:
        if str(raw) in STDIN_NAMES:
            raise ConfigError("--engine ray reads files that every worker opens; stdin ('-') is for --engine local")
        path = Path(raw)
        if path.is_dir():
            files += [str(p) for p in sorted(p for p in path.rglob("*") if p.is_file())]
        elif path.is_file():
            files.append(str(path))
        else:
            raise InputError(f"corpus file {str(path)!r} does not exist")
    return files


def run_ray_index(corpus: Sequence[str | Path], *, store: str, scorer: Scorer | str = "auto",
                  options: RayOptions | None = None, max_bytes: int | None = None, batch_size: int = 256,
                  clean_html: bool = True, text_field: str | None = None, title_field: str | None = None,
                  progress: Callable[[int], None] | None = None) -> IndexReport:
    """``index_passages`` over the corpus files on Ray (see the module docstring): ``store`` is the file path or
    ``redis://`` URL every worker writes to (one machine, or a store every worker reaches); ``progress(n)`` after
    each batch of ``n`` passages."""
    import_ray()  # a missing extra first: nothing below can run without it
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if store.strip().lower() in OFF:
        raise VectorStoreError(f"--engine ray needs a vector store to fill, got {store!r}")
    files = corpus_files(corpus)
    resolved = resolve_index_scorer(scorer)
    embedders = embedders_of(resolved)
    if not embedders:
        raise VectorStoreError(f"scorer {resolved.name!r} uses no embedding model: there are no vectors to store")
    specs = embedder_specs(embedders)
    recipes = driver_recipes(specs, store, max_bytes)
    started = time.perf_counter()
    count = stored = already = repaired = 0
    opts = options or RayOptions()
    try:
        with ray_cluster(opts) as ray:
            ctx = quiet_data_context(ray, ordered=False)
            block_bytes, ctx.target_max_block_size = ctx.target_max_block_size, BLOCK_BYTES
            workers = worker_count(ray, opts)
            ds = ray.data.from_items([{"path": f} for f in files], override_num_blocks=max(1, len(files)))
            # Reading holds no CPU of its own: the embedders hold them all, and reading is a small part of the work.
            ds = ds.flat_map(read_file, fn_kwargs={"text_field": text_field, "title_field": title_field},
                             num_cpus=0, runtime_env=runtime_env())
            ds = ds.map_batches(
                BatchIndexer, batch_size=batch_size, compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=opts.cpus_per_worker, runtime_env=runtime_env(),
                fn_constructor_kwargs={"specs": pickle.dumps(specs), "recipes": recipes, "store": store,
                                       "max_bytes": max_bytes, "clean_html": clean_html,
                                       "threads": max(1, round(opts.cpus_per_worker))})
            try:
                for row in ds.iter_rows():
                    if row["error"]:
                        raise unpack_error(row["error"])
                    count += int(row["passages"])
                    stored += int(row["stored"])
                    already += int(row["already"])
                    repaired += int(row["repaired"])
                    if progress is not None:
                        progress(int(row["passages"]))
            finally:
                ctx.target_max_block_size = block_bytes
    except Exception as exc:  # a worker's InputError (a bad corpus line) or VectorStoreError is raised as itself
        found = ragtrim_error(exc)
        if found is exc:
            raise
        raise found from None
    return IndexReport(passages=count, stored=stored, already=already, repaired=repaired,
                       embedders=tuple(e.name for e in embedders), seconds=time.perf_counter() - started)


def run_ray_index_cli(args: Any, *, progress: Callable[[int], None]) -> IndexReport:
    """``ragtrim index --engine ray``: ``run_ray_index`` with the command's options (the store: ``--store``, else the
    default store's spec)."""
    from ragtrim.vectors.store import default_store_spec

    spec, max_bytes = default_store_spec()
    return run_ray_index(args.corpus, store=spec, scorer=args.scorer, batch_size=args.batch_size,
                         max_bytes=max_bytes, clean_html=not args.no_html_cleanup, text_field=args.text_field,
                         title_field=args.title_field, progress=progress,
                         options=RayOptions(address=args.ray_address, workers=args.workers))
