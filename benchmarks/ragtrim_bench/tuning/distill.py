"""Distil the shipped int8 MiniLM into a MiniLM of fewer layers, for a cheaper model pass on a CPU.

  ragtrim-bench tuning distill corpus [--out .distill]                       (the dev texts, tokenized)
  ragtrim-bench tuning distill train --layers 0,2,5 --out DIR               (one GPU command; a CPU works, slowly)
  ragtrim-bench tuning distill assemble --student DIR --out FOLDER          (a model folder ragtrim can load)

``corpus`` collects the texts MiniLM reads in the quality matrix's dev requests (the Latin-script columns: the
default gives MiniLM no vote on Korean, Chinese or Japanese): every dev question and every passage, less any passage
that is the gold passage of a held-out request (NQ's requests draw their distractors from one pool, so a held-out
request's gold passage can be a dev request's distractor; it is left out). Held-out questions are never read. The
texts are tokenized with the shipped tokenizer and written as word-piece ids, with each dev request's question and
passages as one group.

``train`` needs only the corpus and the shipped int8 model (``ragtrim/data/all-MiniLM-L6-v2/model.int8.onnx``), so it
runs on a machine with torch, onnx and onnxruntime and none of ragtrim's dependencies (the checkout on
``PYTHONPATH``). The teacher is the shipped model itself, one text per call as ragtrim runs it (its vectors are the
ones the default ranks by); the student starts from the teacher's layers named by ``--layers`` (their int8 weights,
dequantized) and its embeddings, which stay frozen, or from an earlier student's layers (``--init``). It learns the
teacher's vector of every text (the first 128 pieces, as the default reads them, and another 128-piece window of long
passages), the cosines of the batch's questions with its passages (``--pair-weight``), and, with ``--list-weight``,
each request's ranking of its own passages (a softmax over their cosines); long questions are mapped by ``--adapter``
in both, as the default maps them; ``--column-weights cuad=3`` draws a column's requests more often. The defaults are
the first stage; ``--init DIR --steps 150 --batch-groups 8 --windows 0 --lr 5e-5 --seed 1 --list-weight 1 --adapter
ragtrim/data/minilm_query_adapter.npz`` is the second. It writes the student's layers (``layers.safetensors``,
float16) and a ``train.json`` with the loss curve.

``assemble`` adds the bundled MiniLM's embeddings and tokenizer to those layers: a model folder that
``OnnxEmbeddingScorer(model=...)`` exports to int8 ONNX on first use (the ``torch`` extra), as
``ragtrim_bench.tuning.cpu_recipes`` does for its rows; ``ragtrim-bench relevance adapter train --model FOLDER``
fits its query adapter.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtrim.scoring.adapter import BUNDLED_FILE
from ragtrim.scoring.onnx_export import shipped_dir
from ragtrim_bench.relevance.adapter import TRAINING_LIMITS

COLUMNS = tuple(TRAINING_LIMITS)
"""The columns MiniLM gets a vote on, as the query adapter is fitted on (``ragtrim_bench.relevance.adapter``)."""
PIECES = 128
"""Word pieces the default's MiniLM reads of a text, [CLS] and [SEP] included."""
MAX_STORED = 512
"""Word pieces kept of a text in the corpus (windows are drawn from them)."""
LAYER_PARTS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
               "intermediate.dense", "output.dense")
"""The six weight matrices of a layer, in the order the exporter numbers them (``onnx::MatMul_<n>``)."""
CLS, SEP = 101, 102
"""The bundled tokenizer's [CLS] and [SEP] ids."""
SHIPPED = shipped_dir() / "model.int8.onnx"
ADAPTER = BUNDLED_FILE
"""The bundled query adapter: the default maps long queries with it (``ragtrim.scoring.adapter``)."""
EVAL_TEXTS = 2000
"""Texts (a seeded sample of the corpus) whose lead's cosine to the teacher ``train.json`` reports."""
TEMPERATURE = 0.05
"""The softmax temperature of the listwise loss over a request's passages."""


