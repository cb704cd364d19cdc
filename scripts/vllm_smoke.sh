#!/usr/bin/env bash
# GPU smoke test of the vLLM plugin: a DeepSeek-V4.1 configuration shrunk to 7 layers (every layer
# role), dummy weights, greedy generation through vllm.LLM, logprobs compared with a reference run
# (python/tests_vllm/smoke.py says what is shrunk and why).
#
#   scripts/vllm_smoke.sh CONFIG.json [OUT]
#
# CONFIG.json is the config.json of a DeepSeek-V4.1 checkpoint (only its fields are used). Needs a
# machine where vllm==0.33.0 runs on the GPU (it pins its own torch), this package installed with a
# libdsv4 built for that GPU, and PY naming that environment's python (default python3).
#   SM80/SM86: the plugin's path twice; greedy tokens and logprobs must be identical (determinism),
#              stock vLLM has no SM8x path to compare with.
#   SM90/SM100: the plugin's path forced (DEEPINFER_FORCE_SM8X=1) against stock vLLM's FlashMLA path
#              (DEEPINFER_DISABLE=1) on the same dummy weights.
# DSV4_SMOKE_DRY=1 runs only what needs no GPU: the shrunken config and its layer roles, and the
# plugin's entry point as vLLM's loader sees it.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PY:-python3}
[ $# -ge 1 ] || { sed -n '2,18p' "$0"; exit 2; }
cfg=$1
out=${2:-$(mktemp -d)}
smoke() { "$py" "$root/python/tests_vllm/smoke.py" "$@"; }
smoke shrink --config "$cfg" --out "$out"
"$py" - <<'PY'
from importlib.metadata import entry_points
eps = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
assert eps.get("deepinfer_sm80") == "deepinfer_sm80.vllm:register", eps
import vllm.plugins
vllm.plugins.load_general_plugins()
import vllm.models.deepseek_v41.nvidia.model as m
assert m._select_dsv4_attn_cls.__wrapped__ is not None, "the plugin did not rebind the attention selector"
print(f"plugin: registered with vLLM {__import__('vllm').__version__}")
PY
[ "${DSV4_SMOKE_DRY:-0}" = 1 ] && { echo "dry run: stopped before the GPU steps ($out)"; exit 0; }
major=$("$py" -c "import torch; print(torch.cuda.get_device_capability()[0])")
if [ "$major" = 8 ]; then
  smoke run --out "$out" --tag plugin
  smoke run --out "$out" --tag plugin-again
  smoke compare --out "$out" plugin plugin-again --tol 0
else
  DEEPINFER_FORCE_SM8X=1 smoke run --out "$out" --tag plugin
  DEEPINFER_DISABLE=1 smoke run --out "$out" --tag reference
  smoke compare --out "$out" reference plugin
fi
