"""Version and device query."""
import ctypes

from ._lib import bind, lib
from ._structs import dsv4_device_info_t

DeviceInfo = dsv4_device_info_t  # generated from include/dsv4/dsv4.h

_count = bind("dsv4_device_count", ctypes.POINTER(ctypes.c_int))
_query = bind("dsv4_device_query", ctypes.c_int, ctypes.POINTER(DeviceInfo))


def version():
    return lib.dsv4_version_string().decode()


def device_count():
    n = ctypes.c_int(0)
    _count(ctypes.byref(n))
    return n.value


def device_query(device=0):
    info = DeviceInfo()
    _query(device, ctypes.byref(info))
    return {
        "device": info.device,
        "arch": info.arch,
        "sm_count": info.sm_count,
        "smem_per_block": info.smem_per_block,
        "l2_bytes": info.l2_bytes,
        "supported": bool(info.supported),
        "name": info.name.decode(),
    }
