"""deepinfer_sm80: Python binding of libdsv4 (DeepSeek-V4.1 operators for Ampere GPUs).

A thin layer: it loads the C library with ctypes, turns tensors into descriptors, passes
torch's current CUDA stream, and maps status codes to exceptions carrying the library's
message. CUDA tensors run the kernels; CPU tensors and numpy arrays run the C references.
"""
from ._lib import Dsv4Error, NoDeviceError
from .device import device_count, device_query, version

__all__ = ["Dsv4Error", "NoDeviceError", "device_count", "device_query", "version"]
