#!/usr/bin/env bash
# Everything run_e2e.sh's steps need on the GPU machine in 7 to 10 device calls instead of about 19: vLLM and its
# dependencies as ../shared/gpu/stage.sh selects them, but without the Gemma 3 270M GGUF (250 MB, about half of
# stage.sh's bundle): run_e2e.sh serves the Gemma-3-12B shape with dummy weights, which needs only the 12B
# config.json and the 270M tokenizer (same vocabulary), written here from the GGUF; and stage_e2e.sh's carries in the
# same stream, so that no piece travels half empty.
# Run on the CPU machine from the project root, with benchmarks/results/ and the shipped int8 MiniLM left behind
# (bash benchmarks/ragtrim_bench/gpu/light_tree.sh on model; off again before committing: the model then travels in
# the pieces, which the smaller tree leaves room for: 7 calls instead of 11). It writes .gpu/l0 .. .gpu/lN
# (RAGTRIM_LIGHT_CHUNK each, default what the tree leaves of a call's 64 MiB, less 2 MiB); carry each in its own
# run, back to back, copying it to /tmp/gl:
#   mkdir -p /tmp/gl && cp .gpu/lK/* /tmp/gl/
# and run run_e2e.sh's steps after the last one (its first step unpacks /tmp/gl: vLLM into /tmp/site, the 12B
# folder into /tmp/gemma-dummy/12b, stage_e2e.sh's carries into /tmp/g). Steps that load the 270M model's weights
# (../shared/gpu/stage.sh's suites) still need stage.sh's chunks.
set -euo pipefail
py=${PYTHON:-.venv/bin/python}
shared=${RAGTRIM_GPU_SHARED:-../shared/gpu}
b=.gpu/stage-light
bash "$shared/stage.sh" > /dev/null   # downloads once into its cache; writes .gpu/s0 .. .gpu/sN (unpacked below)
RAGTRIM_E2E_CHUNK=1G bash benchmarks/ragtrim_bench/gpu/stage_e2e.sh > /dev/null   # one piece: .gpu/e0/e2e.part.00
rm -rf "$b" && mkdir -p "$b"
# stage.sh's bundle, in chunk order (chunk.00, chunk.01, ...), without its GGUF wheels
# shellcheck disable=SC2046
cat $(printf '%s\n' .gpu/s[0-9]*/chunk.* | sort -t/ -k3) | tar xf - -C "$b" --exclude=./gguf
rm -rf "$b/gguf"
mv .gpu/e0/e2e.part.00 "$b/e2e.tar.xz"
PYTHONPATH=$PWD:$PWD/benchmarks $py -m ragtrim_bench.models.gemma --out .gpu/dummy --dummy 12b --skip-weights
tar cf - -C .gpu/dummy gemma-3-12b-dummy | xz -T0 -6 > "$b/dummy.tar.xz"   # its tokenizer.json is 32 MB, 3.5 compressed
rm -rf .gpu/dummy
# the shipped int8 MiniLM, where light_tree.sh left it behind ("on model"): run_e2e.sh puts it back in place
model=ragtrim/data/all-MiniLM-L6-v2/model.int8.onnx
if [ -z "$(git ls-files -- "$model")" ]; then cp "$model" "$b/"; fi
rm -rf .gpu/s[0-9]* .gpu/e[0-9]* .gpu/l[0-9]*
tar cf .gpu/light.tar -C "$b" .
rm -rf "$b"
# a call carries at most 64 MiB with the tree that travels: the pieces take what the tree leaves, less 2 MiB (a
# piece of 57 MiB beside a tree of 6.7 MiB of files, 7.9 on disk, was refused)
tree=$(bash benchmarks/ragtrim_bench/gpu/light_tree.sh status | awk '/MiB of tracked/ { print $1 }')
(cd .gpu && split -b "${RAGTRIM_LIGHT_CHUNK:-$((62 - tree))m}" -d light.tar light.part.)
rm -f .gpu/light.tar
i=0
for c in .gpu/light.part.*; do mkdir -p .gpu/l$i; mv "$c" .gpu/l$i/; i=$((i+1)); done
echo "staged $i pieces under .gpu/ ($(du -sh .gpu | cut -f1)); carry each in its own run, back to back:"
for ((k=0; k<i; k++)); do echo "  [\".gpu/l$k\"]:  mkdir -p /tmp/gl && cp .gpu/l$k/* /tmp/gl/"; done
echo "then: export OUT; bash benchmarks/ragtrim_bench/gpu/run_e2e.sh setup (or any step)"
