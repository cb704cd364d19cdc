#!/usr/bin/env bash
# Shows that the build's resource gate (tools/ptxas_gate.sh) passes a legal kernel and
# rejects, on sm_80 and sm_86, a kernel over 48 KB of static shared memory (ptxas itself
# or the gate's own check, whichever speaks first) and a kernel that uses local memory. Usage: test_gate.sh <gate> <nvcc> <fixture dir> <work dir>
set -u
gate=$1 nvcc=$2 src=$3 work=$4
mkdir -p "$work"
fail=0
for arch in 80 86; do
  flags=(-c -gencode "arch=compute_$arch,code=sm_$arch")
  if ! "$gate" "$nvcc" "${flags[@]}" "$src/under_limit.cu" -o "$work/under_$arch.o" 2>"$work/under.log"; then
    echo "FAIL: sm_$arch: the gate rejected a 40 KB kernel"; cat "$work/under.log"; fail=1
  fi
  if "$gate" "$nvcc" "${flags[@]}" "$src/over_smem.cu" -o "$work/over_$arch.o" 2>"$work/over.log"; then
    echo "FAIL: sm_$arch: the gate accepted 52,000 bytes of static shared memory"; fail=1
  elif ! grep -qE "52000 bytes of static shared memory|too much shared data" "$work/over.log"; then
    echo "FAIL: sm_$arch: rejected for the wrong reason:"; cat "$work/over.log"; fail=1
  elif [ -e "$work/over_$arch.o" ]; then
    echo "FAIL: sm_$arch: the rejected object was left behind"; fail=1
  fi
  if "$gate" "$nvcc" "${flags[@]}" "$src/local_mem.cu" -o "$work/local_$arch.o" 2>"$work/local.log"; then
    echo "FAIL: sm_$arch: the gate accepted a kernel with local memory"; fail=1
  elif ! grep -q "bytes of stack frame" "$work/local.log"; then
    echo "FAIL: sm_$arch: local memory rejected for the wrong reason:"; cat "$work/local.log"; fail=1
  fi
done
[ $fail -eq 0 ] && echo "PASS: gate accepts 40 KB, rejects 52,000 B static smem and local memory on sm_80/sm_86"
exit $fail
