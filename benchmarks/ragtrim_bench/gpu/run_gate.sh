#!/usr/bin/env bash
# The H200 gate run (docs/gate.md), one command on the GPU machine (kind nvidia-h200) from the repository root,
# carrying .gpu/gate (stage_gate.sh), after the 9 chunk runs of ../shared/gpu/stage.sh (each copies .gpu/sK to
# /tmp/st) on the same machine:
#   bash benchmarks/ragtrim_bench/gpu/run_gate.sh setup   install vLLM 0.26 (gpu-setup.sh) and the staged wheels
#                                                            into /tmp/site (about a minute; its own call, so the run
#                                                            below gets the whole 10 minutes)
#   bash benchmarks/ragtrim_bench/gpu/run_gate.sh         the run: ragtrim_bench.gate.gpu_arms fine-tunes the 270M
#                                                            reader (2 min), starts the four engines one after
#                                                            another, runs `ragtrim gate` (300 questions, 5 arms)
# $OUT gets gate.json, gate.html, gate_gpu.json, results.jsonl, logs.tar.gz, driver.log; copy the first three to
# benchmarks/results/gate/h200/. Extra arguments go to gpu_arms (--train-seconds, --short-max-len, --resume, ...).
# GATE_BUDGET_S caps the run (default 540 s: the device stops a command at 600 s). Should it not fit, split it in two
# calls on the same machine: `run_gate.sh --train-only`, then `run_gate.sh --reuse-reader`.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
if [ ! -f /tmp/site/.ragtrim-gate-ready ]; then
  bash /tmp/st/gpu-setup.sh || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/gate/whl/*.whl 2>&1 | grep -v WARNING
  touch /tmp/site/.ragtrim-gate-ready
fi
if [ "${1:-}" = setup ]; then
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
  exit 0
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 RAGTRIM_DATA=$PWD/.gpu/gate/data \
  RAGTRIM_VECTOR_STORE=off VLLM_CACHE_ROOT=/tmp/vllm-cache-gate RAGTRIM_GGUF=${RAGTRIM_GGUF:-/tmp/gemma/gemma-3-270m-q4_k_m.gguf}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
python3 -c "import vllm, torch, transformers, httpx, lxml; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" || exit 1
python3 -m ragtrim_bench.gate.gpu_arms --out "$out" --budget-s "${GATE_BUDGET_S:-540}" "$@" 2>&1 | tee "$out/driver.log" | grep -E "^\[gate-gpu\]|^\[finetune\] done|PASS|FAIL|verdict"
