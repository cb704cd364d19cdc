#!/usr/bin/env bash
# Build and run the whole test suite. GPU tests run where a CUDA device exists and are
# reported as skipped (not passed) where none does.
set -eu
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir "${DSV4_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"

# Python binding (python/tests): the CPU path runs the C references; its CUDA tests skip
# without torch and a GPU. Needs python3 with numpy and pytest (.ci/run installs them).
dir=${DSV4_BUILD_DIR:-build}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
if command -v python3 >/dev/null 2>&1 && python3 -c 'import numpy, pytest' 2>/dev/null; then
  DSV4_LIBRARY="$dir/libdsv4.so" python3 -m pytest python/tests -q
else
  echo "python tests: SKIPPED (python3 with numpy and pytest not found; .ci/run installs them)"
fi
