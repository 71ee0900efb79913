"""One rank of the torch.distributed checks on backend "dist": every c10d
operation torch 1.13 offers for CPU tensors, each result compared with a
reference this rank computes itself (input(r) is a pure function of the
rank r). Run under distrun (env://); prints "rank R: N checks passed on P"."""

import datetime
import os
import warnings
import sys

import torch
import torch.distributed as td

import dist_torch

warnings.simplefilter("ignore", UserWarning)  # all_reduce_coalesced is deprecated, still called

# Under mpirun or mpiexec, torch's env:// still wants RANK and WORLD_SIZE:
# take them from the MPI launcher (the test sets MASTER_ADDR and MASTER_PORT).
for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")):
    if "RANK" not in os.environ and rank_var in os.environ:
        os.environ["RANK"], os.environ["WORLD_SIZE"] = os.environ[rank_var], os.environ[size_var]
td.init_process_group("dist", timeout=datetime.timedelta(seconds=60))
rank, n = td.get_rank(), td.get_world_size()
checks = 0


def expect(what, got, want):
    global checks
    if not torch.equal(got, want):
        print("rank %d: %s: got %s, want %s" % (rank, what, got.tolist(), want.tolist()), flush=True)
        sys.exit(1)
    checks += 1


def data(r, count, dtype=torch.float32):
    return ((torch.arange(count) * 3 + r * 7 + 1) % 50).to(dtype)


everyone = torch.stack([data(r, 6) for r in range(n)])
for op, reference in ((td.ReduceOp.SUM, everyone.sum(0)), (td.ReduceOp.MAX, everyone.max(0).values),
                      (td.ReduceOp.MIN, everyone.min(0).values), (td.ReduceOp.PRODUCT, everyone.prod(0))):
    x = data(rank, 6)
    td.all_reduce(x, op=op)
    expect("all_reduce %s" % op, x, reference)
for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float64):
    x = data(rank, 5, dtype)
    td.all_reduce(x)
    expect("all_reduce %s" % dtype, x, torch.stack([data(r, 5, dtype) for r in range(n)]).sum(0).to(dtype))
coalesced = [data(rank, 3), data(rank, 4) * 2]
td.all_reduce_coalesced(coalesced)
expect("all_reduce_coalesced", torch.cat(coalesced), torch.cat([everyone[:, :3].sum(0), (everyone.new_tensor(
    torch.stack([data(r, 4) for r in range(n)])) * 2).sum(0)]))
work = td.all_reduce(data(rank, 6), async_op=True)
work.wait(timeout=datetime.timedelta(seconds=30))
expect("async all_reduce", work.result()[0], everyone.sum(0))

for root in range(n):
    b = data(rank, 4)
    td.broadcast(b, src=root)
    expect("broadcast from %d" % root, b, data(root, 4))
    r = data(rank, 6)
    td.reduce(r, dst=root)
    if rank == root:
        expect("reduce to %d" % root, r, everyone.sum(0))
    gathered = [torch.zeros(6) for _ in range(n)] if rank == root else None
    td.gather(data(rank, 6), gather_list=gathered, dst=root)
    if rank == root:
        expect("gather to %d" % root, torch.stack(gathered), everyone)
    s = torch.zeros(2)
    td.scatter(s, scatter_list=[torch.full((2,), float(10 * root + q)) for q in range(n)] if rank == root else None, src=root)
    expect("scatter from %d" % root, s, torch.full((2,), float(10 * root + rank)))

out = [torch.zeros(6) for _ in range(n)]
td.all_gather(out, data(rank, 6))
expect("all_gather", torch.stack(out), everyone)
flat = torch.zeros(6 * n)
td.all_gather_into_tensor(flat, data(rank, 6))
expect("all_gather_into_tensor", flat, everyone.reshape(-1))
big = torch.stack([data(r, 2 * n) for r in range(n)]).sum(0)
rs = torch.zeros(2)
td.reduce_scatter(rs, [data(rank, 2 * n)[2 * q:2 * q + 2].clone() for q in range(n)])
expect("reduce_scatter", rs, big[2 * rank:2 * rank + 2])
rs2 = torch.zeros(2)
td.reduce_scatter_tensor(rs2, data(rank, 2 * n))
expect("reduce_scatter_tensor", rs2, big[2 * rank:2 * rank + 2])

# all_to_all_single, even and uneven: rank r sends (j + 1) rows of [r, j] to rank j.
send = torch.tensor([[100.0 * rank + j] for j in range(n) for _ in range(2)])
recv = torch.zeros(2 * n, 1)
td.all_to_all_single(recv, send)
expect("all_to_all_single", recv, torch.tensor([[100.0 * i + rank] for i in range(n) for _ in range(2)]))
in_splits = [j + 1 for j in range(n)]
out_splits = [rank + 1] * n
send = torch.cat([torch.full((j + 1, 3), 100.0 * rank + j) for j in range(n)])
recv = torch.zeros(sum(out_splits), 3)
td.all_to_all_single(recv, send, out_splits, in_splits)
expect("all_to_all_single with splits", recv, torch.cat([torch.full((rank + 1, 3), 100.0 * i + rank) for i in range(n)]))
outs = [torch.zeros(rank + 1) for _ in range(n)]
td.all_to_all(outs, [torch.full((j + 1,), float(10 * rank + j)) for j in range(n)])
expect("all_to_all lists, uneven", torch.cat(outs), torch.cat([torch.full((rank + 1,), float(10 * i + rank)) for i in range(n)]))

if n > 1:
    right, left = (rank + 1) % n, (rank - 1) % n
    incoming = torch.zeros(3)
    reqs = [td.irecv(incoming, src=left, tag=5), td.isend(torch.full((3,), float(rank)), dst=right, tag=5)]
    for req in reqs:
        req.wait()
    expect("isend/irecv ring", incoming, torch.full((3,), float(left)))
    if rank == 0:
        td.send(torch.arange(4.0), dst=1)
    elif rank == 1:
        got = torch.zeros(4)
        td.recv(got, src=0)
        expect("send/recv", got, torch.arange(4.0))

objects = [None] * n
td.all_gather_object(objects, {"rank": rank, "name": "r%d" % rank})
if objects != [{"rank": r, "name": "r%d" % r} for r in range(n)]:
    print("rank %d: all_gather_object gave %s" % (rank, objects)); sys.exit(1)
checks += 1
box = [{"from": rank}] if rank == 0 else [None]
td.broadcast_object_list(box, src=0)
if box != [{"from": 0}]:
    print("rank %d: broadcast_object_list gave %s" % (rank, box)); sys.exit(1)
checks += 1

# torch makes a subgroup as a new group of its own ranks; dist's mpi plugin
# only runs on MPI_COMM_WORLD's numbering, so subgroups are gloo's and shm's.
plugin = dist_torch.plugin_name()
evens = td.new_group(list(range(0, n, 2))) if plugin in ("gloo", "shm") else None
if evens is not None and rank % 2 == 0:
    x = torch.full((2,), float(rank))
    td.all_reduce(x, group=evens)
    expect("subgroup all_reduce", x, torch.full((2,), float(sum(range(0, n, 2)))))

# A bad call is a RuntimeError with dist's words, not a crash.
try:
    td.all_reduce(torch.zeros(4)[::2])
    print("rank %d: a non-contiguous tensor was accepted" % rank); sys.exit(1)
except RuntimeError as e:
    if "contiguous" not in str(e):
        print("rank %d: unexpected error %s" % (rank, e)); sys.exit(1)
    checks += 1
td.barrier()
td.destroy_process_group()
print("rank %d: %d checks passed on %s" % (rank, checks, plugin), flush=True)
