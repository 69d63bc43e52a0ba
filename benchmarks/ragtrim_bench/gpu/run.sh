#!/usr/bin/env bash
# The third H200 session's commands (kind nvidia-h200-x2), run on the GPU machine from the repository root after the
# 9 chunk runs of ../shared/gpu/stage.sh (each copies .gpu/sK to /tmp/st), carrying .gpu/prompts and .whl
# (stage_extra.sh in this folder):
#   bash benchmarks/ragtrim_bench/gpu/run.sh knobs   12B knobs, two drivers in parallel, one per GPU (GPU 0: the BF16 baseline,
#                                          FP8 weights, 2,048 batched tokens; GPU 1: eager, prefix caching off, the
#                                          OpenAI-compatible server)
#   bash benchmarks/ragtrim_bench/gpu/run.sh tp2     the 27B shape with tensor parallelism 2 (both GPUs), then in parallel
#                                          GPU 0: 270M GGUF Q4_K_M; GPU 1: the reader-reranked top-1 arm beside plain
#                                          top-1 (ragtrim-bench gpu make_prompts --candidates top1,top1_qlm --only-candidates qlm)
#   bash benchmarks/ragtrim_bench/gpu/run.sh qlm     the reranked arm alone; pie   the 12B shape with piecewise-only CUDA graphs
#   bash benchmarks/ragtrim_bench/gpu/run.sh setup   only install vLLM and write the model folders (run 4: its own call, so the
#                                          next call's drivers get the whole 600 s; the machine keeps /tmp for ~30 s)
#   bash benchmarks/ragtrim_bench/gpu/run.sh graphs  GPU 0: 12b_baseline_n100 beside CUDA graphs up to 1,024 tokens; GPU 1: the
#                                          270M on random distractors (gpu make_prompts --distractors random), then
#                                          piecewise-only graphs and eager
#   bash benchmarks/ragtrim_bench/gpu/run.sh load    GPU 0: the Poisson ladder on the 1,024-token-graph engine; GPU 1: the 270M
#                                          on random distractors again, then a repeat of 12b_graphs_1024
#   bash benchmarks/ragtrim_bench/gpu/run.sh tp2g    the 27B shape, TP=2, with torch.compile and CUDA graphs up to 1,024 tokens
#                                          (run 4: crashed in graph capture); tp2nf  the same without vLLM's fused
#                                          all-reduce + RMSNorm pass (next session; driver budget 500 s)
# (run 3 ran `knobs` twice, then `tp2`; run 4 ran `setup`, `graphs`, then on a fresh machine `setup`, `load`, then
#  on a third one `setup` and `tp2g` in one call; qlm and pie were never run)
# Results land in $OUT as gpu_suite_<suite>_<tag>.json (+ logs); copy the JSON to benchmarks/results/gpu/ and summarize
# the logs with `ragtrim-bench gpu engine_logs $OUT` (raw logs are not committed).
set -uo pipefail
step=${1:?usage: run.sh setup|knobs|tp2|qlm|pie|graphs|load|tp2g|tp2nf}
out=${OUT:?OUT must name the output folder}
if [ ! -f /tmp/site/.ragtrim-ready ]; then
  bash /tmp/st/gpu-setup.sh || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | grep -v WARNING
  touch /tmp/site/.ragtrim-ready
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 \
  RAGTRIM_GGUF=${RAGTRIM_GGUF:-/tmp/gemma/gemma-3-270m-q4_k_m.gguf}  # where gpu-setup.sh stages it
# One vLLM cache for all drivers: the first engines on a fresh machine spend ~100 s in a one-time kernel warm-up that
# later engines reuse (run 3's first `knobs` command gave each driver its own cache and every engine timed out).
drive() {  # drive GPU TAG SUITE ONLY BUDGET: one driver pinned to GPU (or "0,1"), log in $OUT
  CUDA_VISIBLE_DEVICES=$1 VLLM_CACHE_ROOT=/tmp/vllm-cache-g1 python3 -m ragtrim_bench.gpu.suites --suite "$3" --tag "_$2" --only "$4" \
    --prompts .gpu/prompts --out "$out" --budget-s "$5" > "$out/driver_$2.log" 2>&1
}
python3 -m ragtrim_bench.gpu.suites --prepare-only || exit 1
case $step in
  setup)
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$out/gpus.txt" 2>&1
    exit 0 ;;
  knobs)
    nvidia-smi topo -m > "$out/topology.txt" 2>&1
    python3 -c "import torch; print('gpus', torch.cuda.device_count(), 'p2p', torch.cuda.can_device_access_peer(0, 1))" \
      >> "$out/topology.txt" 2>&1
    drive 0 g0 c 12b_baseline,12b_fp8_weights,12b_batched_2048 450 &
    drive 1 g1 c 12b_eager,12b_no_prefix_cache,12b_server 450 &
    wait ;;
  tp2)
    drive 0,1 tp2 c 27b_tp2_bf16kv_len4096 240
    drive 0 g0 a 270m_gguf_q4km 200 &
    drive 1 g1 a 270m_bf16kv_qlm 200 &
    wait ;;
  qlm)
    drive 0 g0q a 270m_bf16kv_qlm 200 ;;
  pie)
    drive 0 g0p c 12b_piecewise 200 ;;
  graphs)  # the CUDA-graph capture size against the same-session baseline (first engines: ~100 s warm-up)
    drive 0 g0g c 12b_baseline_n100,12b_graphs_1024 560 &
    { drive 1 g1r a 270m_bf16kv_random 170; drive 1 g1g c 12b_piecewise,12b_eager 390; } &
    wait ;;
  load)  # run 4's second call: the Poisson ladder on the 1,024-token-graph engine; the random-distractor accuracy
         # (its 170 s in `graphs` went to the first engine's warm-up) and a repeat of 12b_graphs_1024 on GPU 1
    drive 0 g0l b 12b_graphs_1024_load 540 &
    { drive 1 g1r a 270m_bf16kv_random 250; drive 1 g1h c 12b_graphs_1024 280; } &
    wait ;;
  tp2g)  # run 4's last device minutes: 27B TP=2 with CUDA graphs (fresh machine: warm-up, compile and capture first)
    drive 0,1 tp2g c 27b_tp2_graphs 300 ;;
  tp2nf)  # not run yet: the same without the fused all-reduce + RMSNorm pass that crashed tp2g's graph capture
    drive 0,1 tp2nf c 27b_tp2_graphs_nofuse 500 ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
grep -h "^\[run_gpu\]" "$out"/driver_*.log
