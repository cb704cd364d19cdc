"""The library's own reference as the oracle of the binding tests.

`ref` calls dsv4_<op>_ref through ctypes with a descriptor written out by the test, on dense
numpy arrays, every stride left at 0 (the headers' dense default): what the binding derives
from its tensors (sizes, strides, page geometry, defaults) is then checked against a call
that derives nothing. The references themselves are checked by the C suites in tests/.
"""
import ctypes

import numpy as np

from deepinfer_sm80._lib import check
from deepinfer_sm80._ops import op, struct

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def ref(name, desc, desc_type=None, **arrays):
    """Run dsv4_<name>_ref. desc: the descriptor's fields (nested structs as struct objects);
    arrays: the args struct's fields, dense numpy arrays or None; outputs are written in place."""
    for k, a in arrays.items():
        assert a is None or (isinstance(a, np.ndarray) and a.flags.c_contiguous), f"{name}: {k} must be dense numpy"
    d = struct(desc_type or f"dsv4_{name}_desc_t", **desc)
    a = struct(f"dsv4_{name}_args_t", **{k: None if v is None else v.ctypes.data for k, v in arrays.items()})
    check(op(name).ref(ctypes.byref(d), ctypes.byref(a)))


def poison(rng, shape, dtype):
    """Random bit patterns (NaNs included for floats): an output the call must overwrite."""
    u = _UINT[np.dtype(dtype).itemsize]
    return rng.integers(0, np.iinfo(u).max, size=shape, dtype=u, endpoint=True).view(dtype)


def embed(be, a, pad, fill):
    """`a` (numpy) on backend `be` as a view into a buffer whose last dimension is `pad`
    elements wider, filled with `fill`: returns (view, whole buffer)."""
    n = a.shape[-1]
    buf = np.full(a.shape[:-1] + (n + pad,), fill, a.dtype)
    buf[..., :n] = a
    whole = be.put(buf)
    return whole[..., :n], whole


def assert_bits(got, want, what):
    """Equal bit patterns (NaN payloads and signed zeros included), same shape."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    u = _UINT[want.dtype.itemsize]
    bad = np.argwhere(got.view(u) != want.view(u))
    assert bad.size == 0, f"{what}: {len(bad)} elements differ from the reference, first at {bad[:3].tolist()}"
