#!/usr/bin/env bash
# ragtrim and its peers on the H200 host: `ragtrim-bench peers matrix` with LongLLMLingua's Gemma 3 270M and the
# frameworks' MiniLM on the GPU, ragtrim's default with MiniLM on the GPU (its CUDA path) and the rest on the host's
# CPU. Run on the GPU machine from the repository root, after stage_peers.sh's carries (see there):
#   bash benchmarks/ragtrim_bench/gpu/session_peers.sh take a     (carrying .gpu/peers/a; then b, g1 .. g4 alike)
#   bash benchmarks/ragtrim_bench/gpu/session_peers.sh run        (carrying .gpu/peers/g5)
# `run` installs the carried wheels into /tmp/site, unpacks the data, joins the GGUF and writes the 270M's
# transformers folder, then:
#   1. quality: one process per column, all at once, both splits, every row; LIMIT requests per column and split
#      (default 100), the LongLLMLingua rows on the first SLOW_LIMIT (default 50); nothing timed (the processes
#      share the host); merged into matrix_h200.json (+ .png, .txt)
#   2. cost: one process, every row, the first COST_LIMIT (default 10) held-out requests of each column timed cold;
#      matrix_h200_cost.json (+ .png, .txt)
# Each pass is bounded (QUALITY_S, default 330 s; COST_S, default 200 s): a column that runs out of time is missing
# from the merge and its log's tail is printed. $OUT gets 7 files.
set -uo pipefail
step=${1:?usage: session_peers.sh take a|b|g1|g2|g3|g4, or run}
parts="a b g1 g2 g3 g4 g5"
mkdir -p /tmp/pe
take() { rm -rf "/tmp/pe/$1" && cp -r ".gpu/peers/$1" "/tmp/pe/$1"; }
if [ "$step" = take ]; then
  take "${2:?which carry: a b g1 g2 g3 g4}"
  du -sh /tmp/pe/*
  exit 0
fi
[ -d .gpu/peers/g5 ] && take g5
out=${OUT:?OUT must name the output folder}
for part in $parts; do [ -d "/tmp/pe/$part" ] || { echo "carry $part is missing from /tmp/pe"; exit 2; }; done
if [ ! -f /tmp/site/.ragtrim-peers-ready ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/pe/b/*.whl 2>&1 | grep -v WARNING
  mkdir -p /tmp/data /tmp/gemma && tar -C /tmp/data -xJf /tmp/pe/b/data.tar.xz
  cat /tmp/pe/g1/chunk.* /tmp/pe/g2/chunk.* /tmp/pe/g3/chunk.* /tmp/pe/g4/chunk.* /tmp/pe/g5/chunk.* \
    > /tmp/gemma/gemma-3-270m-q4_k_m.gguf
  touch /tmp/site/.ragtrim-peers-ready
fi
export PYTHONPATH=/tmp/pe/a/pkg:/tmp/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 RAGTRIM_DATA=/tmp/data \
  HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAGTRIM_GGUF=/tmp/gemma/gemma-3-270m-q4_k_m.gguf
sha256sum /tmp/gemma/gemma-3-270m-q4_k_m.gguf | cut -c1-16   # a5fd3b62230aa5ec
[ -f /tmp/gemma-hf/gemma-3-270m/config.json ] || python3 -m ragtrim_bench.models.gemma --out /tmp/gemma-hf
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  python3 -c "import torch, transformers, llmlingua; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'llmlingua', llmlingua.__version__)"
  python3 -c "from ragtrim.scoring.auto import choose; print(choose())"; } > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
args=(--lingua-device cuda --lingua-model /tmp/gemma-hf/gemma-3-270m --no-progress)
columns=$(python3 -c "from ragtrim_bench.relevance.columns import COLUMNS; print(' '.join(COLUMNS))")
rm -f /tmp/pe/q_*.json
for c in $columns; do
  timeout "${QUALITY_S:-330}" python3 -m ragtrim_bench.peers.matrix --columns "$c" --split both \
    --limit "${LIMIT:-100}" --slow-limit "${SLOW_LIMIT:-50}" --timed 0 "${args[@]}" \
    --output "/tmp/pe/q_$c.json" > "/tmp/pe/q_$c.log" 2>&1 &
done
wait
rc=0
for c in $columns; do
  [ -s "/tmp/pe/q_$c.json" ] || { rc=1; echo "== $c: no result"; grep -v -i warn "/tmp/pe/q_$c.log" | tail -8; }
done
python3 -m ragtrim_bench.peers.matrix --merge /tmp/pe/q_*.json --output "$out/matrix_h200.json" \
  > "$out/matrix_h200.txt" 2>&1 || rc=1
tail -25 "$out/matrix_h200.txt"
c=${COST_LIMIT:-10}
timeout "${COST_S:-200}" python3 -m ragtrim_bench.peers.matrix --split heldout --limit "$c" --slow-limit "$c" \
  --timed "$c" "${args[@]}" --output "$out/matrix_h200_cost.json" > "$out/matrix_h200_cost.txt" 2>&1 || rc=1
grep -v -i warn "$out/matrix_h200_cost.txt" | tail -22
exit $rc
