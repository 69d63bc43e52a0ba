#!/usr/bin/env bash
# Leave benchmarks/results/ out of the working tree that travels to the GPU machine, and put it back.
# A device call carries the tracked tree and the carried pieces, 64 MiB in all; the tracked tree is close to 60 MiB,
# half of it results, which leaves room for no staging piece. Run on the CPU machine from the project root:
#   bash benchmarks/ragtrim_bench/gpu/light_tree.sh on      results untracked in the index and ignored (files stay)
#   bash benchmarks/ragtrim_bench/gpu/light_tree.sh off     the index as HEAD has it, the ignore line gone
#   bash benchmarks/ragtrim_bench/gpu/light_tree.sh status  which it is, and the size that travels
# Between "on" and "off" the index holds the results' removal: commit nothing then (a commit would delete them).
# "on" refuses when the index holds other changes, so that "off" restores exactly what it took out.
set -euo pipefail
exclude=$(git rev-parse --git-path info/exclude)
line=/benchmarks/results/
travelling() {
  local bytes
  bytes=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r du -cb 2>/dev/null \
    | awk '$2 == "total" { s += $1 } END { print s + 0 }')
  echo "$((bytes / 1048576)) MiB of tracked and untracked files travel (64 MiB in all with what a call carries)"
}
is_on() { grep -qxF "$line" "$exclude" 2>/dev/null; }
case ${1:-status} in
  on)
    if is_on; then echo "already on"; travelling; exit 0; fi
    if ! git diff --cached --quiet; then
      echo "the index holds staged changes: commit or unstage them first" >&2
      exit 1
    fi
    git rm -r -q --cached benchmarks/results
    echo "$line" >> "$exclude"
    echo "on: benchmarks/results/ stays behind; run '$0 off' before committing"
    travelling ;;
  off)
    if is_on; then
      grep -vxF "$line" "$exclude" > "$exclude.tmp" || true
      mv "$exclude.tmp" "$exclude"
    fi
    git reset -q -- benchmarks/results
    echo "off: benchmarks/results/ tracked as in HEAD"
    travelling ;;
  status)
    if is_on; then echo "on: benchmarks/results/ stays behind"; else echo "off"; fi
    travelling ;;
  *) echo "usage: $0 on|off|status" >&2; exit 2 ;;
esac
