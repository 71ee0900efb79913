"""One rank of the Python package's collective checks; run it under a
launcher (distrun -n N, mpirun -np N). Every result is compared with a
reference that this rank computes by itself with NumPy from the inputs
every rank makes (input(r) is a pure function of the rank r), so a wrong
sum, a wrong block or a wrong root fails the check. Exits 1 on a mismatch,
printing what differed; prints "rank R: N checks passed" at the end."""

import array
import ctypes
import sys

import numpy as np

import dist

pg = dist.init()
rank, n = pg.rank, pg.world_size
backend = pg.backend()
checks = 0


def expect(what, got, want):
    global checks
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or not np.array_equal(got, want):
        print("rank %d: %s: got %s, want %s" % (rank, what, got, want), flush=True)
        sys.exit(1)
    checks += 1


def expect_error(what, code, call):
    global checks
    try:
        call()
    except dist.Error as e:
        if e.code != code or not e.message:
            print("rank %d: %s: got %r (%s), want %s" % (rank, what, e.code, e.message, code))
            sys.exit(1)
        checks += 1
        return
    print("rank %d: %s: no error, want %s" % (rank, what, code))
    sys.exit(1)


def data(r, count, dtype):
    """Rank r's input: distinct per rank and element, exact in every dtype."""
    return ((np.arange(count) * 3 + r * 7 + 1) % 50).astype(dtype)


# all_reduce on every dtype NumPy has, and every op that applies.
for dtype in (np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64):
    inputs = [data(r, 37, dtype) for r in range(n)]
    for op, reference in (
        ("sum", lambda xs: np.sum(xs, axis=0, dtype=dtype)),
        ("max", lambda xs: np.max(xs, axis=0)),
        ("min", lambda xs: np.min(xs, axis=0)),
        ("product", lambda xs: np.prod(xs, axis=0, dtype=dtype)),
    ):
        if op == "product" and dtype in (np.float16,):
            continue  # products of 50s overflow binary16 differently by order
        x = data(rank, 37, dtype)
        pg.all_reduce(x, op=op)
        expect("all_reduce %s %s" % (op, np.dtype(dtype).name), x, reference(np.stack(inputs)))
    if np.issubdtype(dtype, np.integer):
        x = data(rank, 37, dtype)
        pg.all_reduce(x, op=dist.ReduceOp.BXOR)
        expect("all_reduce bxor %s" % np.dtype(dtype).name, x, np.bitwise_xor.reduce(np.stack(inputs)))

# Out of place, and an empty buffer.
x, y = data(rank, 5, np.float64), np.zeros(5, np.float64)
pg.all_reduce(x, y)
expect("all_reduce out of place", y, sum(data(r, 5, np.float64) for r in range(n)))
expect("all_reduce leaves send alone", x, data(rank, 5, np.float64))
pg.all_reduce(np.zeros(0, np.float32))
checks += 1

# Rooted collectives from every root.
for root in range(n):
    b = data(rank, 9, np.int32)
    pg.broadcast(b, root)
    expect("broadcast root %d" % root, b, data(root, 9, np.int32))

    r = data(rank, 9, np.float32)
    pg.reduce(r, root)
    if rank == root:
        expect("reduce root %d" % root, r, sum(data(q, 9, np.float32) for q in range(n)))

    g = pg.gather(data(rank, 4, np.int64), root)
    if rank == root:
        expect("gather root %d" % root, g, np.concatenate([data(q, 4, np.int64) for q in range(n)]))
    else:
        expect("gather off root returns nothing", g is None, True)

    s = np.zeros(3, np.float32)
    pg.scatter(s, root, send=np.arange(3 * n, dtype=np.float32) + root if rank == root else None)
    expect("scatter root %d" % root, s, np.arange(3 * rank, 3 * rank + 3, dtype=np.float32) + root)

expect("all_gather", pg.all_gather(data(rank, 6, np.float32)),
       np.concatenate([data(q, 6, np.float32) for q in range(n)]))
everything = np.stack([data(q, 4 * n, np.int64) for q in range(n)]).sum(axis=0)
expect("reduce_scatter", pg.reduce_scatter(data(rank, 4 * n, np.int64)), everything[4 * rank:4 * rank + 4])
# all_to_all: rank r sends block j = [100r + j, ...] to rank j.
send = np.array([100 * rank + j for j in range(n) for _ in range(2)], np.int32)
expect("all_to_all", pg.all_to_all(send), np.array([100 * i + rank for i in range(n) for _ in range(2)], np.int32))
pg.barrier()