# -- corpus (here) ------------------------------------------------------------------------------------------------------
def corpus_groups(dev: Sequence[Any], heldout: Sequence[Any]) -> tuple[list[str], list[list[int]], list[str]]:
    """The texts of ``dev`` requests (``Request``s) less the gold passage of every ``heldout`` one, numbered in order
    of first use (a request's passages before its question), and each dev request as ``[question, passage, ...]``
    text numbers; returns the texts, the groups and each group's question."""
    heldout_gold = {r.passages[r.gold_index] for r in heldout}
    texts: dict[str, int] = {}
    groups = []
    for r in dev:
        passages = [texts.setdefault(p, len(texts)) for p in r.passages if p not in heldout_gold]
        groups.append([texts.setdefault(r.question, len(texts)), *passages])
    return list(texts), groups, [r.question for r in dev]


def build_corpus(out: Path) -> dict[str, Any]:
    from tokenizers import Tokenizer

    from ragtrim.scoring.adapter import LONG_QUERY_WORDS, adapts
    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model
    from ragtrim_bench.relevance.columns import build_column

    dev = {c: build_column(c, "dev", limit=10**6) for c in COLUMNS}
    heldout = [r for c in COLUMNS for r in build_column(c, "heldout", limit=10**6)]
    texts, groups, questions = corpus_groups([r for c in COLUMNS for r in dev[c]], heldout)
    model_dir = Path(resolve_model(DEFAULT_EMBEDDING_MODEL))
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    encoded = [e.ids[1:-1][:MAX_STORED] for e in tokenizer.encode_batch(texts)]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    ids = np.fromiter((i for e in encoded for i in e), dtype=np.uint16, count=int(lengths.sum()))
    grid = np.full((len(groups), max(len(g) for g in groups)), -1, dtype=np.int32)
    for row, g in zip(grid, groups):
        row[: len(g)] = g
    long = np.array([adapts(q, LONG_QUERY_WORDS) for q in questions])
    columns = np.array([i for i, c in enumerate(COLUMNS) for _ in dev[c]], dtype=np.int8)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "corpus.npz", ids=ids, lengths=lengths, groups=grid, long=long, columns=columns)
    (out / "config.json").write_text((model_dir / "config.json").read_text())
    about = {"columns": {c: len(r) for c, r in dev.items()}, "texts": len(texts), "groups": len(groups),
             "pieces": int(lengths.sum()), "long_queries": int(long.sum()),
             "left_out": "the gold passage of every held-out request; held-out questions are never read"}
    (out / "corpus.json").write_text(json.dumps(about, indent=1))
    return about


# -- the shipped int8 model's weights, dequantized ----------------------------------------------------------------------
def dequantized_weights(onnx_path: Path) -> dict[str, np.ndarray]:
    """The shipped int8 model's weights under Hugging Face ``BertModel`` names: the int8 tensors times their scale
    (the matrices transposed back), the float ones as they are."""
    import onnx
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(onnx_path)).graph.initializer}

    def dequantize(base: str) -> np.ndarray:
        q = inits[f"{base}_quantized"].astype(np.float32)
        return (q - inits[f"{base}_zero_point"].astype(np.float32)) * inits[f"{base}_scale"].astype(np.float32)

    weights = {k.removeprefix("inner."): v.copy() for k, v in inits.items()
               if k.startswith("inner.") and v.dtype == np.float32 and v.ndim > 0}
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        weights[f"embeddings.{name}.weight"] = dequantize(f"inner.embeddings.{name}.weight")
    matmuls = sorted((k.removesuffix("_quantized") for k in inits
                      if k.startswith("onnx::MatMul_") and k.endswith("_quantized")),
                     key=lambda k: int(k.rsplit("_", 1)[1]))
    for i, base in enumerate(matmuls):
        weights[f"encoder.layer.{i // 6}.{LAYER_PARTS[i % 6]}.weight"] = np.ascontiguousarray(dequantize(base).T)
    return weights


def student_weights(teacher: dict[str, np.ndarray], layers: Sequence[int]) -> dict[str, np.ndarray]:
    """A BERT's weights (Hugging Face names) with only ``layers`` of its encoder, renumbered 0, 1, ..."""
    kept = {}
    for key, value in teacher.items():
        parts = key.split(".")
        if "layer" in parts:
            i = parts.index("layer")
            if int(parts[i + 1]) not in layers:
                continue
            parts[i + 1] = str(list(layers).index(int(parts[i + 1])))
        kept[".".join(parts)] = value
    return kept


