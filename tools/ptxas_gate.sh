#!/usr/bin/env bash
# CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER): the build-time half of the
# resource gate. It runs the nvcc command with `-Xptxas -v`, keeps ptxas's report next to
# the object (<obj>.ptxas.txt), and fails the compile when any kernel, on any real target
# arch, uses more than 48 KB of static shared memory, a stack frame (local memory) or
# spills. Dynamic shared memory is gated by each config header and at launch
# (src/common/launch.h). Usage: ptxas_gate.sh <nvcc> <args...>
set -u
limit=49152
obj=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && obj="$a"
  prev="$a"
done
log=$(mktemp)
"$@" -Xptxas -v >"$log" 2>&1
rc=$?
report="${obj:-/dev/null}.ptxas.txt"
[ -n "$obj" ] || report=/dev/null
grep -E 'ptxas|bytes stack frame' "$log" >"$report" 2>/dev/null || true
# Show everything except ptxas's info chatter.
grep -vE '^ptxas info|^ +[0-9]+ bytes stack frame' "$log" >&2
rm -f "$log"
[ $rc -eq 0 ] || exit $rc
awk -v limit=$limit '
  /Compiling entry function/ { fn = $0; sub(/.*function ./, "", fn); sub(/. for .*/, "", fn);
                               arch = $0; sub(/.*for ./, "", arch); sub(/.$/, "", arch) }
  /Function properties for/  { cur = $0; sub(/.*properties for /, "", cur) }
  /bytes stack frame/ { if ($1 + 0 > 0 || $5 + 0 > 0) { printf "ptxas gate: %s uses %s bytes of stack frame, %s bytes spill stores\n", cur, $1, $5; bad = 1 } }
  /bytes smem/ { for (i = 1; i <= NF; i++) if ($(i+1) == "bytes" && $(i+2) ~ /^smem/) s = $i + 0;
                 if (s > limit) { printf "ptxas gate: %s (%s) uses %d bytes of static shared memory, over %d\n", fn, arch, s, limit; bad = 1 } }
  END { exit bad }' "$report" >&2 || { echo "ptxas gate: failing $obj" >&2; rm -f "$obj"; exit 1; }
exit 0
