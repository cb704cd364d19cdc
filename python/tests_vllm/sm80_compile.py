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


def jit_kernels(module):
    """`module.qualname` of every `@triton.jit` function in `module`'s source that no other one in
    it calls (the helpers compile inside their callers), nested and class-level ones included."""
    import ast
    import importlib
    import inspect

    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    found = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                q = prefix + [child.name]
                if isinstance(child, ast.FunctionDef) and any(
                        "jit" in ast.unparse(d).split("(")[0] for d in child.decorator_list):
                    found[".".join(q)] = child
                walk(child, q + (["<locals>"] if isinstance(child, ast.FunctionDef) else []))
            else:
                walk(child, prefix)

    walk(tree, [])
    short = {q.split(".")[-1] for q in found}
    called = {n.id for node in found.values() for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in short}
    called -= {node.name for node in found.values() if node.name == "kernel"}  # class-level kernels share a name
    return {f"{module}.{q}" for q, node in found.items() if node.name not in called}
