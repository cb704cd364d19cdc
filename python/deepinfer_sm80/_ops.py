"""What every operator wrapper shares: dtype/rank/device checks, output allocation, the call.

A wrapper builds the generated descriptor and args structs from tensor shapes and strides
(in elements), then `Op.__call__` runs the kernel (CUDA tensors: workspace from
dsv4_<op>_workspace_size allocated with torch.empty on the tensor's device, torch's current
stream on that device, never NULL) or the C reference (CPU tensors, numpy arrays). A non-zero
status raises Dsv4Error with the library's message. No arithmetic on tensor data happens here.
"""
import ctypes

from . import _structs as S
from ._lib import check, proto
from .tensors import current_stream, is_cuda, np, ptr, strides, torch

# dtype kinds: accepted torch dtypes / numpy dtypes. bf16 is torch.bfloat16, or uint16 bit
# patterns in numpy (include/dsv4/numerics.h); a byte mask is bool or uint8.
_TORCH = {}
if torch is not None:
    _TORCH = {
        "bf16": (torch.bfloat16,),
        "f32": (torch.float32,),
        "f64": (torch.float64,),
        "i32": (torch.int32,),
        "i64": (torch.int64,),
        "u8": (torch.uint8,),
        "mask": (torch.bool, torch.uint8),
    }
_NUMPY = {}
if np is not None:
    _NUMPY = {
        "bf16": (np.dtype(np.uint16),),
        "f32": (np.dtype(np.float32),),
        "f64": (np.dtype(np.float64),),
        "i32": (np.dtype(np.int32),),
        "i64": (np.dtype(np.int64),),
        "u8": (np.dtype(np.uint8),),
        "mask": (np.dtype(np.bool_), np.dtype(np.uint8)),
    }
_ALLOC_TORCH = {"bf16": "bfloat16", "f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u8": "uint8"}
_ALLOC_NUMPY = {"bf16": "uint16", "f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u8": "uint8"}
_KIND_TEXT = {
    "bf16": "bf16 (torch.bfloat16, or numpy uint16 bit patterns)",
    "f32": "float32",
    "f64": "float64",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "mask": "bool or uint8",
}


def is_torch(x):
    return torch is not None and isinstance(x, torch.Tensor)


def shape(x):
    return tuple(x.shape)  # torch.Size and numpy shapes hold Python ints already


def arg(op, name, x, kind, ndim=None, dims=None, inner_contiguous=True, optional=False):
    """Check one tensor: type, dtype kind, rank, known sizes (None = any), last dim contiguous."""
    if x is None:
        if optional:
            return None
        raise ValueError(f"{op}: {name} is required")
    if is_torch(x):
        ok = x.dtype in _TORCH[kind]
    elif np is not None and isinstance(x, np.ndarray):
        ok = x.dtype in _NUMPY[kind]
    else:
        raise TypeError(f"{op}: {name} must be a torch tensor or numpy array, got {type(x).__name__}")
    if not ok:
        raise TypeError(f"{op}: {name} has dtype {x.dtype}, expected {_KIND_TEXT[kind]}")
    have = shape(x)
    if ndim is not None:
        nd = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if len(have) not in nd:
            raise ValueError(f"{op}: {name} has shape {have}, expected {' or '.join(map(str, nd))} dimensions")
    if dims is not None:
        for i, want in enumerate(dims):
            if want is not None and have[i] != want:
                raise ValueError(f"{op}: {name} has shape {have}; dimension {i} must be {want}")
    if 0 in have:  # empty: nothing is addressed, strides do not matter
        return x
    st = strides(x)
    if inner_contiguous and have and have[-1] > 1 and st[-1] != 1:
        raise ValueError(f"{op}: {name} must have a contiguous last dimension (strides {st})")
    if any(s < 0 for s in st):
        raise ValueError(f"{op}: {name} has a negative stride {st}")
    if any(n > 1 and s == 0 for n, s in zip(have, st)):
        # A broadcast view (expand, broadcast_to): rows that alias, which the library refuses.
        raise ValueError(f"{op}: {name} has a zero stride on a dimension of size > 1 (shape {have}, strides {st})")
    return x


def contiguous(op, name, x):
    """Require a dense row-major tensor (the library reads it without strides)."""
    have = shape(x) if x is not None else ()
    if x is None or 0 in have:
        return x
    expect, acc = [], 1
    for n in reversed(have):
        expect.append(acc)
        acc *= n
    expect = tuple(reversed(expect))
    real = strides(x)
    if any(n > 1 and s != e for n, s, e in zip(have, real, expect)):
        raise ValueError(f"{op}: {name} must be contiguous (shape {have}, strides {real})")
    return x


def writable(op, name, x):
    if x is not None and np is not None and isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{op}: output {name} is a read-only numpy array")
    return x


