#!/usr/bin/env bash
# Configure and build into ${DSV4_BUILD_DIR:-build}. Extra arguments go to cmake.
# DSV4_ARCHS overrides the CUDA architectures (default: sm_80, sm_86, sm_90 + compute_80 PTX);
# DSV4_BUILD_TOOLS=ON also builds the probes in tools/ (CI does).
set -eu
cd "$(dirname "$0")/.."
source scripts/deps.sh
dir=${DSV4_BUILD_DIR:-build}
args=()
[ -n "${DSV4_ARCHS:-}" ] && args+=("-DCMAKE_CUDA_ARCHITECTURES=$DSV4_ARCHS")
[ -n "${DSV4_BUILD_TOOLS:-}" ] && args+=("-DDSV4_BUILD_TOOLS=$DSV4_BUILD_TOOLS")
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${args[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
