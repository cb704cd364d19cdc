#!/usr/bin/env bash
# The vLLM tier: plugin + drift guards, the sm_80 compile gate, and the conformance tests, each
# in its own process (conftest.py explains the Triton modes). Extra arguments go to pytest.
#
#   python/tests_vllm/run.sh [pytest args]     PY = the tier's python (default: scripts/vllm_venv.sh)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PY:-$("$root/scripts/vllm_venv.sh" | tail -n 1)}
export DSV4_LIBRARY=${DSV4_LIBRARY:-$root/build/libdsv4.so}
run() {
  local mode=$1; shift
  echo "-- vllm tier ($mode): $*"
  (cd "$root" && DSV4_VLLM_TRITON=$mode "$py" -m pytest -q -p no:cacheprovider "$@")
}
run default python/tests_vllm/test_plugin.py python/tests_vllm/test_drift.py python/tests_vllm/test_hooks_cpu.py "$@"
for mode in compile interpret; do
  files=$(cd "$root" && ls python/tests_vllm/test_${mode}_*.py 2>/dev/null || true)
  [ -n "$files" ] && run "$mode" $files "$@"
done
