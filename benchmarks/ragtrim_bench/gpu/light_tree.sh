#!/usr/bin/env bash
# Leave benchmarks/results/ out of the working tree that travels to the GPU machine, and put it back.
# A device call carries the tracked tree and the carried pieces, 64 MiB in all; the tracked tree is close to 60 MiB,
# half of it results, which leaves room for no staging piece. Run on the CPU machine from the project root:
#   bash benchmarks/ragtrim_bench/gpu/light_tree.sh on        results untracked in the index and ignored (files stay)
#   bash benchmarks/ragtrim_bench/gpu/light_tree.sh on model  the shipped int8 MiniLM too (23 MB of the 28 left):
#                                                             stage_light.sh then carries it in its pieces, and
#                                                             run_e2e.sh puts it back in place on the GPU machine
#   bash benchmarks/ragtrim_bench/gpu/light_tree.sh off       the index as HEAD has it, the ignore lines gone
#   bash benchmarks/ragtrim_bench/gpu/light_tree.sh status    which it is, and the size that travels
# Between "on" and "off" the index holds the removal: commit nothing then (a commit would delete the files).
# "on" refuses when the index holds other changes, so that "off" restores exactly what it took out.
set -euo pipefail
exclude=$(git rev-parse --git-path info/exclude)
results=benchmarks/results
model=ragtrim/data/all-MiniLM-L6-v2/model.int8.onnx
travelling() {  # disk usage, rounded up to whole MiB: the device's limit counts more than the files' bytes
  local kib
  kib=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r du -ck 2>/dev/null \
    | awk '$2 == "total" { s += $1 } END { print s + 0 }')
  echo "$(((kib + 1023) / 1024)) MiB of tracked and untracked files travel (64 MiB in all with what a call carries)"
}
is_on() { grep -qxF "/$results/" "$exclude" 2>/dev/null; }
model_left() { grep -qxF "/$model" "$exclude" 2>/dev/null; }
case ${1:-status} in
  on)
    if is_on; then echo "already on"; travelling; exit 0; fi
    if ! git diff --cached --quiet; then
      echo "the index holds staged changes: commit or unstage them first" >&2
      exit 1
    fi
    git rm -r -q --cached "$results"
    echo "/$results/" >> "$exclude"
    if [ "${2:-}" = model ]; then
      git rm -q --cached "$model"
      echo "/$model" >> "$exclude"
    fi
    echo "on: $results/$(model_left && echo " and the shipped int8 MiniLM") stay behind; run '$0 off' before committing"
    travelling ;;
  off)
    grep -vxF -e "/$results/" -e "/$model" "$exclude" > "$exclude.tmp" || true
    mv "$exclude.tmp" "$exclude"
    git reset -q -- "$results" "$model"
    echo "off: $results/ and $model tracked as in HEAD"
    travelling ;;
  status)
    if is_on; then
      echo "on: $results/$(model_left && echo " and the shipped int8 MiniLM") stay behind"
    else
      echo "off"
    fi
    travelling ;;
  *) echo "usage: $0 on [model]|off|status" >&2; exit 2 ;;
esac
