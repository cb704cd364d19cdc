"""Compile-only launches for the sm_80 gate: with DSV4_VLLM_TRITON=compile, every Triton launch
compiles the kernel for `TARGET` (no GPU, no driver: a stand-in driver names the target) and
records the outcome per kernel instead of running it."""
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import jit

RESULTS = {}


class _Driver:
    target = GPUTarget("cuda", 80, 32)

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")

    def get_device_interface(self):
        return torch.cuda

    def get_benchmarker(self):
        return None

    def map_python_to_cpp_type(self, t):
        return t


DRIVER = _Driver()


def set_target(capability):
    DRIVER.target = GPUTarget("cuda", capability, 32)


def install():
    triton.runtime.driver.set_active(DRIVER)
    run = jit.JITFunction.run

    def compile_only(self, *args, grid, warmup, **kw):
        name = f"{self.fn.__module__}.{self.fn.__qualname__}"
        try:
            run(self, *args, grid=grid, warmup=True, **kw)
            RESULTS[name] = None
        except Exception as e:  # the compiler's message: the gate reports it
            RESULTS[name] = f"{type(e).__name__}: {e}"

    jit.JITFunction.run = compile_only
