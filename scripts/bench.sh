#!/usr/bin/env bash
# The main job: build, then run the benchmark and verification suite (dsv4_bench --check).
# With a GPU: every case is checked against the CPU reference, timed, and written to
# benchmarks/results/<device>.jsonl; a summary table is printed. Without a GPU: the CPU
# references run on small model-shaped cases with their checks.
set -eu
cd "$(dirname "$0")/.."
scripts/build.sh
bin=${DSV4_BUILD_DIR:-build}/bench/dsv4_bench
# A copy of the tree without .git (e.g. sent to a GPU machine) names its commit in DSV4_COMMIT.
commit=${DSV4_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
out=${DSV4_RESULTS:-}
if [ -z "$out" ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 | tr ' ' '-' || true)
  if [ -n "$gpu" ]; then out=benchmarks/results/${gpu}.jsonl; else out=benchmarks/results/cpu-reference.jsonl; fi
fi
mkdir -p "$(dirname "$out")"
"$bin" --check --commit "$commit" --json "$out" "$@"
echo "results: $out"
