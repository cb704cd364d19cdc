#!/usr/bin/env bash
# Build and run the whole test suite, then the Python binding's tests.
#
#   scripts/test.sh [ctest args...]
#
# CTest: GPU tests run where a CUDA device exists and are reported as skipped where none
# does; the long tier (label `long`: the 2^32 encoder sweep) runs only with
# DSV4_LONG_TESTS=1 (scripts/gpu_check.sh sets it) and is reported as skipped otherwise.
#
# Python (python/tests): numpy, pytest and torch go into a virtual environment outside the
# checkout, made here on first use; the CPU path runs the C references through the binding
# with numpy arrays and torch CPU tensors; its CUDA tests skip without a GPU.
# Environment: DSV4_PYTHON=0 skips the Python tests; DSV4_PY_VENV names the environment
# (default ~/.cache/dsv4/py-venv); DSV4_PY_TORCH=0 leaves torch out (the torch-cpu cases
# then skip); DSV4_PY_TORCH_INDEX is a pip index URL to take torch from (a CPU-only wheel
# index is far smaller than the default Linux wheel, which brings CUDA libraries: ~5 GB).
set -eu
cd "$(dirname "$0")/.."
scripts/build.sh
dir=${DSV4_BUILD_DIR:-build}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@"

[ "${DSV4_PYTHON:-1}" = 0 ] && { echo "python tests: skipped (DSV4_PYTHON=0)"; exit 0; }

apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  echo "python: installing $*"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Sets py to a python3 with numpy and pytest (and torch where it installs).
py_setup() {
  local venv=${DSV4_PY_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/dsv4/py-venv}
  command -v python3 >/dev/null 2>&1 || apt_install python3 || return 1
  if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -m pip --version >/dev/null 2>&1; then
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    # Debian's python3 needs python3-venv for this (and marks its own site-packages as
    # externally managed, PEP 668, hence the environment).
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
      rm -rf "$venv"
      apt_install python3-venv && python3 -m venv "$venv" || return 1
    fi
  fi
  py=$venv/bin/python3
  if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
    echo "python: installing numpy and pytest into $venv"
    "$py" -m pip install -q numpy pytest || return 1
  fi
  if [ "${DSV4_PY_TORCH:-1}" != 0 ] && ! "$py" -c 'import torch' 2>/dev/null; then
    echo "python: installing torch into $venv (for the torch-cpu tests)"
    local t0=$SECONDS
    if "$py" -m pip install -q --no-cache-dir ${DSV4_PY_TORCH_INDEX:+--index-url "$DSV4_PY_TORCH_INDEX"} torch; then
      echo "python: torch installed in $((SECONDS - t0)) s"
    else
      echo "python: torch did not install; the torch-cpu tests will be reported as skipped"
    fi
  fi
}

py=
if ! py_setup; then
  # No environment could be made (no network, no python3-venv): a python3 that already has
  # numpy and pytest will do.
  if command -v python3 >/dev/null 2>&1 && python3 -c 'import numpy, pytest' 2>/dev/null; then
    py=python3
  elif [ "${CI:-}" = true ]; then
    echo "python tests: FAILED to set up python3 with numpy and pytest" >&2
    exit 1
  else
    echo "python tests: SKIPPED (could not set up python3 with numpy and pytest)"
    exit 0
  fi
fi
torch=$("$py" -c 'import torch; print("torch " + torch.__version__)' 2>/dev/null || echo "no torch: torch-cpu cases skip")
echo "python tests: $("$py" --version), $torch"
DSV4_LIBRARY="$dir/libdsv4.so" "$py" -m pytest python/tests -q -p no:cacheprovider
