"""Python buffers as dist_buffer_t, without copying.

Anything with the buffer protocol works: NumPy arrays, array.array,
bytearray, memoryview, bytes (read-only: send side only). The exporter's
buffer is held (PyObject_GetBuffer) until the operation that uses it
completes, so its memory can neither move nor be freed meanwhile.
"""

import ctypes

from dist import _capi

_Py_ssize_t = ctypes.c_ssize_t


class _PyBuffer(ctypes.Structure):
    """Py_buffer (part of CPython's stable ABI since 3.11, unchanged since 3.3)."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", _Py_ssize_t),
        ("itemsize", _Py_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(_Py_ssize_t)),
        ("strides", ctypes.POINTER(_Py_ssize_t)),
        ("suboffsets", ctypes.POINTER(_Py_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_WRITABLE = 0x0001
_PyBUF_FORMAT = 0x0004
_PyBUF_C_CONTIGUOUS = 0x0038

_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None

# dist_dtype_t by name, as NumPy and torch spell them.
DTYPES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "int64": 3,
    "float16": 4,
    "bfloat16": 5,
    "float32": 6,
    "float64": 7,
}
_ITEMSIZE = {0: 1, 1: 1, 2: 4, 3: 8, 4: 2, 5: 2, 6: 4, 7: 8}

# struct-module format character -> (kind, unsigned)
_SIGNED = "bhilq"
_UNSIGNED = "BHILQ"


def _dtype_of_format(fmt, itemsize):
    """The dist dtype of a buffer's struct format, or None."""
    if fmt[:1] in "@=<":
        fmt = fmt[1:]
    if len(fmt) != 1:
        return None
    if fmt in _SIGNED:
        return {1: 0, 4: 2, 8: 3}.get(itemsize)
    if fmt in _UNSIGNED or fmt == "c":
        return 1 if itemsize == 1 else None
    return {"e": 4, "f": 6, "d": 7}.get(fmt)


def dtype_name(dtype):
    for name, value in DTYPES.items():
        if value == dtype:
            return name
    return str(dtype)


class HeldBuffer:
    """One Python buffer, held (exported) until release()."""

    __slots__ = ("view", "c", "_held")

    def __init__(self, obj, writable, dtype=None, what="buffer"):
        self.view = _PyBuffer()
        self._held = False
        flags = _PyBUF_C_CONTIGUOUS | _PyBUF_FORMAT | (_PyBUF_WRITABLE if writable else 0)
        try:
            _get_buffer(obj, ctypes.byref(self.view), flags)
        except (BufferError, TypeError, ValueError) as e:
            if not _has_buffer(obj):
                raise TypeError(
                    "%s: a %s has no buffer; pass a NumPy array, array.array, bytearray or "
                    "memoryview" % (what, type(obj).__name__)
                ) from None
            raise TypeError(
                "%s: %s (dist needs %s, C-contiguous memory; use numpy.ascontiguousarray or a "
                "copy)" % (what, e, "writable" if writable else "readable")
            ) from None
        self._held = True
        try:
            self.c = self._describe(dtype, what)
        except BaseException:
            self.release()
            raise

    def _describe(self, dtype, what):
        view = self.view
        fmt = (view.format or b"B").decode("ascii", "replace")
        if dtype is None:
            code = _dtype_of_format(fmt, view.itemsize)
            if code is None:
                raise TypeError(
                    "%s: elements of format %r (%d bytes) have no dist dtype; dist has %s "
                    "(pass dtype= to read the bytes as one of them)"
                    % (what, fmt, view.itemsize, ", ".join(DTYPES))
                )
        else:
            if dtype not in DTYPES:
                raise ValueError(
                    "%s: unknown dtype %r; dist has %s" % (what, dtype, ", ".join(DTYPES))
                )
            code = DTYPES[dtype]
        size = _ITEMSIZE[code]
        if view.len % size:
            raise ValueError(
                "%s: %d bytes are not a whole number of %s elements" % (what, view.len, dtype_name(code))
            )
        return _capi.Buffer(
            data=view.buf, count=view.len // size, dtype=code, device=_capi.Device(0, 0), stream=None
        )

    @property
    def count(self):
        return self.c.count

    def release(self):
        if self._held:
            self._held = False
            _release_buffer(ctypes.byref(self.view))

    def __del__(self):
        self.release()


def _has_buffer(obj):
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


def empty_like(obj, count):
    """A new buffer of `count` elements of obj's kind: a NumPy array for a
    NumPy array, an array.array for an array.array, else a bytearray-backed
    memoryview cast to obj's format."""
    module = type(obj).__module__
    if module == "numpy":
        import numpy

        return numpy.empty(count, dtype=obj.dtype)
    view = memoryview(obj)
    if type(obj).__name__ == "array" and module == "array":
        import array

        return array.array(obj.typecode, bytes(count * view.itemsize))
    return memoryview(bytearray(count * view.itemsize)).cast(view.format.lstrip("@=<") or "B")
