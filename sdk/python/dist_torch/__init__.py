"""dist as a torch.distributed backend.

    import torch.distributed as td
    import dist_torch                     # registers backend "dist"
    td.init_process_group("dist", init_method="env://")   # or tcp://, file://

torch's own init method and store bring the ranks together; DIST_BACKEND
picks the dist plugin underneath (gloo, shm, mpi; default gloo). Failures
are RuntimeErrors carrying dist's message. See README.md beside this file.
"""

import torch.distributed as _td

from dist_torch import _C

BACKEND = "dist"


def _create(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


def plugin_name(group=None):
    """The dist plugin serving `group` (default: the default group)."""
    return _C.plugin_name(group if group is not None else _td.distributed_c10d._get_default_group())


if BACKEND.upper() not in _td.Backend._plugins:
    _td.Backend.register_backend(BACKEND, _create)
