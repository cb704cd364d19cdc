#!/usr/bin/env bash
# The CPU tests (references, host checks, planners) under AddressSanitizer and
# UndefinedBehaviorSanitizer: a separate debug build with the host code instrumented
# (C sources and the host side of the .cu files), one GPU architecture to keep it short.
#
#   scripts/sanitize.sh [ctest args...]      DSV4_SANITIZE_BUILD_DIR: the build folder
set -eu
cd "$(dirname "$0")/.."
source scripts/deps.sh
dir=${DSV4_SANITIZE_BUILD_DIR:-build-sanitize}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CUDA_ARCHITECTURES=80-real -DDSV4_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CUDA_FLAGS="-Xcompiler=-fsanitize=address,-fsanitize=undefined,-fno-sanitize-recover=undefined,-fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$dir" -j "$(nproc)"
# protect_shadow_gap=0: the CUDA runtime maps memory where ASan's shadow gap would be.
ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=0} \
  ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" -L cpu -E '^build_' "$@"
