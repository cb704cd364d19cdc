"""Turning torch tensors and numpy arrays into raw pointers, strides and streams.

A tensor on a CUDA device selects the GPU kernel; a CPU tensor or numpy array selects
the C reference. Nothing here copies: callers pass tensors of the dtype and layout the
operator's header documents, and the library validates the rest.
"""
import ctypes

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is optional when torch is used
    np = None

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional on the CPU path
    torch = None

CUDA_STREAM_LEGACY = 0x1  # cudaStreamLegacy: torch's default stream, passed explicitly


def is_cuda(x):
    return torch is not None and isinstance(x, torch.Tensor) and x.is_cuda


def ptr(x):
    """Address of the first element (None -> NULL)."""
    if x is None:
        return None
    if torch is not None and isinstance(x, torch.Tensor):
        return ctypes.c_void_p(x.data_ptr())
    if np is not None and isinstance(x, np.ndarray):
        return ctypes.c_void_p(x.ctypes.data)
    raise TypeError(f"expected a torch tensor or numpy array, got {type(x).__name__}")


def strides(x):
    """Strides in elements."""
    if torch is not None and isinstance(x, torch.Tensor):
        return tuple(x.stride())
    return tuple(s // x.itemsize for s in x.strides)


def dtype_name(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return str(x.dtype).replace("torch.", "")
    if np is not None and isinstance(x, np.ndarray):
        return x.dtype.name
    return type(x).__name__


def require(x, name, dtypes, ndim=None):
    """Check dtype (by name: 'bfloat16' is passed to numpy as uint16 bit patterns) and rank."""
    if dtype_name(x) not in dtypes:
        raise TypeError(f"{name}: dtype {dtype_name(x)} is not one of {dtypes}")
    if ndim is not None and len(x.shape) != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(x.shape)}")


def same_side(*tensors):
    """True if every given tensor is on a CUDA device, False if all are on the host."""
    flags = {is_cuda(t) for t in tensors if t is not None}
    if len(flags) != 1:
        raise ValueError("mix of CUDA and host tensors")
    return flags.pop()


def current_stream(device_tensor):
    """torch's current stream for the tensor's device, as a non-NULL handle. Uses torch's raw
    query where it exists (torch.cuda.current_stream wraps the same handle in a Stream object,
    several microseconds a call), else the public path."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is not None:
        handle = raw(device_tensor.device.index)
    else:
        handle = torch.cuda.current_stream(device_tensor.device).cuda_stream
    return ctypes.c_void_p(handle or CUDA_STREAM_LEGACY)