# The buffer protocol without NumPy: array.array, bytearray, memoryview.
a = array.array("d", [rank + 0.5] * 3)
pg.all_reduce(a, op="max")
expect("array.array max", list(a), [n - 0.5] * 3)
raw = bytearray([rank + 1] * 4)
pg.all_reduce(raw)
expect("bytearray as uint8", list(raw), [n * (n + 1) // 2 % 256] * 4)
backing = np.zeros(10, np.float32)
middle = backing[2:6]
middle[:] = rank + 1
pg.all_reduce(middle)
expect("a slice of a larger array", backing, np.r_[np.zeros(2), np.full(4, n * (n + 1) / 2), np.zeros(4)])
# bfloat16 has no NumPy type: the bytes of a uint16 array, named by dtype=.
bf = np.full(4, 0x3F80, np.uint16)  # 1.0 in bfloat16
pg.all_reduce(bf, dtype="bfloat16")
one_times_n = (np.array([n], np.float32).view(np.uint32) >> 16).astype(np.uint16)
expect("bfloat16 through dtype=", bf, np.repeat(one_times_n, 4))

# Asynchronous work: several in flight, completed in issue order.
works = [pg.all_reduce(np.full(8, rank + k, np.float32), async_op=True) for k in range(4)]
for k, w in enumerate(works):
    expect("async all_reduce %d" % k, w.wait(timeout=60), np.full(8, sum(r + k for r in range(n)), np.float32))
    expect("async work completed", w.is_completed(), True)
w = pg.barrier(async_op=True)
w.wait()
checks += 1

# Point to point around a ring, and sendrecv.
if n > 1:
    right, left = (rank + 1) % n, (rank - 1) % n
    got = np.zeros(5, np.int32)
    pg.sendrecv(np.full(5, rank, np.int32), right, got, left, tag=7)
    expect("sendrecv ring", got, np.full(5, left, np.int32))
    incoming = np.zeros(3, np.float64)
    recv_work = pg.recv(incoming, left, tag=9, async_op=True)
    send_work = pg.send(np.full(3, rank * 1.5), right, tag=9, async_op=True)
    send_work.wait()
    recv_work.wait()
    expect("send/recv ring", incoming, np.full(3, left * 1.5))

# A subgroup of the even ranks; odd ranks are not members.
evens = pg.new_group(range(0, n, 2))
if rank % 2 == 0:
    x = np.full(2, rank, np.int64)
    evens.all_reduce(x)
    expect("subgroup all_reduce", x, np.full(2, sum(range(0, n, 2)), np.int64))
    expect("subgroup rank", evens.rank, rank // 2)
else:
    expect("non-member rank", evens.rank, -1)
    expect_error("collective on a non-member", dist.ErrorCode.FAILED_PRECONDITION,
                 lambda: evens.all_reduce(np.zeros(1, np.float32)))

# Counts per rank, uneven and with zeros: rank i sends rank j (i + 2j) % 3
# elements of value 100i + j.
def count(i, j):
    return (i + 2 * j) % 3


send = np.concatenate([np.full(count(rank, j), 100 * rank + j, np.int64) for j in range(n)] + [np.zeros(0, np.int64)])
recv = np.full(sum(count(i, rank) for i in range(n)), -1, np.int64)
pg.all_to_all_v(send, [count(rank, j) for j in range(n)], recv, [count(i, rank) for i in range(n)])
expect("all_to_all_v", recv, np.concatenate([np.full(count(i, rank), 100 * i + rank, np.int64) for i in range(n)] + [np.zeros(0, np.int64)]))
sizes = [(r % 3) for r in range(n)]  # rank 0 gives nothing
gathered = np.full(sum(sizes) + 2, -1.0, np.float32)  # displaced: a gap of 2 before rank 1's block
displs = [sum(sizes[:r]) + (2 if r >= 1 else 0) for r in range(n)]
pg.all_gather_v(np.full(sizes[rank], rank, np.float32), gathered, sizes, displs)
want = np.full(sum(sizes) + 2, -1.0, np.float32)
for r in range(n):
    want[displs[r]:displs[r] + sizes[r]] = r
expect("all_gather_v with displacements", gathered, want)
counts = [r + 1 for r in range(n)]
total = np.stack([data(r, sum(counts), np.float64) for r in range(n)]).sum(axis=0)
mine = np.zeros(counts[rank], np.float64)
pg.reduce_scatter_v(data(rank, sum(counts), np.float64), mine, counts)
expect("reduce_scatter_v", mine, total[sum(counts[:rank]):sum(counts[:rank + 1])])
expect_error("async v collectives are refused", dist.ErrorCode.UNIMPLEMENTED,
             lambda: dist._capi.check(dist._capi.lib().dist_all_gather_v(pg._live(), None, None, None, None, ctypes.byref(ctypes.c_void_p()))))

# split: evens and odds, numbered by key (descending where the backend can
# build any order; mpi's MPI_Comm_split keeps the parent's order).
in_parent_order = backend in ("openmpi", "mpich")
half = pg.split(rank % 2, rank if in_parent_order else -rank)
order = sorted(range(rank % 2, n, 2), key=lambda r: r if in_parent_order else -r)
expect("split members in key order", half.all_gather(np.array([rank], np.int32)), np.array(order, np.int32))
expect("split rank", half.rank, order.index(rank))
expect("a negative colour joins no group", pg.split(-1 if rank == 0 else 5) is None, rank == 0)
half.destroy()

# Bad arguments are errors on the calling rank, not crashes.
expect_error("recv of the wrong size", dist.ErrorCode.INVALID_ARGUMENT,
             lambda: pg.all_reduce(np.zeros(4, np.float32), np.zeros(3, np.float32)))
expect_error("root out of range", dist.ErrorCode.INVALID_ARGUMENT,
             lambda: pg.broadcast(np.zeros(1, np.float32), n))
for bad, why in ((np.zeros(8, np.float32)[::2], "C-contiguous"), (np.zeros(2, np.uint32), "no dist dtype"),
                 (b"read-only", "writable"), ("text", "no buffer")):
    try:
        pg.all_reduce(bad)
    except TypeError as e:
        expect("refused: %s" % why, why in str(e), True)
    else:
        print("rank %d: %r was accepted" % (rank, bad))
        sys.exit(1)

pg.barrier()
pg.destroy()
pg.destroy()  # idempotent
expect_error("a destroyed group", dist.ErrorCode.FAILED_PRECONDITION, lambda: pg.barrier())
print("rank %d: %d checks passed on %s" % (rank, checks, backend), flush=True)
