"""Shared fixtures: the package path, a seeded RNG (printed on failure), array backends.

numpy uint16 arrays are bf16 bit patterns throughout the tests; a backend turns a numpy
input into what the binding is given (numpy array, torch CPU tensor, CUDA tensor) and back.
"""
import os
import zlib
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

try:
    import torch
except ImportError:  # the CPU tests need only numpy
    torch = None

SEED = int(os.environ.get("DSV4_PY_SEED", "20250607"))


class Backend:
    def __init__(self, name, device=None):
        self.name, self.device = name, device

    def put(self, a):
        a = np.ascontiguousarray(a)
        if self.name == "numpy":
            return a.copy()
        if a.dtype == np.uint16:  # bf16 bits
            t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(a.copy())
        return t.to(self.device) if self.device else t

    def get(self, t):
        if t is None or isinstance(t, np.ndarray):
            return t
        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()

    def __repr__(self):
        return self.name


def host_backends():
    out = [pytest.param(Backend("numpy"), id="numpy")]
    out.append(pytest.param(Backend("torch"), id="torch-cpu",
                            marks=pytest.mark.skipif(torch is None, reason="torch not installed")))
    return out


@pytest.fixture(params=host_backends())
def be(request):
    return request.param


@pytest.fixture
def rng(request):
    seed = SEED + (zlib.crc32(request.node.name.encode()) & 0xFFFF)
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed} (rerun with DSV4_PY_SEED={SEED})")
    return np.random.default_rng(seed)
