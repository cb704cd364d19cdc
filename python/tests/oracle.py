"""The library's own reference as the oracle of the binding tests.

`ref` calls dsv4_<op>_ref through ctypes with a descriptor written out by the test, on dense
numpy arrays whose strides it fills in from the arrays themselves (the library has no
default stride): what the binding derives from its tensors (sizes, strides, page geometry,
defaults) is then checked against a call on the dense layout. The references themselves
are checked by the C suites in tests/.
"""
import ctypes

import numpy as np

from deepinfer_sm80._lib import check
from deepinfer_sm80._ops import op, struct

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


_QO = [("q_stride_token", "q", 0), ("q_stride_head", "q", 1), ("out_stride_token", "out", 0),
       ("out_stride_head", "out", 1)]
# op -> (stride field, array, dimension; -2: rows of the last dimension) filled in from the dense arrays when the test leaves them out
_STRIDES = {
    "sparse_mla_decode": _QO,
    "sparse_mla_prefill": _QO + [("kv_stride", "kv", -2), ("ids_stride", "ids", 0)],
    "kv_insert": [("k_stride_row", "k", 0)],
    "kv_rope_insert": [("latent_stride_row", "latent", 0)],
    "kv_swa_write": [("q_stride_token", "q", 0), ("q_stride_head", "q", 1), ("kv_stride_row", "kv", 0)],
    "kv_gather": [("block_table_stride", "block_table", 0), ("out_stride_req", "out", 0), ("out_stride_row", "out", 1)],
    "mhc_gates": [("residual_stride", "residual", 0)],
    "mhc_pre": [("residual_stride", "residual", 0), ("residual_out_stride", "residual_out", 0),
                ("layer_input_stride", "layer_input", 0), ("aux_stride", "aux", 0)],
    "mhc_seam": [("x_stride", "x", 0), ("residual_stride", "residual", 0), ("residual_out_stride", "residual_out", 0),
                 ("layer_input_stride", "layer_input", 0), ("aux_stride", "aux", 0)],
}

# mhc token strides of optional tensors, in units of hidden
_ABSENT = {"x_stride": 1, "layer_input_stride": 1, "aux_stride": 1, "residual_out_stride": 4}


def ref(name, desc, desc_type=None, **arrays):
    """Run dsv4_<name>_ref. desc: the descriptor's fields (nested structs as struct objects);
    arrays: the args struct's fields, dense numpy arrays or None; outputs are written in place."""
    for k, a in arrays.items():
        assert a is None or (isinstance(a, np.ndarray) and a.flags.c_contiguous), f"{name}: {k} must be dense numpy"
    desc = dict(desc)
    for field, arr, dim in _STRIDES.get(name, []):
        a = arrays.get(arr)
        if field not in desc and a is not None and a.ndim >= (dim + 2 if dim >= 0 else -dim):
            desc[field] = a.strides[dim] // a.itemsize
    for field, rows in _ABSENT.items():  # the field of a tensor the call leaves out: a valid stride
        if field in (f for f, _, _ in _STRIDES.get(name, [])) and field not in desc and "hidden" in desc:
            desc[field] = rows * desc["hidden"]
    for lst, ids in (("main", "main_ids"), ("extra", "extra_ids")):  # the decode's id lists
        if lst in desc and arrays.get(ids) is not None and desc[lst].stride == 0:
            desc[lst].stride = arrays[ids].shape[1]
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
