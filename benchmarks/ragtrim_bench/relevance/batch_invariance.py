"""Which ways of batching MiniLM make a text's vector independent of the texts it was embedded with, and at what cost.

For each backend (int8 and fp32 ONNX Runtime, torch fp32 called directly, sentence-transformers) and each grouping
(``padded``: length-sorted batches padded to the longest, today's; ``exact_length``: equal piece counts together,
no padding; ``single``: one text per model call), on NQ dev requests (questions 0-1061, 20 passages and the query):

- invariance: ``targets`` texts are each embedded inside ``trials`` different random batches of 2 to 40 texts (so
  that both the other texts and the number of rows change); a text whose vectors are not bitwise equal across them
  counts as ``texts_batch_dependent``;
- threads: the ``single`` vectors at 1 and at 2 intra-op threads, bitwise (``texts_thread_dependent``);
- cost: the model pass (tokenizer included) of each request's 21 texts, every grouping on the same request in turn
  (interleaved, so machine noise falls on all alike), p50/p99 in ms;
- and what it costs the default ``trim()`` (the ``balanced`` recipe on int8 ONNX, budget a quarter of the tokens, cold:
  ``clear_caches()`` and no vector store): its pipeline with the model pass grouped ``single`` (as shipped) beside
  the same pipeline grouped ``padded`` (before), interleaved, wall and CPU p50/p99 (``pipeline`` rows).

Usage: ragtrim-bench relevance batch_invariance [--requests N] [--targets N] [--trials N] [-o PATH]
(or python -m ragtrim_bench.relevance.batch_invariance); writes ``results/relevance/batch_invariance.json``
(``ragtrim_bench.common.results``). Timings on a shared machine are provisional.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim_bench.common.results import command_line, result_path, write_result
from ragtrim_bench.common.stats import percentile

DEV_QUESTIONS = (0, 1062)
GROUPINGS = ("padded", "exact_length", "single")
EmbedFn = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Config:
    requests: int = 40
    targets: int = 60
    trials: int = 5
    seed: int = 0


@dataclass(frozen=True)
class Backend:
    name: str
    groupings: tuple[str, ...]
    build: Callable[[str, int], EmbedFn]  # (grouping, threads) -> embed


def distinct_vectors(runs: Sequence[dict[str, bytes]]) -> dict[str, int]:
    """How many bitwise-different vectors each text got across ``runs`` (text -> raw float32 bytes)."""
    seen: dict[str, set[bytes]] = {}
    for run in runs:
        for text, raw in run.items():
            seen.setdefault(text, set()).add(raw)
    return {t: len(v) for t, v in seen.items()}


def _onnx(quantized: bool, pieces: int, scales: str = "call") -> Callable[[str, int], EmbedFn]:
    def build(grouping: str, threads: int) -> EmbedFn:
        from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer, _runtime, padded_batches

        scorer = OnnxEmbeddingScorer(quantized=quantized, max_seq_length=pieces, activation_scales=scales,  # type: ignore[arg-type]
                                     vector_store=None)
        _, tokenizer = scorer._parts()  # the model file exists (an export or the row model is made once)
        session = _runtime(scorer._path(), threads)

        def embed(texts: Sequence[str]) -> np.ndarray:
            out = np.zeros((len(texts), 384), dtype=np.float32)
            for batch, ids, mask in padded_batches(tokenizer, texts, pieces, 32, grouping):  # type: ignore[arg-type]
                out[batch] = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                "token_type_ids": np.zeros_like(ids)})[0]
            return out

        return embed

    return build


def _torch(pieces: int) -> Callable[[str, int], EmbedFn]:
    def build(grouping: str, threads: int) -> EmbedFn:
        import torch

        from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model
        from ragtrim.scoring.onnx_backend import load_tokenizer, padded_batches
        from ragtrim.scoring.torch_backend import _eager, _load

        model_dir = resolve_model(DEFAULT_EMBEDDING_MODEL)
        encoder = _load(model_dir, "cpu")
        tokenizer = load_tokenizer(Path(model_dir), pieces)

        def embed(texts: Sequence[str]) -> np.ndarray:
            torch.set_num_threads(threads)
            out = np.zeros((len(texts), 384), dtype=np.float32)
            for batch, ids, mask in padded_batches(tokenizer, texts, pieces, 64, grouping):  # type: ignore[arg-type]
                out[batch] = _eager(encoder, "cpu", ids, mask)
            return out

        return embed

    return build


def _sentence_transformers(pieces: int) -> Callable[[str, int], EmbedFn]:
    def build(grouping: str, threads: int) -> EmbedFn:
        import torch

        from ragtrim.scoring.embedding import (
            DEFAULT_EMBEDDING_MODEL,
            _load_sentence_transformer,
            resolve_model,
        )

        model = _load_sentence_transformer(resolve_model(DEFAULT_EMBEDDING_MODEL), "cpu")
        model.max_seq_length = pieces

        def encode(texts: Sequence[str]) -> np.ndarray:
            return np.asarray(model.encode(list(texts), batch_size=64, convert_to_numpy=True,
                                           normalize_embeddings=True, show_progress_bar=False), dtype=np.float32)

        def embed(texts: Sequence[str]) -> np.ndarray:
            torch.set_num_threads(threads)
            if grouping == "single":
                return np.vstack([encode([t]) for t in texts])
            if grouping == "exact_length":
                from ragtrim.scoring.rows import same_length_groups

                out = np.zeros((len(texts), 384), dtype=np.float32)
                for group in same_length_groups(model, texts):
                    out[group] = encode([texts[i] for i in group])
                return out
            return encode(texts)

        return embed

    return build


def _torch_cuda(pieces: int) -> Callable[[str, int], EmbedFn]:
    """The shipped CUDA path (``TorchEmbeddingScorer``: one 64-row graph shape per call); ``fixed`` is its only
    grouping. Needs a CUDA device."""

    def build(grouping: str, threads: int) -> EmbedFn:
        from ragtrim.scoring.torch_backend import TorchEmbeddingScorer

        scorer = TorchEmbeddingScorer(device="cuda", max_seq_length=pieces, cache_size=0, vector_store=None)
        return lambda texts: np.asarray(scorer._encode_rows(texts), dtype=np.float32)

    return build


BACKENDS = (
    Backend("onnx-int8@10", GROUPINGS, _onnx(True, 10)),
    Backend("onnx-int8@256", GROUPINGS, _onnx(True, 256)),
    Backend("onnx-fp32@10", GROUPINGS, _onnx(False, 10)),
    Backend("onnx-fp32@256", GROUPINGS, _onnx(False, 256)),
    Backend("torch-fp32@10", GROUPINGS, _torch(10)),
    Backend("torch-fp32@256", GROUPINGS, _torch(256)),
    Backend("sentence-transformers@10", GROUPINGS, _sentence_transformers(10)),
    Backend("sentence-transformers@256", GROUPINGS, _sentence_transformers(256)),
    Backend("onnx-int8@128", GROUPINGS, _onnx(True, 128)),  # the default recipe's pieces (scoring.auto.balanced)
    Backend("onnx-int8row@10", GROUPINGS, _onnx(True, 10, "row")),  # one activation scale per token row
    Backend("onnx-int8row@128", GROUPINGS, _onnx(True, 128, "row")),
    Backend("torch-cuda@64", ("fixed",), _torch_cuda(64)),  # run only where CUDA is (--backends torch-cuda@64)
    Backend("torch-cuda@128", ("fixed",), _torch_cuda(128)),
)
DEFAULT_BACKENDS = tuple(b.name for b in BACKENDS if not b.name.startswith(("torch-cuda", "onnx-int8@128")))


def _fast_pipeline(grouping: str, budget: int) -> Any:
    """The default trim() pipeline (the ``balanced`` recipe) with its int8 MiniLM running its model pass grouped
    ``grouping``."""
    from ragtrim.api import default_stages
    from ragtrim.pipeline import Pipeline
    from ragtrim.scoring.auto import (
        BALANCED_BM25_WEIGHT,
        BALANCED_PREFIX_TOKENS,
        BALANCED_SURE_BM25_WEIGHT,
        bm25_mix,
    )
    from ragtrim.stages.relevance import RelevanceFilter

    key = (grouping, budget)
    if key not in _PIPELINE_SCORERS:
        minilm = _grouped_onnx(grouping)(max_seq_length=BALANCED_PREFIX_TOKENS, vector_store=None,
                                         activation_scales="call")  # one scale per call: single vs padded
        _PIPELINE_SCORERS[key] = bm25_mix(minilm, BALANCED_BM25_WEIGHT, sure_weight=BALANCED_SURE_BM25_WEIGHT)
    scorer = _PIPELINE_SCORERS[key]
    stages = [RelevanceFilter(scorer=scorer, top_k=None) if isinstance(s, RelevanceFilter) else s
              for s in default_stages(budget=budget)]
    return Pipeline(stages)


_PIPELINE_SCORERS: dict[tuple[str, int], Any] = {}


def _grouped_onnx(grouping: str) -> Any:
    """OnnxEmbeddingScorer whose model pass groups texts by ``grouping`` (``single`` is the shipped class)."""
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer, padded_batches

    if grouping == "single":
        return OnnxEmbeddingScorer

    class Grouped(OnnxEmbeddingScorer):
        def _model_pass(self, session: Any, tokenizer: Any, texts: Sequence[str]) -> Callable[[], np.ndarray]:
            texts = list(texts)

            def run() -> np.ndarray:
                out = np.zeros((len(texts), 384), dtype=np.float32)
                for batch, ids, mask in padded_batches(tokenizer, texts, self.max_seq_length, self.batch_size,
                                                       grouping):  # type: ignore[arg-type]
                    out[batch] = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                    "token_type_ids": np.zeros_like(ids)})[0]
                return out

            return run

    return Grouped


def measure_pipeline(requests: list[list[str]]) -> dict[str, Any]:
    from ragtrim.caches import clear_caches
    from ragtrim.text.tokens import get_counter

    counter = get_counter("cl100k_base")
    groupings = ("padded", "single")
    wall: dict[str, list[float]] = {g: [] for g in groupings}
    cpu: dict[str, list[float]] = {g: [] for g in groupings}
    for n, request in enumerate([requests[0], *requests]):
        query, texts = request[0], request[1:]
        budget = max(1, sum(counter.count(t) for t in texts) // 4)
        for grouping in (groupings if n % 2 else groupings[::-1]):
            pipeline = _fast_pipeline(grouping, budget)
            clear_caches()
            for scorer in _PIPELINE_SCORERS.values():
                for part in scorer.second.parts():
                    getattr(part, "clear_cache", lambda: None)()
            w0, c0 = time.perf_counter(), time.process_time()
            pipeline.run(texts, query=query)
            if n:  # the first request is the warm-up
                wall[grouping].append((time.perf_counter() - w0) * 1000)
                cpu[grouping].append((time.process_time() - c0) * 1000)
    return {"backend": "default trim(), balanced, onnx-int8@128",
            **{f"{g}_p50_ms": round(percentile(wall[g], 50), 2) for g in groupings},
            **{f"{g}_p99_ms": round(percentile(wall[g], 99), 2) for g in groupings},
            **{f"{g}_p50_cpu_ms": round(percentile(cpu[g], 50), 2) for g in groupings}}


def _requests(config: Config) -> list[list[str]]:
    from ragtrim_bench.datasets.nq import golden_multidoc

    lo, hi = DEV_QUESTIONS
    n = min(config.requests, hi - lo)
    return [[inst.question, *(p.content for p in inst.passages)] for inst in golden_multidoc(n, offset=lo)]


def measure(backend: Backend, requests: list[list[str]], config: Config) -> dict[str, Any]:
    rng = random.Random(config.seed)
    pool = list(dict.fromkeys(t for r in requests for t in r))
    targets = rng.sample(pool, min(config.targets, len(pool)))
    embedders = {g: backend.build(g, 1) for g in backend.groupings}
    for embed in embedders.values():  # warm-up: model load and first-call allocations
        embed(requests[0])
    out: dict[str, Any] = {"backend": backend.name}
    batches = []
    for trial in range(config.trials):
        for start in range(0, len(targets), 2):  # 2 targets among 0 to 38 other texts
            own = targets[start:start + 2]
            others = rng.sample([t for t in pool if t not in own], rng.randint(0, 38))
            batch = own + others
            rng.shuffle(batch)
            batches.append((own, batch))
    for grouping, embed in embedders.items():
        runs: list[dict[str, bytes]] = []
        for own, batch in batches:
            vectors = embed(batch)
            runs.append({t: vectors[batch.index(t)].tobytes() for t in own})
        counts = distinct_vectors(runs)
        out[f"{grouping}_texts_batch_dependent"] = sum(1 for c in counts.values() if c > 1)
    out["targets"] = len(targets)
    out["batches_per_target"] = config.trials
    if "single" in embedders:  # CPU backends: one text per call, at 1 and at 2 intra-op threads
        a, b = embedders["single"](targets), backend.build("single", 2)(targets)
        out["single_texts_thread_dependent"] = int(sum(a[i].tobytes() != b[i].tobytes() for i in range(len(targets))))
    times: dict[str, list[float]] = {g: [] for g in embedders}
    for request in requests:
        for grouping, embed in embedders.items():
            started = time.perf_counter()
            embed(request)
            times[grouping].append((time.perf_counter() - started) * 1000)
    for grouping, values in times.items():
        out[f"{grouping}_p50_ms"] = round(percentile(values, 50), 2)
        out[f"{grouping}_p99_ms"] = round(percentile(values, 99), 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=Config.requests)
    parser.add_argument("--targets", type=int, default=Config.targets)
    parser.add_argument("--trials", type=int, default=Config.trials)
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS))
    parser.add_argument("--no-pipeline", action="store_true", help="skip the default trim() side by side")
    parser.add_argument("-o", "--output", "--out", type=Path, default=None,
                        help="default: results/relevance/batch_invariance.json")
    args = parser.parse_args(argv)
    config = Config(requests=args.requests, targets=args.targets, trials=args.trials)
    wanted = args.backends.split(",")
    requests = _requests(config)
    rows = []
    for backend in BACKENDS:
        if backend.name in wanted:
            row = measure(backend, requests, config)
            print(json.dumps(row), flush=True)
            rows.append(row)
    pipeline = None if args.no_pipeline else measure_pipeline(requests)
    if pipeline is not None:
        print(json.dumps(pipeline), flush=True)
    result = {
        "benchmark": "batch_invariance",
        "config": asdict(config),
        "questions": f"{DEV_QUESTIONS[0]}-{DEV_QUESTIONS[1] - 1} (dev)",
        "note": "timings on a shared 2-core machine are provisional; compare groupings only within a row",
        "rows": rows,
        "pipeline": pipeline,
    }
    out = write_result(args.output or result_path(__spec__.name), result, command=command_line(__spec__.name, argv),
                       packages=["onnxruntime", "torch", "sentence-transformers"])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
