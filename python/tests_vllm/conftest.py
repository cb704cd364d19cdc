"""The vLLM tier (run with the interpreter of scripts/vllm_venv.sh; python/tests_vllm/run.sh runs
the three modes): the plugin against the installed vLLM 0.33.0, on a machine without a GPU.

Modes, chosen by the environment before vLLM is imported:
  default                      vLLM as a GPU-less machine sees it (Triton replaced by a placeholder)
  DSV4_VLLM_TRITON=compile     real Triton JIT functions, for compiling kernels to sm_80 (no driver)
  DSV4_VLLM_TRITON=interpret   real Triton in the interpreter (TRITON_INTERPRET=1), to run vLLM's own
                               kernels on CPU tensors for the conformance tests
Without a GPU vLLM disables Triton (no active driver); the two Triton modes report the NVIDIA driver
active to vLLM's check only, so its kernels are real triton.jit objects. A test module states the
mode it needs with `pytestmark = mode("...")` and is skipped in the others.
"""
import os
import pathlib
import sys
import zlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
os.environ.setdefault("DSV4_LIBRARY", str(ROOT / "build" / "libdsv4.so"))
# vLLM's CPU platform: VllmConfig() and the forward context work without a GPU.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

MODE = os.environ.get("DSV4_VLLM_TRITON", "default")
if MODE not in ("default", "compile", "interpret"):
    raise RuntimeError(f"DSV4_VLLM_TRITON={MODE}: expected compile or interpret")
if MODE == "interpret":
    os.environ["TRITON_INTERPRET"] = "1"
if MODE != "default":
    from triton.backends import backends

    backends["nvidia"].driver.is_active = staticmethod(lambda: True)
    if MODE == "interpret":
        import gpu_semantics

        gpu_semantics.install()
    else:
        import sm80_compile

        sm80_compile.install()

SEED = int(os.environ.get("DSV4_PY_SEED", "20250607"))


def mode(name):
    return pytest.mark.skipif(MODE != name, reason=f"needs DSV4_VLLM_TRITON={name} (this run: {MODE})")


@pytest.fixture
def seed(request):
    s = SEED + (zlib.crc32(request.node.name.encode()) & 0xFFFF)
    print(f"seed {s} (rerun with DSV4_PY_SEED={SEED})")
    return s
