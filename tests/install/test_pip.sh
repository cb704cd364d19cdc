#!/usr/bin/env bash
# The Python package as users get it: `pip wheel .` of the checkout, that wheel installed
# into a fresh virtual environment, and deepinfer_sm80 imported from outside the checkout.
# The package must load the libdsv4 it carries (not a build folder's) and call into it.
#
#   tests/install/test_pip.sh [WORKDIR]      (needs python3 with venv, and PyPI for the build backend)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
rm -rf "$work"
mkdir -p "$work"
python3 -m venv "$work/venv"
echo "-- pip wheel $src"
"$work/venv/bin/pip" wheel "$src" -w "$work/wheel" -q
ls "$work"/wheel/deepinfer_sm80-*.whl
echo "-- pip install the wheel into a fresh environment"
"$work/venv/bin/pip" install -q "$work"/wheel/deepinfer_sm80-*.whl
cd "$work"
env -u DSV4_LIBRARY "$work/venv/bin/python" - <<'PY'
import pathlib

import deepinfer_sm80 as d
from deepinfer_sm80 import _lib

pkg = pathlib.Path(d.__file__).resolve().parent
loaded = pathlib.Path(_lib.lib._name).resolve()
assert loaded.parent == pkg, f"loaded {loaded}, not the package's own libdsv4.so"
assert d.combine_cols(512, 128) == 640, d.combine_cols(512, 128)
print(f"PASS: deepinfer_sm80 {d.version()} imported from the wheel, library {loaded}")
PY
