"""Loading libdsv4 with ctypes, and turning its status codes into exceptions.

The library is found, in order, at $DSV4_LIBRARY, next to this package, in the
repository's build folders (build/, build-gpu/), or where the dynamic linker finds an
installed libdsv4 (`cmake --install`, then ldconfig or LD_LIBRARY_PATH).
"""
import ctypes
import ctypes.util
import os
import pathlib

STATUS_NAMES = {
    0: "SUCCESS",
    1: "NULL_POINTER",
    2: "INVALID_VALUE",
    3: "MISALIGNED",
    4: "UNSUPPORTED",
    5: "WORKSPACE_TOO_SMALL",
    6: "NO_DEVICE",
    7: "CUDA_ERROR",
    8: "INTERNAL",
}


class Dsv4Error(RuntimeError):
    """A libdsv4 call failed; `status` is the pinned code, the message the library's."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = STATUS_NAMES.get(status, "UNKNOWN")
        super().__init__(f"{self.status_name}: {message}")


class NoDeviceError(Dsv4Error):
    pass


def _candidates():
    env = os.environ.get("DSV4_LIBRARY")
    if env:
        yield pathlib.Path(env)
    here = pathlib.Path(__file__).resolve().parent
    yield here / "libdsv4.so"
    root = here.parent.parent
    for build in ("build", "build-gpu", "build-all"):
        yield root / build / "libdsv4.so"


def _load():
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.exists():
            return ctypes.CDLL(str(path))
    installed = ctypes.util.find_library("dsv4")
    if installed:
        return ctypes.CDLL(installed)
    tried.append("the dynamic linker's path")
    raise OSError("libdsv4.so not found (set DSV4_LIBRARY or build the project); tried: " + ", ".join(tried))


lib = _load()
lib.dsv4_last_error.restype = ctypes.c_char_p
lib.dsv4_status_string.restype = ctypes.c_char_p
lib.dsv4_version_string.restype = ctypes.c_char_p
lib.dsv4_version_number.restype = ctypes.c_uint


def check(status):
    """Raise the library's error for a non-zero status."""
    if status != 0:
        msg = lib.dsv4_last_error().decode(errors="replace")
        cls = NoDeviceError if status == 6 else Dsv4Error
        raise cls(status, msg)


def proto(name):
    """The library function `name`, typed from the generated PROTOTYPES (the headers)."""
    from ._structs import PROTOTYPES

    fn = getattr(lib, name)
    fn.restype, fn.argtypes = PROTOTYPES[name]
    return fn


def bind(name, *argtypes):
    """Declare a function returning dsv4_status_t and return a caller that raises on failure."""
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int
    fn.argtypes = list(argtypes)

    def call(*args):
        check(fn(*args))

    call.__name__ = name
    return call
