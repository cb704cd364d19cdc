#!/usr/bin/env bash
# Makes sure the build tools exist: cmake (>= 3.24), a C compiler, make, and the CUDA
# toolkit (nvcc). Installs missing Debian packages when it can (root + apt); never
# touches a machine that already has everything (the GPU machine has no network).
set -eu
need=()
have_cmake_324() {
  command -v cmake >/dev/null 2>&1 || return 1
  v=$(cmake --version | awk 'NR==1{print $3}')
  [ "$(printf '%s\n3.24\n' "$v" | sort -V | head -n1)" = "3.24" ]
}
have_cmake_324 || need+=(cmake)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v git >/dev/null 2>&1 || need+=(git)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "deps: missing ${need[*]}; install them and rerun" >&2; exit 1
  fi
fi
if ! have_cmake_324; then
  # Debian's cmake may be too old on some releases: take a current one from PyPI.
  python3 -m pip install -q "cmake>=3.24"
fi
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
if ! command -v nvcc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # Debian ships the CUDA toolkit in non-free (CUDA 11.8+ covers sm_80/86/90).
    echo "deps: installing nvidia-cuda-toolkit"
    sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' \
      /etc/apt/sources.list.d/debian.sources 2>/dev/null || true
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nvidia-cuda-toolkit >/dev/null
  fi
fi
command -v nvcc >/dev/null 2>&1 || { echo "deps: the CUDA toolkit (nvcc) is required" >&2; exit 1; }
