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
            RESULTS.setdefault(name, None)
        except Exception as e:  # the compiler's message: the gate reports it (the first, of many launches)
            RESULTS[name] = RESULTS.get(name) or f"{type(e).__name__}: {e}"

    jit.JITFunction.run = compile_only


def load_as_cuda(module):
    """A fresh copy of `module` executed as the CUDA platform sees it: vLLM defines some kernels only
    under `current_platform.is_cuda()`, which is False on this CPU machine. The copy keeps the
    module's name (so its kernels report under it) and stays out of sys.modules."""
    import importlib.util
    from unittest import mock

    from vllm.platforms import current_platform

    spec = importlib.util.find_spec(module)
    copy = importlib.util.module_from_spec(spec)
    with mock.patch.object(current_platform, "is_cuda", return_value=True):
        spec.loader.exec_module(copy)
    return copy


def module_files(name):
    """{module: source file} of `name`, or of every module under it when it is a package; the files
    are read, not imported (some import CUDA-only libraries)."""
    import importlib.util
    import pathlib

    spec = importlib.util.find_spec(name)
    if not spec.submodule_search_locations:
        return {name: spec.origin}
    root = pathlib.Path(spec.submodule_search_locations[0])
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        files[".".join((name, *(parts[:-1] if parts[-1] == "__init__" else parts)))] = str(path)
    return files


def jit_kernels(module, path):
    """`module.qualname` of every `@triton.jit` function in `module`'s source file `path` that no
    other one in it calls (the helpers compile inside their callers), nested, class-level and
    conditionally defined ones included (CuTe DSL's `cute.jit` is not Triton)."""
    import ast
    import pathlib

    tree = ast.parse(pathlib.Path(path).read_text())
    found = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                q = prefix + [child.name]
                if isinstance(child, ast.FunctionDef) and any(
                        ast.unparse(d).split("(")[0] in ("triton.jit", "jit") for d in child.decorator_list):
                    found[".".join(q)] = child
                walk(child, q + (["<locals>"] if isinstance(child, ast.FunctionDef) else []))
            else:
                walk(child, prefix)

    walk(tree, [])
    short = {q.split(".")[-1] for q in found}
    called = {n.id for node in found.values() for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in short}
    called -= {node.name for node in found.values() if node.name == "kernel"}  # class-level kernels share a name
    return {f"{module}.{q}" for q, node in found.items() if node.name not in called}
