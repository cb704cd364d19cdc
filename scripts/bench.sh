#!/usr/bin/env bash
# The main job: build, then run the benchmark and verification suite (dsv4_bench --check).
# With a GPU: every case is checked against the CPU reference and timed; a summary table is
# printed. Without a GPU: each case's CPU reference runs on a small input of the same kind,
# with its checks (no timings of the library).
#
#   scripts/bench.sh [dsv4_bench args...]       e.g. --op kv_gather, --json FILE
#
# Nothing is written unless asked: --json FILE, or DSV4_RESULTS=FILE, writes one JSON line
# per case. The committed results in benchmarks/results/ are never overwritten: write to a
# new file and compare (benchmarks/report.py).
set -eu
cd "$(dirname "$0")/.."
scripts/build.sh
bin=${DSV4_BUILD_DIR:-build}/bench/dsv4_bench
# A copy of the tree without .git (e.g. sent to a GPU machine) names its commit in DSV4_COMMIT.
commit=${DSV4_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}

args=("$@")
out=
for ((i = 0; i < ${#args[@]}; ++i)); do
  [ "${args[i]}" = --json ] && [ $((i + 1)) -lt ${#args[@]} ] && out=${args[i + 1]}
done
if [ -z "$out" ] && [ -n "${DSV4_RESULTS:-}" ]; then
  out=$DSV4_RESULTS
  args+=(--json "$out")
fi
if [ -n "$out" ]; then
  results=$(realpath -m benchmarks/results)
  target=$(realpath -m "$out")
  case $target in
    "$results"/*)
      if [ -e "$target" ] || git ls-files --error-unmatch "$target" >/dev/null 2>&1; then
        echo "bench: $out holds committed results; write to a new file instead" >&2
        exit 2
      fi ;;
  esac
  mkdir -p "$(dirname "$out")"
fi
"$bin" --check --commit "$commit" "${args[@]}"
[ -z "$out" ] || echo "results: $out"
