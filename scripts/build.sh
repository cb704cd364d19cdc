#!/usr/bin/env bash
# Configure and build into ${DSV4_BUILD_DIR:-build}. Extra arguments go to cmake.
# DSV4_ARCHS overrides the CUDA architectures (default: sm_80, sm_86, sm_90 + compute_80 PTX).
set -eu
cd "$(dirname "$0")/.."
source scripts/deps.sh
dir=${DSV4_BUILD_DIR:-build}
args=()
[ -n "${DSV4_ARCHS:-}" ] && args+=("-DCMAKE_CUDA_ARCHITECTURES=$DSV4_ARCHS")
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${args[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
