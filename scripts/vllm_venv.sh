#!/usr/bin/env bash
# The virtual environment of the vLLM test tier, outside the checkout (made once, then reused):
# vllm==0.33.0 from PyPI (about 10 GB with its CUDA wheels; only its CPU side is used), pytest,
# numpy, and a development link to this checkout: a .pth file naming python/ and a dist-info
# carrying the package's entry points from pyproject.toml, so vLLM's plugin loader finds
# deepinfer_sm80 without a rebuild (the tier loads build/libdsv4.so through DSV4_LIBRARY).
# Prints the environment's python on its last line.
#
#   scripts/vllm_venv.sh      DSV4_VLLM_VENV names the environment (default ~/.cache/dsv4/vllm-venv)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
VLLM_VERSION=0.33.0
venv=${DSV4_VLLM_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/dsv4/vllm-venv}
have() {
  "$venv/bin/python" - "$VLLM_VERSION" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("vllm") == sys.argv[1] and m.version("pytest") and m.version("numpy") else 1)
PY
}
if ! have; then
  echo "vllm tier: creating $venv with vllm==$VLLM_VERSION (a few minutes)" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  # vLLM 0.33 needs Python >= 3.10.
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -m pip install -q "vllm==$VLLM_VERSION" pytest numpy >&2
fi
"$venv/bin/python" - "$root" >&2 <<'PY'
import pathlib, re, site, sys

root = pathlib.Path(sys.argv[1])
text = (root / "pyproject.toml").read_text()
try:
    import tomllib
    project = tomllib.loads(text)["project"]
except ImportError:  # Python 3.10: the two tables this needs, read by hand
    project = {"version": re.search(r'^version = "([^"]+)"', text, re.M).group(1), "entry-points": {}}
    for group, body in re.findall(r'^\[project\.entry-points\."([^"]+)"\]\n((?:[^\[\n].*\n?)*)', text, re.M):
        project["entry-points"][group] = dict(re.findall(r'^(\S+) = "([^"]+)"', body, re.M))
sp = pathlib.Path(site.getsitepackages()[0])
(sp / "deepinfer_sm80_checkout.pth").write_text(str(root / "python") + "\n")
info = sp / f"deepinfer_sm80-{project['version']}.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: deepinfer-sm80\nVersion: {project['version']}\n")
lines = []
for group, eps in project.get("entry-points", {}).items():
    lines.append(f"[{group}]")
    lines += [f"{name} = {value}" for name, value in eps.items()]
(info / "entry_points.txt").write_text("\n".join(lines) + "\n")
print(f"vllm tier: {sp} links {root / 'python'}")
PY
echo "$venv/bin/python"
