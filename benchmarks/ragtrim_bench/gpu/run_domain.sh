#!/usr/bin/env bash
# The domain columns (TAT-QA, CUAD, CMRC, JSQuAD) on the H200 host: the default recipe beside the default with Gemma 3
# 270M's query likelihood reranking its 5 or 10 best chunks (ragtrim_bench/relevance/domain_rows.py), the recipe
# that needs a GPU. The default's MiniLM runs there as it does on a CPU host without the torch extra (int8 ONNX on
# the host's CPU): only Gemma uses the GPU.
#
# On the CPU machine, from the repository root: bash benchmarks/ragtrim_bench/gpu/stage_domain.sh (writes
# .gpu/dom/k0..kN and prints the calls). Then, on the GPU machine (kind nvidia-h200), back to back:
#   bash benchmarks/ragtrim_bench/gpu/run_domain.sh receive K     carrying .gpu/dom/kK, for each K
#   bash benchmarks/ragtrim_bench/gpu/run_domain.sh run           no carry: joins and checks the GGUF, installs
#       the wheels, unpacks the data, writes the transformers folder, then the matrix on the four domain columns,
#       SPLITS (default heldout; "dev heldout" for both), MATRIX_ARGS (default --limit 50 --timed 20), rows default,
#       qlm-top5, qlm-top10.
# After ../shared/gpu/stage.sh's chunks and gpu-setup.sh on the same machine (the GGUF is then in /tmp/gemma), only the
# last chunk, which holds the data and the wheels, needs to travel: receive it, then run.
# Results land in $OUT: quality_matrix_h200_domain_<split>.json (+ .png) and matrix_domain_<split>.log; copy the JSON
# and PNG to benchmarks/results/relevance/. A dry run on a CPU host: RAGTRIM_GPU_STAGE, RAGTRIM_GPU_SITE (scratch
# folders), PYTHON (.venv/bin/python), RAGTRIM_QLM_DEVICE=cpu, MATRIX_ARGS='--limit 2 --timed 0'.
set -uo pipefail
step=${1:?usage: run_domain.sh receive K | run}
g=${RAGTRIM_GPU_STAGE:-/tmp/gd}
site=${RAGTRIM_GPU_SITE:-/tmp/site}
py=${PYTHON:-python3}
if [ "$step" = receive ]; then
  k=${2:?usage: run_domain.sh receive K}
  mkdir -p $g && cp -r .gpu/dom/k"$k"/* $g/ && ls $g | tr '\n' ' ' && echo
  exit $?
fi
[ "$step" = run ] || { echo "unknown step $step: receive K | run" >&2; exit 2; }
out=${OUT:?OUT must name the output folder}
set -e
staged=${RAGTRIM_STAGED_GGUF:-/tmp/gemma/gemma-3-270m-q4_k_m.gguf}
if [ ! -s $g/model.gguf ] && [ -s "$staged" ]; then
  # ../shared/gpu/gpu-setup.sh already wrote the GGUF: only the last chunk (data and wheels) had to travel
  ln -sf "$staged" $g/model.gguf && rm -f $g/gguf.part*
fi
if [ ! -s $g/model.gguf ]; then
  cat $g/gguf.part* > $g/model.gguf && rm -f $g/gguf.part*
fi
sha256sum $g/model.gguf | cut -c1-16   # expect a5fd3b62230aa5ec
sha256sum $g/model.gguf | grep -q '^a5fd3b62230aa5ec' || { echo "the GGUF is incomplete: send every chunk" >&2; exit 1; }
[ -d $g/data ] || { mkdir -p $g/data && tar -C $g/data -xJf $g/data.tar.xz; }
$py -m pip install -q --no-index --no-deps --no-compile --target $site $g/whl/*.whl 2>&1 | grep -v WARNING || true
export PYTHONPATH=$site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 RAGTRIM_DATA=$g/data HF_HUB_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false RAGTRIM_GGUF=$g/model.gguf RAGTRIM_QLM_MODEL=$g/gemma-hf/gemma-3-270m \
  RAGTRIM_QLM_DEVICE=${RAGTRIM_QLM_DEVICE:-cuda}
if [ ! -f $g/gemma-hf/gemma-3-270m/config.json ]; then
  $py -m ragtrim_bench.models.gemma --out $g/gemma-hf 2>&1 | tail -3
fi
set +e
rc=0
for split in ${SPLITS:-heldout}; do
  $py -m ragtrim_bench.relevance.matrix --split "$split" --columns tatqa,cuad,cmrc,jsquad \
    --rows default,ragtrim_bench.relevance.domain_rows:qlm_top5,ragtrim_bench.relevance.domain_rows:qlm_top10 \
    --no-progress ${MATRIX_ARGS:---limit 50 --timed 20} --output "$out/quality_matrix_h200_domain_$split.json" \
    > "$out/matrix_domain_$split.log" 2>&1 || rc=$?
  grep -v -i warn "$out/matrix_domain_$split.log" | tail -30
done
exit $rc
