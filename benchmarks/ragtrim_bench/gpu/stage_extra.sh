#!/usr/bin/env bash
# Wheels the GPU suites need beyond ../shared/gpu/stage.sh (found missing in the 2026-11-30 run):
#   loguru            imported by vLLM 0.26's FP8 weight-quantization path (suite c, 12b_fp8_weights)
#   vllm-gguf-plugin  GGUF loading moved out of vLLM (suite a, 270m_gguf_q4km, the INT4 point)
# Run on the CPU machine from the project root; writes .whl/ (git-ignored). On the GPU machine, carry ".whl" and run
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
# after gpu-setup.sh.
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any \
  -d .whl loguru==0.7.3 vllm-gguf-plugin==0.0.5
ls -la .whl