# -- train (on a GPU) ---------------------------------------------------------------------------------------------------
def _views(ids: np.ndarray, lengths: np.ndarray, rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """Every text's lead (what the default reads) and, for texts longer than one window, one more window; returns
    the id sequences ([CLS] ... [SEP]) and the index of the text each came from."""
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    views, source = [], []
    inner = PIECES - 2
    for t, (s, n) in enumerate(zip(starts, lengths)):
        views.append(np.concatenate([[CLS], ids[s: s + min(n, inner)], [SEP]]))
        source.append(t)
        if n > inner + 16:
            o = int(rng.integers(16, n - inner + 1))
            views.append(np.concatenate([[CLS], ids[s + o: s + o + inner], [SEP]]))
            source.append(-1 - t)
    return views, np.array(source)


def _group_odds(data: Any, weights: dict[str, float]) -> np.ndarray | None:
    """Each request's chance of being drawn into a batch when some columns weigh more (``weights``: column name to
    weight, the rest 1); None (every request alike) when none is given."""
    if not weights:
        return None
    unknown = set(weights) - set(COLUMNS)
    if unknown or any(w <= 0 for w in weights.values()):
        raise ValueError(f"column weights must name columns of {COLUMNS} with weights > 0, got {weights}")
    per_column = np.array([weights.get(c, 1.0) for c in COLUMNS])
    odds: np.ndarray = per_column[data["columns"]]
    chances: np.ndarray = odds / odds.sum()
    return chances


def teacher_vectors(views: Sequence[np.ndarray], onnx_path: Path, workers: int) -> np.ndarray:
    """The shipped model's vector of every view, one view per call, loaded as ragtrim loads it (``load_session``),
    ``workers`` copies of one thread each at once."""
    from concurrent.futures import ThreadPoolExecutor

    from ragtrim.scoring.onnx_backend import load_session

    sessions = [load_session(onnx_path) for _ in range(workers)]
    out = np.zeros((len(views), 384), dtype=np.float32)

    def run(w: int) -> None:
        for i in range(w, len(views), workers):
            v = views[i].astype(np.int64)[None]
            out[i] = sessions[w].run(None, {"input_ids": v, "attention_mask": np.ones_like(v),
                                            "token_type_ids": np.zeros_like(v)})[0][0]

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, range(workers)))
    return out


