"""dist for Python: process groups and collectives over dist's C ABI.

    import numpy as np, dist
    pg = dist.init()                    # under distrun, mpirun, srun, torchrun
    x = np.full(4, pg.rank, np.float32)
    pg.all_reduce(x)                    # in place, like torch.distributed
    pg.destroy()

Buffers are anything with the buffer protocol (NumPy arrays, array.array,
bytearray, memoryview; bytes as a send buffer), contiguous, never copied.
Failures raise dist.Error (a RuntimeError) with .code and .message. The
package is pure Python (ctypes): it needs libdist.so, found through
DIST_LIBRARY, the install layout (PREFIX/lib), or the loader's search path.
See sdk/python/README.md.
"""

from dist.errors import Error, ErrorCode
from dist.group import ProcessGroup, ReduceOp, Work, init, version

__all__ = ["Error", "ErrorCode", "ProcessGroup", "ReduceOp", "Work", "init", "version"]
