"""The QA savings benchmark: trim multi-document QA contexts with several methods and measure what survives.

Measurement (``measure``), aggregation (``aggregate``) and the run driver live here; ``qa_report`` prints and
``recall_plot`` draws; ``qa_savings`` is the command. Per-request records carry an error string instead of raising, so one failure never hides the rest.
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim.errors import ConfigError, InputError
from ragtrim.models import Chunk
from ragtrim.pipeline import Pipeline
from ragtrim.savings import answer_in_text, peak_memory_mib
from ragtrim.scoring.embedding import EmbeddingScorer
from ragtrim.stages.base import Stage
from ragtrim.stages.budget import TokenBudget
from ragtrim.text.tokens import TiktokenCounter, TokenCounter
from ragtrim_bench.common.results import results_root, write_result
from ragtrim_bench.common.stats import mean, summarize_ms
from ragtrim_bench.datasets.nq import DistractorKind, GoldPosition, QAInstance

DATASETS = ("nq", "nq-random", "squad")
FAMILIES = ("none", "bm25-topk", "emb-topk", "bm25-budget", "emb-budget", "ragtrim-default", "ragtrim-bm25",
            "ragtrim-emb-sent", "langchain")
DEFAULT_FRACTIONS = (1 / 2, 1 / 4, 1 / 8, 1 / 16)
EMBEDDING_FAMILIES = frozenset({"emb-topk", "emb-budget", "ragtrim-default", "ragtrim-emb-sent", "langchain"})
"""Families that use MiniLM (``ragtrim-default`` does when the embeddings extra is installed, as here)."""


# -- configuration --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QABenchConfig:
    """Everything one benchmark run depends on (recorded in the JSON)."""

    dataset: str = "nq"
    n_docs: int = 20
    positions: tuple[str, ...] = ("first", "middle", "last")
    offset: int = 0
    """NQ: skip this many questions first (``--offset 1062 --limit 1062``: the second half, which the default
    recipe was not tuned on)."""
    limit: int = 500
    """NQ: the first ``limit`` questions (after ``offset``) of the file (distractors still come from all 2,124).
    SQuAD: the first ceil(limit / articles) questions of every article."""
    methods: tuple[str, ...] = FAMILIES
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    seed: int = 0
    latency_sample: int = 50
    """Requests per method family in each latency pass (cold, and passages primed; budget 1/4, first setting)."""
    gemma: bool = True
    torch_threads: int | None = 1
    """torch intra-op threads for MiniLM (None: torch's default, one per core). On this shared 2-core machine two
    threads spin against other processes: a one-query encode took ~500 ms with 2 threads under load, ~19 ms
    with 1."""
    progress: bool = True

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ConfigError(f"dataset must be one of {list(DATASETS)}, got {self.dataset!r}")
        if self.n_docs < 2:
            raise ConfigError(f"n_docs must be >= 2, got {self.n_docs}")
        for p in self.positions:
            if p not in ("first", "middle", "last") and not p.isdigit():
                raise ConfigError(f"positions must be first, middle, last or 0-based ints, got {p!r}")
        if self.limit < 1:
            raise ConfigError(f"limit must be >= 1, got {self.limit}")
        if self.offset < 0:
            raise ConfigError(f"offset must be >= 0, got {self.offset}")
        if self.offset and self.dataset == "squad":
            raise ConfigError(f"offset applies to the NQ datasets only, got offset={self.offset} with squad; drop it")
        unknown = [m for m in self.methods if m not in FAMILIES]
        if unknown:
            raise ConfigError(f"unknown methods {unknown}; choose from {list(FAMILIES)}")
        for f in self.fractions:
            if not 0 < f <= 1:
                raise ConfigError(f"budget fractions must be within (0, 1], got {f}")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ConfigError(f"torch_threads must be >= 1 or None, got {self.torch_threads}")
        if self.latency_sample < 0:
            raise ConfigError(f"latency_sample must be >= 0, got {self.latency_sample}")


# -- data -----------------------------------------------------------------------------------------------------------
def load_settings(config: QABenchConfig) -> dict[str, list[QAInstance]]:
    """Setting name -> instances: ``nq20-bm25-first`` ... for NQ, ``squad-article`` for SQuAD."""
    if config.dataset == "squad":
        from ragtrim_bench.datasets.squad import load_squad, squad_instances

        articles = load_squad()
        per_article = math.ceil(config.limit / max(1, len(articles)))
        return {"squad-article": squad_instances(articles, limit_per_article=per_article)}
    from ragtrim_bench.datasets.nq import build_multidoc, load_nq_open

    pool = load_nq_open()
    questions = pool[config.offset: config.offset + config.limit]
    if not questions:
        raise ConfigError(f"offset {config.offset} is past the {len(pool)} NQ questions; use a smaller offset")
    kind: DistractorKind = "bm25" if config.dataset == "nq" else "random"
    out: dict[str, list[QAInstance]] = {}
    for pos in config.positions:
        position: GoldPosition | int = int(pos) if pos.isdigit() else pos  # type: ignore[assignment]
        out[f"nq{config.n_docs}-{kind}-{pos}"] = build_multidoc(
            questions, n_docs=config.n_docs, gold_position=position, distractors=kind, seed=config.seed, pool=pool
        )
    return out


def instance_chunks(instance: QAInstance, counter: TokenCounter) -> tuple[Chunk, ...]:
    return tuple(Chunk(text=p.content, id=p.id, token_count=counter.count(p.content)) for p in instance.passages)


# -- scoring tools --------------------------------------------------------------------------------------------------
CACHE_DIR = Path(".cache")
"""Derived files a run reuses (MiniLM embeddings, the Gemma tokenizer), relative to the working directory."""


class CachedEmbedder:
    """A Scorer over ``ragtrim.scoring.EmbeddingScorer`` (MiniLM) whose embeddings persist in ``.cache/``.

    Embeddings are deterministic, so reusing them changes no result; it only spares re-encoding thousands of
    passages on every run. The cold latency pass uses a plain ``EmbeddingScorer(cache_size=0)`` instead.
    """

    def __init__(self, *, inner: Any = None) -> None:
        self.inner = inner if inner is not None else EmbeddingScorer(cache_size=0)
        self._store: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def warm_up(self) -> None:
        self.inner.warm_up()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._store))
        if missing:
            for t, v in zip(missing, self.inner.embed(missing)):
                self._store[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self._store[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        m = self.embed([query, *texts])
        return [float(x) for x in m[1:] @ m[0]]

    def precompute(self, texts: Sequence[str], *, progress: bool, cache_file: Path | None = None,
                   batch: int = 128) -> None:
        if cache_file is not None and cache_file.is_file():
            by_key = _read_npz(cache_file)
            for t in texts:
                v = by_key.get(_text_key(t))
                if v is not None:
                    self._store[t] = v
        missing = [t for t in dict.fromkeys(texts) if t not in self._store]
        for i in _progress(range(0, len(missing), batch), progress, desc="embedding", unit="batch"):
            self.embed(missing[i:i + batch])
        if cache_file is not None and missing:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            keys = [_text_key(t) for t in self._store]
            np.savez(cache_file, keys=np.array(keys), vecs=np.stack(list(self._store.values())))


def embedding_scorer(*, cached: bool = True) -> Any:
    """The MiniLM scorer the embedding methods share: cached (quality pass) or not (cold latency pass)."""
    return CachedEmbedder() if cached else EmbeddingScorer(cache_size=0)


def bm25_scores(query: str, texts: Sequence[str]) -> list[float]:
    """Okapi BM25 of each text against the query, statistics from these texts only (``ragtrim.scoring``)."""
    from ragtrim.scoring.bm25 import BM25Scorer

    return BM25Scorer().score(query, texts)


def embedding_scores(scorer: Any, query: str, texts: Sequence[str]) -> list[float]:
    return [float(x) for x in scorer.score(query, texts)]


# -- methods --------------------------------------------------------------------------------------------------------
Trim = Callable[[QAInstance, tuple[Chunk, ...], int], tuple[Chunk, ...]]


@dataclass(frozen=True)
class Method:
    """A named configuration: ``trim(instance, chunks, budget_tokens) -> kept chunks``."""

    name: str
    family: str
    budget_fraction: float | None
    trim: Trim
    description: str = ""


def fraction_label(f: float | None) -> str:
    if f is None:
        return "full"
    inv = 1 / f
    return f"1/{round(inv)}" if abs(inv - round(inv)) < 1e-9 else f"{f:g}"


def top_k_for(n_chunks: int, fraction: float) -> int:
    """Whole passages kept by a fixed top-k sized to a budget fraction: round(n * fraction), at least 1."""
    return max(1, round(n_chunks * fraction))


def _top_k(chunks: tuple[Chunk, ...], scores: Sequence[float], k: int) -> tuple[Chunk, ...]:
    best = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))[:k]
    return tuple(chunks[i] for i in sorted(best))


def _fill_budget(chunks: Sequence[Chunk], query: str, budget: int, counter: TokenCounter,
                 policy: str = "score") -> tuple[Chunk, ...]:
    """Whole passages best-first until the budget, the last one cut at a sentence boundary (TokenBudget)."""
    stage = TokenBudget(max_tokens=budget, policy=policy, truncate=True)  # type: ignore[arg-type]
    return Pipeline([stage], tokenizer=counter).run(list(chunks), query=query).chunks


@dataclass
class Tools:
    counter: TokenCounter
    embedder: Any
    """An ``EmbeddingScorer`` shared by every embedding-based method (one model, one cache)."""
    notes: list[str] = field(default_factory=list)


def _scored(chunks: tuple[Chunk, ...], scores: Sequence[float]) -> list[Chunk]:
    return [c.with_score(s) for c, s in zip(chunks, scores)]


def emb_sent_stages(budget: int) -> list[Stage]:
    """The MiniLM alternative: the default pipeline with MiniLM (not BM25) scoring the sentences too."""
    from ragtrim.api import default_stages
    from ragtrim.stages.compress import SentenceCompressor

    return [SentenceCompressor(scorer="embedding", max_tokens=budget) if isinstance(s, SentenceCompressor) else s
            for s in default_stages(budget=budget, scorer="embedding")]


def family_stages(family: str, budget: int) -> list[Stage]:
    """The stages of a ragtrim pipeline family: ``ragtrim-default`` is ``default_stages(budget=b)`` exactly."""
    from ragtrim.api import default_stages

    if family == "ragtrim-default":
        return default_stages(budget=budget)
    if family == "ragtrim-bm25":
        return default_stages(budget=budget, scorer="bm25")
    if family == "ragtrim-emb-sent":
        return emb_sent_stages(budget)
    raise ConfigError(f"family must be ragtrim-default, ragtrim-bm25 or ragtrim-emb-sent, got {family!r}")


def build_methods(config: QABenchConfig, tools: Tools) -> list[Method]:
    counter = tools.counter
    out: list[Method] = []
    fams = config.methods

    if "none" in fams:
        out.append(Method("none", "none", None, lambda inst, chunks, budget: chunks, "no trimming"))
    for f in config.fractions:
        label = fraction_label(f)

        def bm25_topk(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int, f: float = f) -> tuple[Chunk, ...]:
            return _top_k(chunks, bm25_scores(inst.question, [c.text for c in chunks]), top_k_for(len(chunks), f))

        def emb_topk(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int, f: float = f) -> tuple[Chunk, ...]:
            scores = embedding_scores(tools.embedder, inst.question, [c.text for c in chunks])
            return _top_k(chunks, scores, top_k_for(len(chunks), f))

        def bm25_budget(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int) -> tuple[Chunk, ...]:
            scores = bm25_scores(inst.question, [c.text for c in chunks])
            return _fill_budget(_scored(chunks, scores), inst.question, budget, counter)

        def emb_budget(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int) -> tuple[Chunk, ...]:
            scores = embedding_scores(tools.embedder, inst.question, [c.text for c in chunks])
            return _fill_budget(_scored(chunks, scores), inst.question, budget, counter)

        def pipeline_trim(family: str) -> Trim:
            def trim(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int) -> tuple[Chunk, ...]:
                return Pipeline(family_stages(family, budget), tokenizer=counter).run(
                    list(chunks), query=inst.question).chunks

            return trim

        table: dict[str, tuple[Trim, str]] = {
            "bm25-topk": (bm25_topk, "fixed top-k = round(n x fraction) whole passages by BM25"),
            "emb-topk": (emb_topk, "fixed top-k = round(n x fraction) whole passages by MiniLM cosine"),
            "bm25-budget": (bm25_budget, "BM25 rank, fill the budget best-first, last passage cut at a sentence"),
            "emb-budget": (emb_budget, "MiniLM rank, fill the budget best-first, last passage cut at a sentence"),
            "ragtrim-default": (pipeline_trim("ragtrim-default"),
                                "ragtrim.api.default_stages(budget=b): MiniLM chunks -> BM25 sentences -> budget"),
            "ragtrim-bm25": (pipeline_trim("ragtrim-bm25"),
                             "default_stages(budget=b, scorer='bm25'): BM25 chunks -> BM25 sentences -> budget"),
            "ragtrim-emb-sent": (pipeline_trim("ragtrim-emb-sent"),
                                 ("default stages with SentenceCompressor(scorer='embedding'): MiniLM chunks "
                                  "and sentences -> budget")),
        }
        for fam in fams:
            if fam in table:
                trim_fn, desc = table[fam]
                out.append(Method(f"{fam}@{label}", fam, f, trim_fn, desc))
        if "langchain" in fams:
            peer = langchain_trim(tools)
            if peer is None:
                if f == config.fractions[0]:
                    tools.notes.append("langchain: not installable (langchain-community/classic import failed)")
            else:
                out.append(Method(f"langchain@{label}", "langchain", f, peer,
                                  "LangChain EmbeddingsRedundantFilter + EmbeddingsFilter (MiniLM), then TokenBudget"))
    return out


def langchain_trim(tools: Tools) -> Trim | None:
    """The LangChain peer: redundancy filter + relevance filter over the same MiniLM model, budget stage after.

    EmbeddingsFilter keeps the k most similar documents in descending similarity; a similarity threshold cannot
    hit a token budget, so k is all documents and TokenBudget (position policy on that order) enforces the budget.
    Returns None when the LangChain packages cannot be imported.
    """
    try:
        from langchain_classic.retrievers.document_compressors import (
            DocumentCompressorPipeline,
            EmbeddingsFilter,
        )
        from langchain_community.document_transformers import EmbeddingsRedundantFilter
        from langchain_core.documents import Document
        from langchain_core.embeddings import Embeddings
    except Exception:  # noqa: BLE001 - optional peer: any import failure means "not installable", not a crash
        return None

    class MiniLMEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in tools.embedder.embed(texts)]

        def embed_query(self, text: str) -> list[float]:
            return [float(x) for x in tools.embedder.embed([text])[0]]

    def trim(inst: QAInstance, chunks: tuple[Chunk, ...], budget: int) -> tuple[Chunk, ...]:
        emb = MiniLMEmbeddings()
        pipe = DocumentCompressorPipeline(transformers=[
            EmbeddingsRedundantFilter(embeddings=emb),
            EmbeddingsFilter(embeddings=emb, k=len(chunks)),
        ])
        docs = [Document(page_content=c.text, metadata={"id": c.id}) for c in chunks]
        kept = pipe.compress_documents(docs, inst.question)
        by_id = {c.id: c for c in chunks}
        ordered = [by_id[str(d.metadata["id"])] for d in kept]
        return _fill_budget(ordered, inst.question, budget, tools.counter, policy="position")

    return trim


# -- measurement ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QARecord:
    """One request under one method."""

    setting: str
    method: str
    instance_id: str
    tokens_before: int = 0
    tokens_after: int = 0
    gemma_tokens_before: int | None = None
    gemma_tokens_after: int | None = None
    chunks_before: int = 0
    chunks_after: int = 0
    budget_tokens: int = 0
    latency_ms: float = 0.0
    is_impossible: bool = False
    answer_kept: bool | None = None
    gold_kept: bool | None = None
    plausible_kept: bool | None = None
    error: str | None = None


def budget_for(tokens_before: int, fraction: float | None) -> int:
    """The token budget of a request: floor(tokens_before x fraction), at least 1 (no fraction: no limit)."""
    return tokens_before if fraction is None else max(1, math.floor(tokens_before * fraction))


def measure(setting: str, method: Method, instance: QAInstance, chunks: tuple[Chunk, ...], counter: TokenCounter,
            gemma: TokenCounter | None = None) -> QARecord:
    """Trim one request with one method and judge what is left (errors recorded, never raised)."""
    before = sum(c.token_count if c.token_count is not None else counter.count(c.text) for c in chunks)
    budget = budget_for(before, method.budget_fraction)
    base = QARecord(setting=setting, method=method.name, instance_id=instance.id, tokens_before=before,
                    chunks_before=len(chunks), budget_tokens=budget, is_impossible=instance.is_impossible)
    started = time.perf_counter()
    try:
        kept = method.trim(instance, chunks, budget)
    except Exception as exc:  # noqa: BLE001 - a record, not a crash: one bad request must not hide the rest
        return replace(base, error=f"{type(exc).__name__}: {exc}")
    latency_ms = (time.perf_counter() - started) * 1000
    gold = set(instance.gold_ids)
    texts = [c.text for c in kept]
    return replace(
        base,
        tokens_after=sum(counter.count(t) for t in texts),
        gemma_tokens_before=None if gemma is None else sum(gemma.count(c.text) for c in chunks),
        gemma_tokens_after=None if gemma is None else sum(gemma.count(t) for t in texts),
        chunks_after=len(kept),
        latency_ms=latency_ms,
        answer_kept=None if instance.is_impossible else any(answer_in_text(instance.answers, t) for t in texts),
        gold_kept=bool(gold & {c.id for c in kept}) if gold else None,
        plausible_kept=(any(answer_in_text(instance.plausible_answers, t) for t in texts)
                        if instance.is_impossible and instance.plausible_answers else None),
    )


def _rate(values: Iterable[bool | None]) -> float:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else math.nan


def aggregate(records: Sequence[QARecord], methods: Sequence[Method]) -> list[dict[str, Any]]:
    """One flat row per (setting, method): token means, compression ratio, recalls, latency percentiles."""
    by_key: dict[tuple[str, str], list[QARecord]] = {}
    for r in records:
        by_key.setdefault((r.setting, r.method), []).append(r)
    info = {m.name: m for m in methods}
    rows: list[dict[str, Any]] = []
    for (setting, name), recs in by_key.items():
        ok = [r for r in recs if r.error is None]
        m = info.get(name)
        before = sum(r.tokens_before for r in ok)
        after = sum(r.tokens_after for r in ok)
        gemma_ok = [r for r in ok if r.gemma_tokens_before is not None]
        g_before = sum(r.gemma_tokens_before or 0 for r in gemma_ok)
        g_after = sum(r.gemma_tokens_after or 0 for r in gemma_ok)
        row: dict[str, Any] = {
            "setting": setting,
            "method": name,
            "family": m.family if m else "",
            "budget_fraction": m.budget_fraction if m else None,
            "budget_label": fraction_label(m.budget_fraction if m else None),
            "n_requests": len(recs),
            "n_errors": len(recs) - len(ok),
            "n_answerable": sum(1 for r in ok if not r.is_impossible),
            "n_unanswerable": sum(1 for r in ok if r.is_impossible),
            "mean_tokens_before_cl100k": mean([r.tokens_before for r in ok]),
            "mean_tokens_after_cl100k": mean([r.tokens_after for r in ok]),
            "compression_ratio_cl100k": before / after if after else math.inf if before else 1.0,
            "mean_tokens_before_gemma3": mean([float(r.gemma_tokens_before or 0) for r in gemma_ok])
            if gemma_ok else None,
            "mean_tokens_after_gemma3": mean([float(r.gemma_tokens_after or 0) for r in gemma_ok])
            if gemma_ok else None,
            "compression_ratio_gemma3": (g_before / g_after if g_after else None) if gemma_ok else None,
            "max_budget_overrun_tokens": max([max(0, r.tokens_after - r.budget_tokens) for r in ok], default=0),
            "answer_recall": _rate(r.answer_kept for r in ok),
            "gold_passage_recall": _rate(r.gold_kept for r in ok if not r.is_impossible),
            "unanswerable_plausible_kept_rate": _rate(r.plausible_kept for r in ok),
            "mean_chunks_after": mean([r.chunks_after for r in ok]),
        }
        row.update(summarize_ms([r.latency_ms for r in ok], prefix="trim"))
        if any(r.error for r in recs):
            row["first_error"] = next(r.error for r in recs if r.error)
        rows.append(row)
    return rows


# -- the run --------------------------------------------------------------------------------------------------------
GEMMA_TOKENIZER_CACHE = CACHE_DIR / "gemma3_tokenizer.json"
EMBEDDING_CACHE = CACHE_DIR / "qa_minilm_shared.npz"
EMBEDDING_CACHE_SIZE = 1_000_000
"""LRU size given to the shared MiniLM scorer for a run: every passage, question and sentence of a run fits, so
each distinct text is encoded once per process."""


def gemma_counter(notes: list[str], *, cache_file: Path = GEMMA_TOKENIZER_CACHE) -> TokenCounter | None:
    """The Gemma 3 tokenizer rebuilt from the GGUF (``ragtrim_bench.models.gemma``; 40-120 s), cached as a
    tokenizer.json under ``.cache/``; None with a note when it cannot be built."""
    from ragtrim.text.tokens import HFTokenizerCounter

    try:
        if not cache_file.is_file():
            from ragtrim_bench.models import gemma as model_prep

            tok = model_prep.build_tokenizer(model_prep.find_gguf())
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tok.save(str(cache_file))
        counter = HFTokenizerCounter(tokenizer=str(cache_file), label="gemma3")
        counter.count("warm up")
        return counter
    except Exception as exc:  # noqa: BLE001 - optional column: skipped with a note, never fatal
        notes.append(f"gemma3 token counts skipped: {type(exc).__name__}: {exc}")
        return None


def _progress(it: Iterable[Any], enabled: bool, **kw: Any) -> Iterable[Any]:
    if not enabled:
        return it
    from tqdm import tqdm

    bar: Iterable[Any] = tqdm(it, **kw)  # tqdm writes to stderr
    return bar


def shared_embedder() -> EmbeddingScorer:
    """The process-wide MiniLM scorer (``get_scorer("embedding")``) that the default pipeline's stages use, with
    an LRU large enough for a whole run; the benchmark's own embedding methods use the same one."""
    from ragtrim.scoring.registry import get_scorer

    scorer = get_scorer("embedding")
    if not isinstance(scorer, EmbeddingScorer):
        raise ConfigError(f"the shared 'embedding' scorer must be an EmbeddingScorer, got {scorer!r}")
    scorer.cache_size = max(scorer.cache_size, EMBEDDING_CACHE_SIZE)
    return scorer


def _text_key(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()


def _read_npz(cache_file: Path) -> dict[str, np.ndarray]:
    """An embedding cache file (``keys``: sha1 of each text, ``vecs``) as key -> vector."""
    with np.load(cache_file) as data:
        return dict(zip((str(k) for k in data["keys"]), data["vecs"]))


def load_embeddings(scorer: EmbeddingScorer, texts: Sequence[str], *, cache_file: Path | None, progress: bool,
                    batch: int = 256) -> dict[str, np.ndarray]:
    """Prime ``scorer`` with an embedding for every text: from ``cache_file`` where present, else encoded in
    batches (each distinct text once). Returns text -> unit vector (the "vector store" of the primed latency pass).
    Embeddings are deterministic, so reuse changes no result."""
    wanted = list(dict.fromkeys(texts))
    store: dict[str, np.ndarray] = {}
    if cache_file is not None and cache_file.is_file():
        by_key = _read_npz(cache_file)
        for t in wanted:
            v = by_key.get(_text_key(t))
            if v is not None:
                store[t] = np.asarray(v, dtype=np.float32)
    if store:
        scorer.prime(list(store), np.stack(list(store.values())))
    missing = [t for t in wanted if t not in store]
    for i in _progress(range(0, len(missing), batch), progress, desc="embedding", unit="batch"):
        part = missing[i:i + batch]
        store.update(zip(part, scorer.embed(part)))
    return store


def save_embeddings(scorer: EmbeddingScorer, cache_file: Path) -> int:
    """Merge everything the scorer has embedded (sentences included) into ``cache_file``; returns its size."""
    merged: dict[str, np.ndarray] = {}
    if cache_file.is_file():
        merged.update(_read_npz(cache_file))
    merged.update((_text_key(t), v) for t, v in scorer.cached_items())
    if merged:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache_file, keys=np.array(list(merged)), vecs=np.stack(list(merged.values())))
    return len(merged)


def reset_caches(scorer: EmbeddingScorer | None) -> None:
    """Forget every embedding and every BM25 tokenization, as in a fresh process (the model stays loaded)."""
    from ragtrim.scoring.bm25 import clear_tokenizer_cache

    clear_tokenizer_cache()
    if scorer is not None:
        scorer.clear_cache()


def run_label(config: QABenchConfig) -> str:
    """The output file stem: dataset, then ``-30docs`` / ``-q1062-2123`` when those differ from the defaults."""
    label = config.dataset
    if config.dataset != "squad" and config.n_docs != 20:
        label += f"-{config.n_docs}docs"
    if config.offset:
        label += f"-q{config.offset}-{config.offset + config.limit - 1}"
    return label


def run_qa_benchmark(config: QABenchConfig) -> dict[str, Any]:
    """Run every method over every setting; returns the JSON-ready result (nothing printed)."""
    from ragtrim.api import default_stages, resolve_scorer

    notes: list[str] = []
    started = time.perf_counter()
    settings = load_settings(config)
    counter = TiktokenCounter()
    needs_emb = any(m in EMBEDDING_FAMILIES for m in config.methods)
    embedder = shared_embedder() if needs_emb else None
    if embedder is not None and config.torch_threads is not None:
        import torch

        torch.set_num_threads(config.torch_threads)
    tools = Tools(counter=counter, embedder=embedder, notes=notes)
    gemma = gemma_counter(notes) if config.gemma else None
    methods = build_methods(config, tools)
    store: dict[str, np.ndarray] = {}
    embed_s = 0.0
    if embedder is not None:
        t0 = time.perf_counter()
        questions = sorted({i.question for insts in settings.values() for i in insts})
        passages = sorted({p.content for insts in settings.values() for i in insts for p in i.passages})
        store = load_embeddings(embedder, passages + questions, cache_file=EMBEDDING_CACHE,
                                progress=config.progress)
        embed_s = time.perf_counter() - t0
    first = next(iter(settings.values()))
    if first:  # warm-up: model loads, tokenizer caches, imports, before anything is timed
        chunks = instance_chunks(first[0], counter)
        for m in methods:
            measure("warmup", m, first[0], chunks, counter, gemma)
    records: list[QARecord] = []
    for setting, instances in settings.items():
        for inst in _progress(instances, config.progress, desc=setting, unit="q"):
            chunks = instance_chunks(inst, counter)
            for m in methods:
                records.append(measure(setting, m, inst, chunks, counter, gemma))
    rows = aggregate(records, methods)
    if embedder is not None:
        save_embeddings(embedder, EMBEDDING_CACHE)
    latency = latency_passes(config, settings, methods, tools, store)
    budget_example = 1000
    return {
        "benchmark": "qa_savings",
        "dataset": config.dataset,
        "label": run_label(config),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "settings": {k: len(v) for k, v in settings.items()},
        "methods": [{"name": m.name, "family": m.family, "budget_fraction": m.budget_fraction,
                     "description": m.description} for m in methods],
        "default_scorer_resolved": resolve_scorer("auto"),
        "default_pipeline_example_budget_tokens": budget_example,
        "default_pipeline": Pipeline(default_stages(budget=budget_example), tokenizer=counter).to_dict(),
        "rows": rows,
        "request_tokens": [
            {"setting": r.setting, "instance_id": r.instance_id, "tokens_before": r.tokens_before,
             "tokens_after": r.tokens_after}
            for r in records
            if r.error is None and r.method == WORKLOAD_METHOD
        ],
        "latency": latency,
        "notes": notes,
        "tokenizers": {"budget": counter.name, "gemma3": gemma.name if gemma else None},
        "embedding_prep_s": embed_s,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "wall_s": time.perf_counter() - started,
    }


WORKLOAD_METHOD = "ragtrim-default@1/4"
"""The method whose per-request token counts go into ``request_tokens``: a before/after workload for the capacity
planner (``ragtrim plan --qa-results FILE --records-key request_tokens``)."""

LATENCY_CONDITIONS = ("cold", "primed")
"""``cold``: no embedding and no BM25 tokenization cached for the request (everything encoded inside the timed
call); ``primed``: the passages' embeddings are in the cache (as when the vector store already holds them), so
the query and the sentences are the only new texts. For BM25-only families the two are the same."""


def latency_passes(config: QABenchConfig, settings: Mapping[str, Sequence[QAInstance]], methods: Sequence[Method],
                   tools: Tools, store: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Per family at the budget nearest 1/4: per-request latency under each condition, tracemalloc's peak Python
    heap for one request, and the process's peak RSS after the family's passes."""
    if config.latency_sample == 0:
        return []
    setting, instances = next(iter(settings.items()))
    sample = list(instances)[: config.latency_sample]
    if not sample:
        return []
    target = 1 / 4
    chosen: dict[str, Method] = {}
    for m in methods:
        cur = chosen.get(m.family)
        if cur is None or (m.budget_fraction is not None and cur.budget_fraction is not None
                           and abs(m.budget_fraction - target) < abs(cur.budget_fraction - target)):
            chosen[m.family] = m
    embedder = tools.embedder if isinstance(tools.embedder, EmbeddingScorer) else None
    out: list[dict[str, Any]] = []
    for fam, m in chosen.items():
        conditions = LATENCY_CONDITIONS if fam in EMBEDDING_FAMILIES else ("cold",)
        for condition in conditions:
            def prepare(inst: QAInstance, condition: str = condition) -> tuple[Chunk, ...]:
                reset_caches(embedder)
                if condition == "primed" and embedder is not None:
                    texts = [p.content for p in inst.passages if p.content in store]
                    if texts:
                        embedder.prime(texts, np.stack([store[t] for t in texts]))
                # a fresh counter: no token count of this request's sentences is cached either
                return instance_chunks(inst, TiktokenCounter())

            measure("warmup", m, sample[0], prepare(sample[0]), tools.counter)
            lat: list[float] = []
            errors = 0
            for inst in sample:
                rec = measure(setting, m, inst, prepare(inst), tools.counter)
                errors += rec.error is not None
                lat.append(rec.latency_ms)
            chunks = prepare(sample[0])
            _, peak_mib = peak_memory_mib(partial(measure, setting, m, sample[0], chunks, tools.counter))
            out.append({"family": fam, "method": m.name, "condition": condition, "setting": setting,
                        "n_requests": len(sample), "n_errors": errors,
                        "mean_chunks_before": mean([len(i.passages) for i in sample]),
                        **summarize_ms(lat, prefix="trim"), "peak_traced_python_mib": peak_mib,
                        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    if embedder is not None and store:  # leave the shared cache as the main pass had it
        embedder.prime(list(store), np.stack(list(store.values())))
    return out


def write_results(result: Mapping[str, Any], output_dir: Path, *, command: str = "") -> tuple[Path, Path | None]:
    """Write ``qa_savings_<label>.json`` (with ``command``, the run that made it) and the recall-vs-ratio PNG (None
    when matplotlib is missing)."""
    label = str(result.get("label") or result["dataset"])
    json_path = write_result(output_dir / f"qa_savings_{label}.json", result, command=command,
                             packages=["sentence-transformers", "torch", "langchain-community"])
    png: Path | None = output_dir / f"qa_recall_vs_ratio_{label}.png"
    try:
        from ragtrim_bench.relevance.recall_plot import plot_recall_vs_ratio

        plot_recall_vs_ratio(result["rows"], png, title=f"QA savings: {label}")  # type: ignore[arg-type]
    except ImportError:
        png = None
    return json_path, png


# -- CLI glue -------------------------------------------------------------------------------------------------------
def add_bench_args(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``ragtrim-bench relevance qa_savings``."""
    parser.add_argument("--dataset", choices=DATASETS, default="nq",
                        help="nq: BM25 hard distractors; nq-random: random distractors (sanity); squad: same article")
    parser.add_argument("--n-docs", type=int, default=20, choices=(10, 20, 30), help="NQ passages per question")
    parser.add_argument("--positions", default="first,middle,last", help="NQ gold positions, comma-separated")
    parser.add_argument("--offset", type=int, default=0,
                        help="NQ: skip the first N questions (--offset 1062 --limit 1062: the untuned second half)")
    parser.add_argument("--limit", type=int, default=500, help="questions (NQ: first N; SQuAD: spread over articles)")
    parser.add_argument("--methods", default=",".join(FAMILIES), help=f"comma-separated subset of {','.join(FAMILIES)}")
    parser.add_argument("--fractions", default="1/2,1/4,1/8,1/16", help="budgets as fractions of the original tokens")
    parser.add_argument("--latency-sample", type=int, default=50,
                        help="requests per family in each latency pass (cold, primed)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads for MiniLM (0: torch's default, one per core)")
    parser.add_argument("--no-gemma", action="store_true", help="skip Gemma 3 token counts")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where the JSON and PNG go (default: benchmarks/results/relevance)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def parse_fraction(text: str) -> float:
    """A budget fraction from the command line: ``1/4`` or ``0.25`` (ConfigError otherwise)."""
    try:
        if "/" in text:
            a, b = text.split("/", 1)
            return float(a) / float(b)
        return float(text)
    except (ValueError, ZeroDivisionError):
        raise ConfigError(f"budget fraction must look like 1/4 or 0.25, got {text!r}") from None


def config_from_args(args: argparse.Namespace) -> QABenchConfig:
    return QABenchConfig(
        dataset=args.dataset,
        n_docs=args.n_docs,
        positions=tuple(p.strip() for p in args.positions.split(",") if p.strip()),
        offset=args.offset,
        limit=args.limit,
        methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()),
        fractions=tuple(parse_fraction(f.strip()) for f in args.fractions.split(",") if f.strip()),
        latency_sample=args.latency_sample,
        gemma=not args.no_gemma,
        torch_threads=args.torch_threads or None,
        progress=not args.no_progress,
    )


def run_bench(args: argparse.Namespace, *, command: str) -> int:
    """Run, write JSON + PNG, print the report (``ragtrim-bench relevance qa_savings``). Returns 0 or 1."""
    from ragtrim_bench.relevance.qa_report import print_error, print_qa_report

    try:
        config = config_from_args(args)
        result = run_qa_benchmark(config)
    except (ConfigError, InputError) as exc:
        print_error(str(exc))
        return 1
    json_path, png = write_results(result, args.output_dir or results_root() / "relevance", command=command)
    print_qa_report(result, json_path=json_path, png_path=png)
    return 0
