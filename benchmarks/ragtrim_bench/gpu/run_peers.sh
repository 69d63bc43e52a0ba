#!/usr/bin/env bash
# ragtrim and its peers on the H200 host: `ragtrim-bench peers matrix` with LongLLMLingua's Gemma 3 270M and the
# frameworks' MiniLM on the GPU, ragtrim's default with MiniLM on the GPU (its CUDA path) and the rest on the host's
# CPU. Run on the GPU machine from the repository root, after ../shared/gpu/stage.sh's chunks and
# `bash /tmp/st/gpu-setup.sh` (the Gemma 3 270M GGUF at /tmp/gemma/gemma-3-270m-q4_k_m.gguf) and then
# stage_peers.sh's chunks (see there), on the same machine:
#   bash benchmarks/ragtrim_bench/gpu/run_peers.sh take pK    (carrying .gpu/peers/pK; K = 1 .. N-1)
#   bash benchmarks/ragtrim_bench/gpu/run_peers.sh run        (carrying the last chunk, .gpu/peers/pN)
#   bash benchmarks/ragtrim_bench/gpu/run_peers.sh cost       (carrying the last chunk again)
# `run` joins and checks the bundle, installs its wheels into /tmp/pe/site (apart from vLLM's /tmp/site; PEERS_WORK
# moves /tmp/pe, PEERS_GGUF the GGUF), unpacks the data and writes the 270M's transformers folder from the GGUF, then
# measures quality: one process per column, all at once, both splits, every row; LIMIT requests per column and split
# (default 10), the LongLLMLingua rows on the first SLOW_LIMIT (default 5); nothing timed (the processes share the
# host), one thread each; merged into matrix_h200.json (+ .png, .txt); each column bounded by QUALITY_S (default
# 320 s). About 5 minutes. A column that runs out of time is missing from the merge and its log's tail is printed.
# `cost`, its own call: one process, every row, the first COST_LIMIT (default 3) held-out requests of each column
# timed cold, on the host's threads as a service would run; matrix_h200_cost.json (+ .png, .txt); bounded by COST_S
# (default 265 s). About 3 minutes.
set -uo pipefail
step=${1:?usage: run_peers.sh take pK, run or cost}
gguf=${PEERS_GGUF:-/tmp/gemma/gemma-3-270m-q4_k_m.gguf}
pe=${PEERS_WORK:-/tmp/pe}  # the chunks, the bundle, the wheels' site and the per-column results
mkdir -p "$pe"
take() { rm -rf "${pe:?}/$1" && cp -r ".gpu/peers/$1" "$pe/$1" && du -sh "$pe/$1"; }
if [ "$step" = take ]; then
  take "${2:?which chunk: p1 .. pN}"
  exit 0
fi
[ "$step" = run ] || [ "$step" = cost ] || { echo "unknown step $step: take pK, run or cost"; exit 2; }
for d in .gpu/peers/p*; do [ -d "$d" ] && take "$(basename "$d")"; done
out=${OUT:?OUT must name the output folder}
[ -s "$gguf" ] || { echo "$gguf is missing: run ../shared/gpu/stage.sh's chunks and /tmp/st/gpu-setup.sh first"; exit 2; }
if [ ! -f "$pe"/site/.ragtrim-peers-ready ]; then
  [ -f "$pe"/p1/bundle.sha256 ] || { echo "chunk p1 is missing from $pe"; exit 2; }
  read -r sha n < "$pe"/p1/bundle.sha256
  for ((k=1; k<=n; k++)); do [ -d "$pe/p$k" ] || { echo "chunk p$k of $n is missing from $pe"; exit 2; }; done
  for ((k=1; k<=n; k++)); do cat "$pe"/p$k/chunk.*; done > "$pe"/bundle.tar
  [ "$(sha256sum "$pe"/bundle.tar | cut -d' ' -f1)" = "$sha" ] || { echo "bundle checksum differs"; exit 2; }
  rm -rf "$pe"/b "$pe"/site "$pe"/data && mkdir -p "$pe"/b "$pe"/site "$pe"/data
  tar -C "$pe"/b -xf "$pe"/bundle.tar && rm -f "$pe"/bundle.tar
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$pe"/site "$pe"/b/wheels/*.whl 2>&1 \
    | grep -v WARNING
  tar -C "$pe"/data -xJf "$pe"/b/data.tar.xz
  touch "$pe"/site/.ragtrim-peers-ready
fi
export PYTHONPATH="$pe"/b/pkg:"$pe"/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 RAGTRIM_DATA=$pe/data \
  HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAGTRIM_GGUF=$gguf
sha256sum "$gguf" | cut -c1-16   # a5fd3b62230aa5ec
[ -f /tmp/gemma-hf/gemma-3-270m/config.json ] || python3 -m ragtrim_bench.models.gemma --out /tmp/gemma-hf
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  python3 -c "import torch, transformers, llmlingua; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'llmlingua', llmlingua.__version__)"
  python3 -c "from ragtrim.scoring.auto import choose; print(choose())"; } > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
args=(--lingua-device cuda --lingua-model /tmp/gemma-hf/gemma-3-270m --no-progress)
if [ "$step" = cost ]; then
  c=${COST_LIMIT:-3}
  timeout "${COST_S:-265}" python3 -m ragtrim_bench.peers.matrix --split heldout --limit "$c" --slow-limit "$c" \
    --timed "$c" "${args[@]}" --output "$out/matrix_h200_cost.json" > "$out/matrix_h200_cost.txt" 2>&1
  rc=$?
  grep -v -i warn "$out/matrix_h200_cost.txt" | grep -A12 "cold cost"
  exit $rc
fi
columns=$(python3 -c "from ragtrim_bench.relevance.columns import COLUMNS; print(' '.join(COLUMNS))")
rm -f "$pe"/q_*.json
for c in $columns; do  # one thread each: nine processes on the host's cores, their models on the GPU
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout "${QUALITY_S:-320}" python3 -m ragtrim_bench.peers.matrix \
    --columns "$c" --split both --limit "${LIMIT:-10}" --slow-limit "${SLOW_LIMIT:-5}" --timed 0 "${args[@]}" \
    --output "$pe/q_$c.json" > "$pe/q_$c.log" 2>&1 &
done
wait
rc=0
for c in $columns; do
  [ -s "$pe/q_$c.json" ] || { rc=1; echo "== $c: no result"; grep -v -i warn "$pe/q_$c.log" | tail -8; }
done
python3 -m ragtrim_bench.peers.matrix --merge "$pe"/q_*.json --output "$out/matrix_h200.json" \
  > "$out/matrix_h200.txt" 2>&1 || rc=1
tail -25 "$out/matrix_h200.txt"
exit $rc