def train(corpus: Path, layers: Sequence[int], out: Path, *, steps: int, batch_groups: int, lr: float,
          pair_weight: float, list_weight: float, seed: int, workers: int, adapter_path: Path | None = None,
          init: Path | None = None, teacher_cache: Path | None = None, windows: int = 64,
          command: str | None = None, column_weights: dict[str, float] | None = None) -> dict[str, Any]:
    import torch
    import transformers
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    data = np.load(corpus / "corpus.npz")
    ids, lengths, groups, long = data["ids"].astype(np.int64), data["lengths"], data["groups"], data["long"]
    views, source = _views(ids, lengths, rng)
    odds = _group_odds(data, column_weights or {})
    if teacher_cache is not None and teacher_cache.is_file():
        targets = np.load(teacher_cache)
    else:
        targets = teacher_vectors(views, SHIPPED, workers)
        if teacher_cache is not None:
            np.save(teacher_cache, targets)
    t_teacher = time.perf_counter() - t0
    lead = {int(s): i for i, s in enumerate(source) if s >= 0}
    extra = np.array([i for i, s in enumerate(source) if s < 0])

    config = transformers.BertConfig.from_dict(json.loads((corpus / "config.json").read_text())
                                               | {"num_hidden_layers": len(layers)})
    model: Any = transformers.BertModel(config, add_pooling_layer=False)
    start = student_weights(dequantized_weights(SHIPPED), layers)
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in start.items()}, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit the student: missing {missing}, unexpected {unexpected}")
    if init is not None:
        from safetensors.torch import load_file

        _, unexpected = model.load_state_dict(load_file(str(init / "layers.safetensors")), strict=False)
        if unexpected:
            raise RuntimeError(f"{init} holds layers the student lacks: {unexpected}")
    for param in model.embeddings.parameters():
        param.requires_grad_(False)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device).train()
    trainable = [param for param in model.parameters() if param.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.05)
    target_all = torch.from_numpy(targets).to(device)
    delta = np.load(adapter_path)["delta"].astype(np.float32) if adapter_path else np.zeros((384, 384), np.float32)
    adapter = torch.eye(384, device=device) + torch.from_numpy(delta).to(device)

    def adapted(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The query vectors as the default ranks by them: long queries (``mask``) through the adapter."""
        return torch.where(mask[:, None], torch.nn.functional.normalize(q @ adapter.T, dim=-1), q)

    def encode(batch: Sequence[int]) -> torch.Tensor:
        seqs = [views[i] for i in batch]
        width = max(len(s) for s in seqs)
        x = np.zeros((len(seqs), width), dtype=np.int64)
        mask = np.zeros_like(x)
        for r, s in enumerate(seqs):
            x[r, : len(s)] = s
            mask[r, : len(s)] = 1
        xt, mt = torch.from_numpy(x).to(device), torch.from_numpy(mask).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            h = model(input_ids=xt, attention_mask=mt, token_type_ids=torch.zeros_like(xt)).last_hidden_state
        m = mt.unsqueeze(-1).float()
        pooled = (h.float() * m).sum(1) / m.sum(1)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def losses(student: torch.Tensor, teacher: torch.Tensor, chosen: np.ndarray, is_long: torch.Tensor, q: int,
               column: dict[int, int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """1 - cosine to the teacher's vectors; the squared error of the ``q`` questions' cosines with the batch's
        passages (``column``: a passage view's place among them); each request's KL over its own passages."""
        vector_loss = (1 - (student * teacher).sum(-1)).mean()
        p = len(column)
        sq, tq = adapted(student[:q], is_long), adapted(teacher[:q], is_long)
        s_sims, t_sims = sq @ student[q: q + p].T, tq @ teacher[q: q + p].T
        pair_loss = ((s_sims - t_sims) ** 2).mean()
        list_loss = torch.zeros((), device=device)
        for i, g in enumerate(chosen):
            own = [column[lead[int(t)]] for t in g[1:] if t >= 0]
            target = torch.softmax(t_sims[i, own] / TEMPERATURE, -1)
            list_loss = list_loss + torch.nn.functional.kl_div(
                torch.log_softmax(s_sims[i, own] / TEMPERATURE, -1), target, reduction="sum")
        return vector_loss, pair_loss, list_loss / len(chosen)

    curve = []
    for step in range(steps):
        picked = rng.choice(len(groups), batch_groups, replace=False, p=odds)
        chosen, is_long = groups[picked], torch.from_numpy(long[picked]).to(device)
        queries = [lead[int(g[0])] for g in chosen]
        passages = sorted({lead[int(t)] for g in chosen for t in g[1:] if t >= 0})
        column = {v: i for i, v in enumerate(passages)}
        drawn: Any = rng.choice(extra, min(len(extra), windows), replace=False) if windows and len(extra) else []
        batch = queries + passages + [int(w) for w in drawn]
        vector_loss, pair_loss, list_loss = losses(encode(batch), target_all[batch], chosen, is_long,
                                                   len(queries), column)
        loss: Any = vector_loss + pair_weight * pair_loss + list_weight * list_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        if step % 250 == 0 or step == steps - 1:
            curve.append({"step": step, "vector": round(vector_loss.item(), 6), "pair": round(pair_loss.item(), 7),
                          "list": round(list_loss.item(), 6)})
            print(json.dumps(curve[-1]), flush=True)

    model.eval()
    with torch.no_grad():
        sample = np.random.default_rng(seed).choice(len(lead), min(len(lead), EVAL_TEXTS), replace=False)
        leads = [lead[int(i)] for i in np.sort(sample)]
        cos = torch.cat([(encode(leads[i: i + 512]) * target_all[leads[i: i + 512]]).sum(-1)
                         for i in range(0, len(leads), 512)])
    out.mkdir(parents=True, exist_ok=True)
    layer_weights = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()
                     if k.startswith("encoder.")}
    save_file(layer_weights, str(out / "layers.safetensors"))
    result = {"benchmark": "distill_train", "command": command, "layers": list(layers), "steps": steps,
              "batch_groups": batch_groups, "lr": lr, "pair_weight": pair_weight, "list_weight": list_weight,
              "windows": windows, "column_weights": column_weights or {}, "adapter": adapter_path.name if adapter_path else None,
              "init": init.name if init else None, "temperature": TEMPERATURE, "seed": seed, "texts": len(lead),
              "views": len(views), "teacher_s": round(t_teacher, 1),
              "train_s": round(time.perf_counter() - t0 - t_teacher, 1),
              "lead_cosine_to_teacher": {"texts": len(leads), "mean": round(float(cos.mean()), 5),
                                         "p01": round(float(cos.quantile(0.01)), 5), "min": round(float(cos.min()), 5)},
              "curve": curve}
    (out / "train.json").write_text(json.dumps(result, indent=1))
    return result


# -- assemble (here) ----------------------------------------------------------------------------------------------------
def model_folder(weights: dict[str, np.ndarray], out: Path) -> Path:
    """A copy of the bundled MiniLM's folder at ``out`` with ``weights`` (Hugging Face names) as its model and its
    config's layer count set to theirs; written beside and renamed, so a folder there is always whole."""
    import shutil

    from safetensors.numpy import save_file

    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model

    layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(resolve_model(DEFAULT_EMBEDDING_MODEL), tmp)
    save_file(weights, str(tmp / "model.safetensors"))
    config = json.loads((tmp / "config.json").read_text())
    (tmp / "config.json").write_text(json.dumps(config | {"num_hidden_layers": layers}))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def assemble(student: Path, out: Path) -> Path:
    """A model folder: the bundled MiniLM's files, its embeddings, and the student's layers (float32)."""
    from safetensors.numpy import load_file

    from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model

    bundled = load_file(str(Path(resolve_model(DEFAULT_EMBEDDING_MODEL)) / "model.safetensors"))
    layers = {k: v.astype(np.float32) for k, v in load_file(str(student / "layers.safetensors")).items()}
    return model_folder({k: v for k, v in bundled.items() if k.startswith("embeddings.")} | layers, out)


def column_weights(text: str) -> dict[str, float]:
    """``cuad=3,tatqa=2`` as ``{"cuad": 3.0, "tatqa": 2.0}``; an argparse error for anything else."""
    weights = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected column=weight, got {item!r}") from None
    return weights


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragtrim-bench tuning distill", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--out", type=Path, default=Path(".distill"))
    t = sub.add_parser("train")
    t.add_argument("--corpus", type=Path, default=Path(".distill"))
    t.add_argument("--layers", default="0,2,5")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--steps", type=int, default=4000)
    t.add_argument("--batch-groups", type=int, default=16)
    t.add_argument("--lr", type=float, default=2e-4)
    t.add_argument("--pair-weight", type=float, default=10.0)
    t.add_argument("--list-weight", type=float, default=0.0)
    t.add_argument("--adapter", default="none",
                   help="the query adapter long queries are mapped with in the pair and list losses; 'none': none")
    t.add_argument("--init", type=Path, default=None, help="start from a student's layers.safetensors folder")
    t.add_argument("--teacher-cache", type=Path, default=None, help="a .npy to keep the teacher's vectors in")
    t.add_argument("--windows", type=int, default=64, help="windows of long passages in each batch")
    t.add_argument("--column-weights", type=column_weights, default={},
                   help="draw some columns' requests more often, e.g. 'cuad=3,tatqa=2' (default: every request alike)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--workers", type=int, default=16)
    a = sub.add_parser("assemble")
    a.add_argument("--student", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.verb == "corpus":
        print(json.dumps(build_corpus(args.out)))
    elif args.verb == "train":
        layers = [int(x) for x in args.layers.split(",")]
        result = train(args.corpus, layers, args.out, steps=args.steps, batch_groups=args.batch_groups, lr=args.lr,
                       pair_weight=args.pair_weight, list_weight=args.list_weight, seed=args.seed, workers=args.workers,
                       adapter_path=None if args.adapter == "none" else Path(args.adapter), init=args.init,
                       teacher_cache=args.teacher_cache, windows=args.windows,
                       column_weights=args.column_weights,
                       command=shlex.join(["ragtrim-bench", "tuning", "distill", *(sys.argv[1:] if argv is None
                                                                                  else argv)]))
        print(json.dumps({k: v for k, v in result.items() if k != "curve"}))
    else:
        print(assemble(args.student, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
