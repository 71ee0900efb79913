"""Process groups and work handles over dist.h.

Every collective takes its buffers the way dist.h does: `send` and `recv`
with the exact counts of dist/backend_plugin.h (all_gather: recv holds
send's count times the world size, ...). Where torch.distributed works in
place (all_reduce, broadcast, reduce) so does this: leave `recv` out.
Where the result has its own size, a missing `recv` is made like `send`.
Every call returns what it filled in, or, with async_op=True, a Work.
"""

import ctypes
import datetime
import enum
import threading
import weakref

from dist import _buffers, _capi
from dist.errors import Error, ErrorCode


class ReduceOp(enum.IntEnum):
    """dist_reduce_op_t. AVG divides the sum by the world size (integers:
    truncating); BAND/BOR/BXOR take integer dtypes only."""

    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7


_DEVICES = {"cpu": 0, "cuda": 1}


def _op(op):
    if isinstance(op, str):
        try:
            return ReduceOp[op.upper()]
        except KeyError:
            raise ValueError(
                "unknown reduce op %r; use one of %s" % (op, ", ".join(o.name.lower() for o in ReduceOp))
            ) from None
    return ReduceOp(op)


def _milliseconds(timeout):
    """Seconds (int/float) or a timedelta as milliseconds; None stays None."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if timeout < 0:
        raise ValueError("timeout must be >= 0 seconds, not %r" % timeout)
    return max(1, int(round(timeout * 1000)))


# Buffers of work that was dropped unfinished and did not finish within the
# timeout: the operation may still write into them, so they stay held (and
# the memory alive) for the life of the process instead of being freed.
_orphaned = []


class Work:
    """An operation issued with async_op=True. Holds its buffers (and the
    group) until it completes; dropping it unfinished waits for it first."""

    def __init__(self, group, handle, held, result):
        self._group = group
        self._handle = handle
        self._held = held
        self._result = result
        self._lock = threading.Lock()
        self._error = None
        self._done = False

    def _finish(self, error):
        self._done = True
        self._error = error
        _capi.lib().dist_work_destroy(self._handle)
        self._handle = None
        for held in self._held:
            held.release()
        self._held = []

    def wait(self, timeout=None):
        """Waits up to `timeout` seconds (None: the group's timeout). Returns
        the operation's result buffer; raises Error if it failed, and Error
        with code DEADLINE_EXCEEDED if it is still running (call again)."""
        ms = _milliseconds(timeout)
        with self._lock:
            if not self._done:
                error = _capi.lib().dist_work_wait(self._handle, -1 if ms is None else ms)
                try:
                    _capi.check(error)
                    self._finish(None)
                except Error as e:
                    if e.code != ErrorCode.DEADLINE_EXCEEDED:
                        self._finish(e)
                    raise
            if self._error is not None:
                raise self._error
            return self._result

    def is_completed(self):
        """True once the operation finished (successfully or not)."""
        with self._lock:
            if not self._done:
                done = ctypes.c_int(0)
                error = _capi.lib().dist_work_test(self._handle, ctypes.byref(done))
                if done.value:
                    try:
                        _capi.check(error)
                        self._finish(None)
                    except Error as e:
                        self._finish(e)
                else:
                    try:
                        _capi.check(error)
                    except Error as e:  # the handle itself is unusable
                        self._finish(e)
            return self._done

    test = is_completed

    @property
    def result(self):
        return self._result

    def __del__(self):
        if getattr(self, "_handle", None) is None:
            return
        try:
            self.wait()
        except Error as e:
            if e.code == ErrorCode.DEADLINE_EXCEEDED:
                _orphaned.append(self._held)
                self._held = []
        except Exception:
            pass


class ProcessGroup:
    """A dist process group: made by dist.init(), new_group() or shrink().

    Destroy it with destroy() (or a `with` block); subgroups go first, which
    destroy() does for you."""

    def __init__(self, handle, parent=None):
        self._handle = ctypes.c_void_p(handle)
        self._parent = parent  # keeps the parent alive while this lives
        self._children = weakref.WeakSet()
        if parent is not None:
            parent._children.add(self)
        self.rank = _capi.lib().dist_rank(self._handle)
        self.world_size = _capi.lib().dist_world_size(self._handle)

    # ---- process management ----------------------------------------------

    def _live(self):
        if not self._handle:
            raise Error(ErrorCode.FAILED_PRECONDITION, "the process group was destroyed")
        return self._handle

    def size(self):
        return self.world_size

    def backend(self, device="cpu"):
        """The backend serving `device` ("cpu" or "cuda"), or None."""
        name = _capi.lib().dist_backend_name(self._live(), _DEVICES[device])
        return name.decode() if name else None

    @property
    def timeout(self):
        """The group's default timeout in seconds."""
        return _capi.lib().dist_timeout_ms(self._live()) / 1000.0

    def new_group(self, ranks):
        """A subgroup of `ranks` (of this group). Collective: every rank calls
        it, in the same order; non-members get a group whose rank is -1."""
        ranks = list(ranks)
        array = (ctypes.c_int32 * len(ranks))(*ranks)
        out = ctypes.c_void_p()
        _capi.check(_capi.lib().dist_new_group(self._live(), array, len(ranks), ctypes.byref(out)))
        return ProcessGroup(out.value, parent=self)

    def split(self, color, key=0):
        """Splits this group by colour (MPI_Comm_split): the ranks passing the
        same colour form one group, numbered by (key, rank). Collective.
        A negative colour joins none and returns None."""
        out = ctypes.c_void_p()
        _capi.check(_capi.lib().dist_split_group(self._live(), color, key, ctypes.byref(out)))
        return ProcessGroup(out.value, parent=self) if out.value else None

    def abort(self, reason="aborted by the application"):
        _capi.lib().dist_abort(self._live(), reason.encode())

    def revoke(self, reason="revoked by the application"):
        """Every pending and later operation fails with REVOKED on every rank."""
        _capi.check(_capi.lib().dist_revoke(self._live(), reason.encode()))

    def failed_ranks(self):
        """The ranks this process knows to have failed, ascending."""
        count = ctypes.c_size_t(0)
        lib = _capi.lib()
        _capi.check(lib.dist_failed_ranks(self._live(), None, 0, ctypes.byref(count)))
        ranks = (ctypes.c_int32 * max(1, count.value))()
        _capi.check(lib.dist_failed_ranks(self._live(), ranks, count.value, ctypes.byref(count)))
        return list(ranks[: count.value])

    def shrink(self, timeout=None):
        """The survivors of a revoked group agree on who failed and get a new
        group of themselves (needs survival on: DIST_SURVIVAL=1)."""
        options = _capi.ShrinkOptions(ctypes.sizeof(_capi.ShrinkOptions), _milliseconds(timeout) or 0)
        out = ctypes.c_void_p()
        _capi.check(_capi.lib().dist_shrink(self._live(), ctypes.byref(options), ctypes.byref(out)))
        return ProcessGroup(out.value)

    def trace_dump(self, path=None):
        _capi.check(_capi.lib().dist_trace_dump(self._live(), path.encode() if path else None))

    def destroy(self):
        """Waits for outstanding work (bounded by the timeout) and frees the
        group and its subgroups. Idempotent."""
        for child in list(self._children):
            child.destroy()
        if self._handle:
            handle, self._handle = self._handle, ctypes.c_void_p()
            _capi.lib().dist_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass

    def __repr__(self):
        if not self._handle:
            return "<dist.ProcessGroup destroyed>"
        return "<dist.ProcessGroup rank %d of %d, %s>" % (self.rank, self.world_size, self.backend())

    # ---- collectives -----------------------------------------------------

    def _issue(self, function, args, held, result, async_op):
        """Calls a dist.h operation: blocking (the buffers are let go when it
        returns), or with a Work handed back that holds them until done."""
        if not async_op:
            try:
                _capi.check(function(self._live(), *args, None))
            finally:
                _release(held)
            return result
        handle = ctypes.c_void_p()
        try:
            _capi.check(function(self._live(), *args, ctypes.byref(handle)))
        except BaseException:
            _release(held)
            raise
        return Work(self, handle, held, result)

    def _call(self, name, send, recv, extra, async_op, dtype, result):
        """send/recv (either may be None) held, then the operation issued."""
        held, s, r = _hold(send, recv, dtype)
        args = []
        if name != "dist_barrier":
            args = [
                ctypes.byref(s.c) if s is not None else None,
                ctypes.byref(r.c) if r is not None else None,
            ]
        args += extra
        return self._issue(getattr(_capi.lib(), name), args, held, result, async_op)

    def all_reduce(self, send, recv=None, op=ReduceOp.SUM, async_op=False, dtype=None):
        """recv[i] = op over ranks of send[i]; in place without `recv`."""
        out = send if recv is None else recv
        return self._call("dist_all_reduce", send, out, [_op(op)], async_op, dtype, out)

    def broadcast(self, buffer, root, async_op=False, dtype=None):
        """Root's `buffer` into every rank's `buffer`."""
        return self._call("dist_broadcast", buffer, buffer, [root], async_op, dtype, buffer)

    def reduce(self, send, root, recv=None, op=ReduceOp.SUM, async_op=False, dtype=None):
        """The reduction lands in root's recv (its send without `recv`)."""
        out = send if recv is None else recv
        return self._call("dist_reduce", send, out, [_op(op), root], async_op, dtype, out)

    def all_gather(self, send, recv=None, async_op=False, dtype=None):
        """recv = every rank's send, in rank order (world_size x count)."""
        if recv is None:
            recv = _buffers.empty_like(send, _count(send) * self.world_size)
        return self._call("dist_all_gather", send, recv, [], async_op, dtype, recv)

    def gather(self, send, root, recv=None, async_op=False, dtype=None):
        """Root's recv = every rank's send in rank order; recv unused elsewhere."""
        if recv is None and self.rank == root:
            recv = _buffers.empty_like(send, _count(send) * self.world_size)
        return self._call("dist_gather", send, recv, [root], async_op, dtype, recv)

    def scatter(self, recv, root, send=None, async_op=False, dtype=None):
        """Block r of root's send (world_size x count) into rank r's recv."""
        send = send if self.rank == root else None
        return self._call("dist_scatter", send, recv, [root], async_op, dtype, recv)

    def reduce_scatter(self, send, recv=None, op=ReduceOp.SUM, async_op=False, dtype=None):
        """recv = block `rank` of the reduction of every rank's send."""
        if recv is None:
            recv = _buffers.empty_like(send, _count(send) // self.world_size)
        return self._call("dist_reduce_scatter", send, recv, [_op(op)], async_op, dtype, recv)

    def all_to_all(self, send, recv=None, async_op=False, dtype=None):
        """Block j of send goes to rank j; block i of recv came from rank i."""
        if recv is None:
            recv = _buffers.empty_like(send, _count(send))
        return self._call("dist_all_to_all", send, recv, [], async_op, dtype, recv)

    def barrier(self, async_op=False):
        return self._call("dist_barrier", None, None, [], async_op, None, None)

    # ---- counts per rank (blocking) ---------------------------------------

    def _per_rank(self, name, values):
        """One uint64 per rank as a C array; None stays NULL."""
        if values is None:
            return None
        values = [int(v) for v in values]
        if len(values) != self.world_size:
            raise ValueError("%s: give one count or displacement per rank (%d), not %d"
                             % (name, self.world_size, len(values)))
        return (ctypes.c_uint64 * len(values))(*values)

    def all_to_all_v(self, send, send_counts, recv, recv_counts, send_displs=None,
                     recv_displs=None, dtype=None):
        """Uneven all-to-all (all_to_all_single with split sizes): send_counts[j]
        elements go to rank j, recv_counts[i] come from rank i; displacements
        default to packed blocks. Blocking."""
        arrays = [self._per_rank("all_to_all_v", a)
                  for a in (send_counts, send_displs, recv_counts, recv_displs)]
        held, s, r = _hold(send, recv, dtype)
        args = [ctypes.byref(s.c), arrays[0], arrays[1], ctypes.byref(r.c), arrays[2], arrays[3]]
        return self._issue(_capi.lib().dist_all_to_all_v, args, held, recv, False)

    def all_gather_v(self, send, recv, recv_counts, recv_displs=None, dtype=None):
        """All-gather with a count per rank (send holds recv_counts[rank])."""
        arrays = [self._per_rank("all_gather_v", a) for a in (recv_counts, recv_displs)]
        held, s, r = _hold(send, recv, dtype)
        args = [ctypes.byref(s.c), ctypes.byref(r.c)] + arrays
        return self._issue(_capi.lib().dist_all_gather_v, args, held, recv, False)

    def reduce_scatter_v(self, send, recv, recv_counts, op=ReduceOp.SUM, dtype=None):
        """Reduce-scatter with a count per rank: recv gets block `rank`."""
        counts = self._per_rank("reduce_scatter_v", recv_counts)
        held, s, r = _hold(send, recv, dtype)
        args = [ctypes.byref(s.c), ctypes.byref(r.c), counts, _op(op)]
        return self._issue(_capi.lib().dist_reduce_scatter_v, args, held, recv, False)

    # ---- point to point --------------------------------------------------

    def send(self, buffer, peer, tag=0, async_op=False, dtype=None):
        return self._point_to_point("dist_send", buffer, False, peer, tag, None, async_op, dtype)

    def recv(self, buffer, peer, tag=0, async_op=False, dtype=None):
        return self._point_to_point("dist_recv", buffer, True, peer, tag, buffer, async_op, dtype)

    def _point_to_point(self, name, buffer, writable, peer, tag, result, async_op, dtype):
        held = [_buffers.HeldBuffer(buffer, writable, dtype, "recv" if writable else "send")]
        args = [ctypes.byref(held[0].c), peer, tag]
        return self._issue(getattr(_capi.lib(), name), args, held, result, async_op)

    def sendrecv(self, send, dst, recv, src, tag=0, dtype=None):
        """Sends to dst and receives from src in one call that cannot
        deadlock (MPI_Sendrecv). Blocking."""
        held, s, r = _hold(send, recv, dtype)
        try:
            _capi.check(_capi.lib().dist_sendrecv(self._live(), ctypes.byref(s.c), dst,
                                                  ctypes.byref(r.c), src, tag))
        finally:
            _release(held)
        return recv


def _hold(send, recv, dtype):
    """Holds send (readable) and recv (writable), either of which may be None
    (NULL: unused on this rank). recv may be send itself: in place, the same
    memory is then held a second time, writable. Returns (held, send, recv)."""
    held = []
    try:
        s = _buffers.HeldBuffer(send, False, dtype, "send") if send is not None else None
        held += [s] if s is not None else []
        r = _buffers.HeldBuffer(recv, True, dtype, "recv") if recv is not None else None
        held += [r] if r is not None else []
    except BaseException:
        _release(held)
        raise
    return held, s, r


def _release(held):
    for h in held:
        h.release()


def _count(obj):
    view = memoryview(obj)
    return view.nbytes // view.itemsize


def init(
    backend=None,
    init_method=None,
    rank=None,
    world_size=None,
    timeout=None,
    config_file=None,
    options=None,
    group_name=None,
):
    """Joins the job and returns its ProcessGroup. Every argument left out
    falls back, in order, to the environment (DIST_BACKEND, DIST_INIT_METHOD,
    DIST_RANK/RANK, ...), the config file and the default; under distrun,
    mpirun, srun or torchrun nothing needs to be given.

    backend: "gloo", "shm", "mpi", "nccl", a plugin path or a device map
    ("cpu:gloo,cuda:nccl"); init_method: "env://", "tcp://host:port",
    "file:///path"; timeout: seconds or a timedelta; options: a dict of
    backend/rendezvous options ({"gloo.transport": "tcp"})."""
    if (rank is None) != (world_size is None):
        raise ValueError("give rank and world_size together, or neither (the launcher's)")
    o = _capi.InitOptions()
    o.struct_size = ctypes.sizeof(_capi.InitOptions)
    o.backend = backend.encode() if backend else None
    o.init_method = init_method.encode() if init_method else None
    o.rank = -1 if rank is None else rank
    o.world_size = 0 if world_size is None else world_size
    o.timeout_ms = _milliseconds(timeout) or 0
    o.config_file = config_file.encode() if config_file else None
    items = list((options or {}).items())
    pairs = (_capi.KeyValue * max(1, len(items)))(
        *[_capi.KeyValue(str(k).encode(), str(v).encode()) for k, v in items]
    )
    o.options = pairs
    o.num_options = len(items)
    o.group_name = group_name.encode() if group_name else None
    out = ctypes.c_void_p()
    _capi.check(_capi.lib().dist_init(ctypes.byref(o), ctypes.byref(out)))
    return ProcessGroup(out.value)


def version():
    """The version of the loaded libdist.so ("1.0.0")."""
    return _capi.lib().dist_version().decode()