def side(op, **tensors):
    """The tensor that decides where the call runs; all given tensors must be on one side
    (all host, or all CUDA on one device)."""
    anchor, where = None, None
    for name, t in tensors.items():
        if t is None:
            continue
        if is_torch(t) and t.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{op}: {name} is on {t.device}; only CPU and CUDA tensors are supported")
        w = ("cuda", t.device.index) if is_cuda(t) else ("host", None)
        if where is None:
            anchor, where, first = t, w, name
        elif w != where:
            a = f"cuda:{where[1]}" if where[0] == "cuda" else "host"
            b = f"cuda:{w[1]}" if w[0] == "cuda" else "host"
            raise ValueError(f"{op}: {name} is on {b} but {first} is on {a}: pass all tensors on one device")
    return anchor


def empty(anchor, dims, kind):
    """An uninitialised output on the anchor's side (torch tensor on its device, or numpy)."""
    if is_torch(anchor):
        return torch.empty(tuple(dims), dtype=getattr(torch, _ALLOC_TORCH[kind]), device=anchor.device)
    return np.empty(tuple(dims), dtype=_ALLOC_NUMPY[kind])


_EMPTY = {}


def addr(x):
    """Integer address for a struct field (None -> NULL). torch gives an empty tensor the
    address 0, which the library would reject as a NULL pointer even where the count is 0
    (T = 0 is a valid no-op): such a tensor gets a small dummy buffer on its device instead,
    which the library never dereferences because nothing is addressed through it."""
    if x is None:
        return None
    if is_torch(x) and x.numel() == 0:
        if x.device not in _EMPTY:
            _EMPTY[x.device] = torch.empty(64, dtype=torch.uint8, device=x.device)
        return _EMPTY[x.device].data_ptr()
    return ptr(x).value


def nbytes(x):
    return int(x.numel() * x.element_size()) if is_torch(x) else int(x.nbytes)


class Op:
    """The four entry points of one operator: _check, _workspace_size, run, _ref."""

    def __init__(self, name):
        self.name = name
        self.run = proto(f"dsv4_{name}")
        self.ref = proto(f"dsv4_{name}_ref")
        self.check = proto(f"dsv4_{name}_check")
        self.ws = proto(f"dsv4_{name}_workspace_size")

    def workspace_size(self, desc):
        n = ctypes.c_size_t(0)
        check(self.ws(ctypes.byref(desc), ctypes.byref(n)))
        return n.value

    def __call__(self, desc, args, anchor, workspace=None):
        if not is_cuda(anchor):
            if workspace is not None and is_cuda(workspace):
                raise ValueError(f"{self.name}: a CUDA workspace was passed for host tensors")
            check(self.ref(ctypes.byref(desc), ctypes.byref(args)))
            return
        index = anchor.device.index
        if torch.cuda.current_device() != index:  # the context switch costs microseconds: only when needed
            with torch.cuda.device(index):
                return self._run_cuda(desc, args, anchor, workspace)
        self._run_cuda(desc, args, anchor, workspace)

    def _run_cuda(self, desc, args, anchor, workspace):
        need = self.workspace_size(desc)
        if workspace is None:
            # Allocated on the current stream, outside the C call; inside a CUDA-graph
            # capture it comes from the graph's private pool.
            workspace = torch.empty(need, dtype=torch.uint8, device=anchor.device) if need else None
        elif not is_cuda(workspace) or workspace.device != anchor.device:
            raise ValueError(f"{self.name}: workspace must be a CUDA tensor on {anchor.device}")
        ws_ptr = addr(workspace) if workspace is not None else None
        ws_bytes = nbytes(workspace) if workspace is not None else 0
        stream = current_stream(anchor)
        if not stream.value:  # pragma: no cover - current_stream never returns NULL
            raise RuntimeError(f"{self.name}: refusing to pass a NULL stream")
        check(self.run(ctypes.byref(desc), ctypes.byref(args), ws_ptr, ws_bytes, stream))


_OPS = {}


def op(name):
    if name not in _OPS:
        _OPS[name] = Op(name)
    return _OPS[name]


def struct(name, **fields):
    """A generated struct by its C name, fields set by keyword."""
    cls = getattr(S, name)
    known = {f for f, _ in cls._fields_}
    obj = cls()
    for k, v in fields.items():
        if k not in known:  # ctypes would silently add a Python attribute
            raise AttributeError(f"{name} has no field {k!r} (regenerate _structs.py?)")
        setattr(obj, k, v)
    return obj


def as_dict(obj):
    out = {}
    for name, _ in obj._fields_:
        v = getattr(obj, name)
        out[name] = as_dict(v) if isinstance(v, ctypes.Structure) else v
    return out


def lib_int64(name, *values):
    """A library function that returns a plain value (no status)."""
    return proto(name)(*values)
