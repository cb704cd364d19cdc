"""Version and device query."""
import ctypes

from ._lib import bind, lib


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_int),
        ("arch", ctypes.c_int),
        ("sm_count", ctypes.c_int),
        ("smem_per_block", ctypes.c_int64),
        ("smem_per_block_optin", ctypes.c_int64),
        ("l2_bytes", ctypes.c_int64),
        ("global_mem_bytes", ctypes.c_int64),
        ("supported", ctypes.c_int),
        ("name", ctypes.c_char * 256),
    ]


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
