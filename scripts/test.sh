#!/usr/bin/env bash
# Build and run the whole test suite. GPU tests run where a CUDA device exists and are
# reported as skipped (not passed) where none does.
set -eu
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir "${DSV4_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
