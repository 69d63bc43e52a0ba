"""Rebuild the `balanced-qa` scorer's query adapter (``ragtrim/data/minilm_query_adapter.npz``) from dev columns.

  ragtrim-bench relevance adapter train [--l2 0.001,0.003,0.01,0.03] [--folds 5] [--output PATH] [--result PATH]
                                        [--model FOLDER]

Embeds every dev request of the quality matrix's Latin-script columns with the default recipe's MiniLM (int8 ONNX,
``BALANCED_PREFIX_TOKENS`` word pieces; the CJK columns are left out: MiniLM gets no vote on them, so the adapter
never acts there), picks the pull toward the identity (``--l2``) by cross-validation over documents inside dev
(``adapter_fit.cross_validated_ranks``: the best mean top-3 rate of the gold chunk over the columns, under the
default's fused score; a tie goes to the larger pull), fits the adapter on all of dev with it and writes the file
and a result JSON with every column's cross-validated ranks. Held-out requests are never read. ``--model`` fits an
adapter for another local MiniLM (a distilled one, ``ragtrim_bench.tuning.distill``) instead of the bundled one.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim.errors import ConfigError, InputError
from ragtrim.scoring.adapter import BUNDLED_FILE
from ragtrim_bench.common.results import command_line, json_safe, result_path
from ragtrim_bench.relevance.adapter_fit import (
    Features,
    FitConfig,
    cross_validated_ranks,
    fit,
    fused,
    gold_ranks,
    rank_summary,
)
from ragtrim_bench.relevance.columns import N_PASSAGES, build_column

TRAINING_LIMITS: dict[str, int] = {"nq-title": 400, "nq-notitle": 400, "squad-article": 400, "kv": 200,
                                   "tatqa": 100_000, "cuad": 100_000}
"""Dev requests per column the adapter is fitted on: all of the domain columns', a seeded sample of the others (each
column weighs the same in the loss, ``adapter_fit.column_weights``)."""
TRAINING_DATA: dict[str, str] = {
    "nq-title, nq-notitle": "Natural Questions (NQ-open via lost-in-the-middle, MIT repository): CC BY-SA 3.0 (Google)",
    "squad-article": "SQuAD 2.0 (via chrischute/squad, MIT repository): CC BY-SA 4.0",
    "kv": "kv-retrieval (lost-in-the-middle): MIT",
    "tatqa": "TAT-QA test (Zhu et al., 2021): CC BY 4.0",
    "cuad": "CUAD v1 (The Atticus Project): CC BY 4.0",
}
"""The licence of each training source, as ../shared/data/*/SOURCE.md records it; written beside the adapter."""
L2_GRID = (0.001, 0.003, 0.01, 0.03)
DEFAULT_OUTPUT = BUNDLED_FILE
"""The packaged adapter of the ragtrim this runs with (an editable install: the checkout's)."""
DEFAULT_RESULT = result_path("ragtrim_bench.relevance.adapter")


def _documents() -> dict[str, str]:
    """The source document of each dev request of the domain columns (``column/id``), the unit of a fold."""
    from ragtrim_bench.datasets.cuad import cuad_questions
    from ragtrim_bench.datasets.tatqa import tatqa_questions

    docs = {f"cuad/{q.id}": q.document for q in cuad_questions("dev", 0)}
    docs.update({f"tatqa/{q.id}": q.document for q in tatqa_questions("dev", 0)})
    return docs


def collect(limits: dict[str, int], model: str | None = None) -> Features:
    """The dev requests of ``limits``' columns as vectors. A request of fewer than ``N_PASSAGES`` chunks (KV: 19) is
    padded with a copy of a distractor, which changes no softmax target and no gold rank by more than one.
    ``model``: a local MiniLM folder (default: the bundled one)."""
    from ragtrim.scoring.auto import BALANCED_PREFIX_TOKENS
    from ragtrim.scoring.bm25 import BM25Scorer
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL
    from ragtrim.scoring.onnx_backend import OnnxEmbeddingScorer

    embedder = OnnxEmbeddingScorer(model=model or DEFAULT_EMBEDDING_MODEL, max_seq_length=BALANCED_PREFIX_TOKENS,
                                   vector_store="off", threads=1)
    bm25 = BM25Scorer()
    docs = _documents()
    qs, ps, bs, gold, columns, groups = [], [], [], [], [], []
    for column, limit in limits.items():
        for r in build_column(column, "dev", limit=limit):
            vectors = np.asarray(embedder.embed([r.question, *r.passages]), dtype=np.float64)
            scores = np.asarray(bm25.score(r.question, list(r.passages)), dtype=np.float64)
            passages = vectors[1:]
            pad = N_PASSAGES - len(passages)
            if pad > 0:
                spare = 0 if r.gold_index != 0 else 1
                passages = np.vstack([passages, np.repeat(passages[spare:spare + 1], pad, axis=0)])
                scores = np.append(scores, [scores[spare]] * pad)
            qs.append(vectors[0])
            ps.append(passages)
            bs.append(scores)
            gold.append(r.gold_index)
            columns.append(column)
            groups.append(docs.get(f"{column}/{r.id}", f"{column}/{r.id}"))
        print(f"embedded {column}: {columns.count(column)} dev requests", flush=True)
    return Features(np.stack(qs), np.stack(ps), np.stack(bs), np.asarray(gold), tuple(columns), tuple(groups))


def choose_l2(cv: dict[float, dict[str, dict[str, float]]]) -> float:
    """The pull with the best mean top-3 rate over the columns; a tie goes to the larger pull (nearer the identity)."""
    def score(l2: float) -> tuple[float, float]:
        cols = cv[l2]
        return round(sum(c["top3"] for c in cols.values()) / len(cols), 4), l2
    return max(cv, key=score)


def write_adapter(path: Path, delta: np.ndarray, about: str) -> None:
    """``delta`` as float16 (the map's deviation from the identity) and what made it, in a compressed ``.npz`` that
    ``ragtrim.scoring.adapter`` reads without pickle. The zip entries carry a fixed date (``np.savez`` stamps the
    time of writing), so the same matrix gives the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, array in (("delta", delta.astype(np.float16)), ("about", np.asarray(about))):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buffer.getvalue(),
                        compress_type=zipfile.ZIP_DEFLATED)


def write_source(path: Path, adapter: Path, about: str, model: str | None = None) -> None:
    """The note beside the adapter: what made it, its digest, and the licences of the data it was fitted on."""
    note = {"adapter": adapter.name, "sha256": hashlib.sha256(adapter.read_bytes()).hexdigest(), "about": about,
            "model": model or "all-MiniLM-L6-v2 (ragtrim/data/all-MiniLM-L6-v2; Apache-2.0)",
            "training_data": TRAINING_DATA}
    path.write_text(json.dumps(note, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def train(l2_grid: Sequence[float], folds: int, output: Path, command: str, model: str | None = None) -> dict[str, Any]:
    features = collect(TRAINING_LIMITS, model)
    identity = rank_summary(gold_ranks(fused(None, features), features.gold), features.columns)
    cv = {l2: rank_summary(cross_validated_ranks(features, FitConfig(l2=l2), folds), features.columns)
          for l2 in l2_grid}
    for l2, cols in cv.items():
        print(f"l2 {l2}: " + ", ".join(f"{c} top3 {identity[c]['top3']:.3f}->{s['top3']:.3f} top5 "
                                       f"{identity[c]['top5']:.3f}->{s['top5']:.3f}" for c, s in cols.items()))
    best = choose_l2(cv)
    config = FitConfig(l2=best)
    delta, losses = fit(features, config)
    label = Path(model).name if model else "all-MiniLM-L6-v2"
    about = (f"ragtrim query adapter for {label} (int8 ONNX, 128 word pieces): {command}; l2={best}, "
             f"temperature={config.temperature}, steps={config.steps}; trained on the dev split of "
             f"{', '.join(f'{c} ({features.columns.count(c)})' for c in TRAINING_LIMITS)}")
    write_adapter(output, delta, about)
    write_source(output.with_suffix(".source.json"), output, about, model)
    return {"benchmark": "query_adapter", "command": command, "git_commit": _commit(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "split": "dev",
            "limits": TRAINING_LIMITS, "folds": folds, "fit": {"temperature": config.temperature,
                                                                "steps": config.steps,
                                                                "learning_rate": config.learning_rate},
            "chosen_l2": best, "loss_first_last": [losses[0], losses[-1]],
            "delta_frobenius": float(np.linalg.norm(delta)), "output": str(output.name),
            "ranks": "gold chunk's rank under the default's fused score (BM25 + MiniLM min-max mix with the "
                     "sure-BM25 rule), top1/top3/top5 shares; cv: adapter fitted on the other folds (by document)",
            "identity": identity, "cv": {str(k): v for k, v in cv.items()}}


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(prog="ragtrim-bench relevance adapter", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("action", choices=("train",))
    parser.add_argument("--l2", default=",".join(map(str, L2_GRID)), help="the pulls toward the identity to try")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--output", default=None, help="the adapter file (default: the packaged one)")
    parser.add_argument("--result", default=None)
    parser.add_argument("--model", default=None, help="a local MiniLM folder to fit for (default: the bundled one)")
    args = parser.parse_args(argv)
    command = command_line("ragtrim_bench.relevance.adapter", sys.argv[1:] if argv is None else argv)
    try:
        grid = [float(x) for x in args.l2.split(",") if x.strip()]
        if not grid or any(x < 0 for x in grid) or args.folds < 2:
            raise ConfigError(f"--l2 must be numbers >= 0 and --folds >= 2, got {args.l2!r} and {args.folds}")
        output = Path(args.output) if args.output else DEFAULT_OUTPUT
        result = train(grid, args.folds, output, command, args.model)
    except (ConfigError, InputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = Path(args.result) if args.result else DEFAULT_RESULT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(json_safe(result), indent=1) + "\n", encoding="utf-8")
    print(f"chose l2 {result['chosen_l2']}; wrote {output} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
