"""The C ABI of dist.h, declared for ctypes, and the loading of libdist.so.

Only this module knows the C layouts; every struct here mirrors one of
sdk/include/dist/*.h field for field (fields are only ever appended there,
so a newer libdist.so reads these structs as far as their struct_size).
"""

import ctypes
import ctypes.util
import os
import threading

from dist.errors import Error, ErrorCode


class DistError(ctypes.Structure):
    """dist_error_t: owned by the caller of the function that returned it."""


DistError._fields_ = [
    ("struct_size", ctypes.c_size_t),
    ("code", ctypes.c_int),
    ("message", ctypes.c_char_p),
    ("destroy", ctypes.CFUNCTYPE(None, ctypes.POINTER(DistError))),
]


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int32)]


class Buffer(ctypes.Structure):
    """dist_buffer_t: borrows the memory of a Python buffer."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("count", ctypes.c_uint64),
        ("dtype", ctypes.c_int),
        ("device", Device),
        ("stream", ctypes.c_void_p),
    ]


class KeyValue(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class InitOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", ctypes.c_char_p),
        ("init_method", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32),
        ("timeout_ms", ctypes.c_int64),
        ("config_file", ctypes.c_char_p),
        ("options", ctypes.POINTER(KeyValue)),
        ("num_options", ctypes.c_size_t),
        ("group_name", ctypes.c_char_p),
        ("store", ctypes.c_void_p),  # host API 1.4; left NULL here
    ]


class ShrinkOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("timeout_ms", ctypes.c_int64)]


_group = ctypes.c_void_p
_work = ctypes.c_void_p
_error = ctypes.POINTER(DistError)
_buffer = ctypes.POINTER(Buffer)
_work_out = ctypes.POINTER(ctypes.c_void_p)
_counts = ctypes.POINTER(ctypes.c_uint64)  # one per rank, or NULL

# name: (restype, argtypes). Every function that can fail returns an error.
_SIGNATURES = {
    "dist_init": (_error, [ctypes.POINTER(InitOptions), ctypes.POINTER(_group)]),
    "dist_destroy": (None, [_group]),
    "dist_rank": (ctypes.c_int32, [_group]),
    "dist_world_size": (ctypes.c_int32, [_group]),
    "dist_backend_name": (ctypes.c_char_p, [_group, ctypes.c_int]),
    "dist_timeout_ms": (ctypes.c_int64, [_group]),
    "dist_all_reduce": (_error, [_group, _buffer, _buffer, ctypes.c_int, _work_out]),
    "dist_broadcast": (_error, [_group, _buffer, _buffer, ctypes.c_int32, _work_out]),
    "dist_reduce": (_error, [_group, _buffer, _buffer, ctypes.c_int, ctypes.c_int32, _work_out]),
    "dist_all_gather": (_error, [_group, _buffer, _buffer, _work_out]),
    "dist_gather": (_error, [_group, _buffer, _buffer, ctypes.c_int32, _work_out]),
    "dist_scatter": (_error, [_group, _buffer, _buffer, ctypes.c_int32, _work_out]),
    "dist_reduce_scatter": (_error, [_group, _buffer, _buffer, ctypes.c_int, _work_out]),
    "dist_all_to_all": (_error, [_group, _buffer, _buffer, _work_out]),
    "dist_barrier": (_error, [_group, _work_out]),
    "dist_send": (_error, [_group, _buffer, ctypes.c_int32, ctypes.c_int64, _work_out]),
    "dist_recv": (_error, [_group, _buffer, ctypes.c_int32, ctypes.c_int64, _work_out]),
    "dist_sendrecv": (
        _error,
        [_group, _buffer, ctypes.c_int32, _buffer, ctypes.c_int32, ctypes.c_int64],
    ),
    "dist_work_wait": (_error, [_work, ctypes.c_int64]),
    "dist_work_test": (_error, [_work, ctypes.POINTER(ctypes.c_int)]),
    "dist_work_destroy": (None, [_work]),
    "dist_new_group": (
        _error,
        [_group, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.POINTER(_group)],
    ),
    "dist_abort": (None, [_group, ctypes.c_char_p]),
    "dist_version": (ctypes.c_char_p, []),
    "dist_trace_dump": (_error, [_group, ctypes.c_char_p]),
    "dist_revoke": (_error, [_group, ctypes.c_char_p]),
    "dist_failed_ranks": (
        _error,
        [_group, ctypes.POINTER(ctypes.c_int32), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "dist_shrink": (_error, [_group, ctypes.POINTER(ShrinkOptions), ctypes.POINTER(_group)]),
    "dist_all_to_all_v": (
        _error,
        [_group, _buffer, _counts, _counts, _buffer, _counts, _counts, _work_out],
    ),
    "dist_all_gather_v": (_error, [_group, _buffer, _buffer, _counts, _counts, _work_out]),
    "dist_reduce_scatter_v": (_error, [_group, _buffer, _buffer, _counts, ctypes.c_int, _work_out]),
    "dist_split_group": (
        _error,
        [_group, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(_group)],
    ),
}

_lock = threading.Lock()
_lib = None


def _candidates():
    """Where libdist.so may be, most specific first."""
    explicit = os.environ.get("DIST_LIBRARY")
    if explicit:
        return [explicit]
    here = os.path.dirname(os.path.abspath(__file__))
    # Installed by `bazel run //:install -- PREFIX`: this package is in
    # PREFIX/lib/python3/dist-packages/dist, the core in PREFIX/lib.
    installed = os.path.normpath(os.path.join(here, "..", "..", "..", "libdist.so"))
    found = ctypes.util.find_library("dist")
    return [installed] + ([found] if found else []) + ["libdist.so"]


def lib():
    """The loaded core, its functions declared. Raises Error if it is absent."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append(path + " (no such file)")
                continue
            try:
                loaded = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                continue
            missing = [name for name in _SIGNATURES if not hasattr(loaded, name)]
            if missing:
                raise Error(
                    ErrorCode.FAILED_PRECONDITION,
                    "%s is older than this Python package (it lacks %s); install matching "
                    "versions with `bazel run //:install -- PREFIX`" % (path, ", ".join(missing)),
                )
            for name, (restype, argtypes) in _SIGNATURES.items():
                function = getattr(loaded, name)
                function.restype = restype
                function.argtypes = argtypes
            _lib = loaded
            return _lib
        raise Error(
            ErrorCode.NOT_FOUND,
            "libdist.so not found (tried %s); set DIST_LIBRARY=/path/to/libdist.so, or install "
            "dist with `bazel run //:install -- PREFIX` and use this package from "
            "PREFIX/lib/python3/dist-packages" % "; ".join(tried),
        )


def check(error):
    """Raises the Error that a dist_error_t* stands for, after freeing it."""
    if not error:
        return
    code = error.contents.code
    message = (error.contents.message or b"").decode("utf-8", "replace")
    error.contents.destroy(error)
    raise Error(code, message)
