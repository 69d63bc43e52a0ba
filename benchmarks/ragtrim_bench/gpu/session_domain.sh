#!/usr/bin/env bash
# The domain columns (TAT-QA, CUAD, CMRC, JSQuAD) on the H200 host: the default recipe beside the default with Gemma 3
# 270M's query likelihood reranking its 5 or 10 best chunks (ragtrim_bench/relevance/domain_rows.py), the recipe
# that needs a GPU. Run on the GPU machine from the repository root, kind nvidia-h200:
#   1. the chunk runs of ../shared/gpu/stage.sh (each copies .gpu/sK to /tmp/st; they carry the Gemma GGUF), then
#   2. bash benchmarks/ragtrim_bench/gpu/session_domain.sh model     (carrying .gpu/whl and .gpu/data, written by
#      stage_matrix.sh in this folder: the domain data sets are among them) the GGUF -> a transformers folder
#   3. bash benchmarks/ragtrim_bench/gpu/session_domain.sh dev       then `heldout`: the matrix on the four domain
#      columns (100 requests each by default: MATRIX_ARGS overrides), rows default, qlm-top5, qlm-top10
# Results land in $OUT as quality_matrix_h200_domain_<split>.json; copy them to benchmarks/results/relevance/.
set -uo pipefail
step=${1:?usage: session_domain.sh model|dev|heldout}
out=${OUT:?OUT must name the output folder}
mkdir -p /tmp/g
for d in pkg whl data; do [ -d .gpu/$d ] && rm -rf /tmp/g/$d && cp -r .gpu/$d /tmp/g/$d; done
if [ ! -f /tmp/site/.ragtrim-matrix-ready ]; then
  [ -f /tmp/st/gpu-setup.sh ] && bash /tmp/st/gpu-setup.sh
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/g/whl/*.whl 2>&1 | grep -v WARNING
  touch /tmp/site/.ragtrim-matrix-ready
fi
export PYTHONPATH=/tmp/g/pkg:/tmp/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 RAGTRIM_DATA=/tmp/g/data \
  HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAGTRIM_GGUF=/tmp/gemma/gemma-3-270m-q4_k_m.gguf \
  RAGTRIM_QLM_MODEL=/tmp/g/gemma-hf/gemma-3-270m RAGTRIM_QLM_DEVICE=cuda
if [ "$step" = model ]; then
  python3 -m ragtrim_bench.models.gemma --out /tmp/g/gemma-hf 2>&1 | tail -5
  ls /tmp/g/gemma-hf/gemma-3-270m
  exit $?
fi
python3 -m ragtrim_bench.relevance.matrix --split "$step" --columns tatqa,cuad,cmrc,jsquad \
  --rows default,ragtrim_bench.relevance.domain_rows:qlm_top5,ragtrim_bench.relevance.domain_rows:qlm_top10 \
  --no-progress ${MATRIX_ARGS:---limit 100 --timed 20} --output "$out/quality_matrix_h200_domain_$step.json" \
  > "$out/matrix_domain_$step.log" 2>&1
rc=$?
grep -v -i warn "$out/matrix_domain_$step.log" | tail -40
exit $rc
