"""torch's DistributedDataParallel training a small model on a torch.distributed
backend, for comparing "dist" with torch's own "gloo" over the same batches.

  torch_ddp_worker.py BACKEND OUT [--steps S] [--spawn N]

Under a launcher (distrun: env://) each process is one rank; with --spawn N
it starts N ranks itself with torch.multiprocessing (file:// init). Every
step each rank trains on its slice of one global batch; at the end the ranks
check that their parameters are identical, and rank 0 writes them to OUT
(torch.save), so the test compares backends to float tolerance."""

import argparse
import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as td
import torch.multiprocessing as mp


def train(rank, world_size, args, init_method):
    # Under mpirun, torch's env:// still wants RANK and WORLD_SIZE.
    if init_method is None and "RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" in os.environ:
        os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
        os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
    if args.backend == "dist":
        import dist_torch  # noqa: F401  registers "dist"
    timeout = datetime.timedelta(seconds=60)
    if init_method is None:
        td.init_process_group(args.backend, timeout=timeout)
    else:
        td.init_process_group(args.backend, init_method=init_method, rank=rank,
                              world_size=world_size, timeout=timeout)
    rank, world_size = td.get_rank(), td.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)  # several buckets
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    batch = 48
    assert batch % world_size == 0
    share = batch // world_size
    for step in range(args.steps):
        g = torch.Generator().manual_seed(1000 + step)
        x = torch.randn(batch, 8, generator=g)
        y = torch.sin(x[:, :4] * 2) + x[:, 4:] * 0.5
        mine = slice(rank * share, (rank + 1) * share)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[mine]), y[mine])
        loss.backward()
        optimizer.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(world_size)]
    td.all_gather(everyone, flat)
    if any(not torch.equal(other, flat) for other in everyone):
        print("rank %d: parameters differ between ranks" % rank, flush=True)
        sys.exit(1)
    if rank == 0:
        torch.save(flat, args.out)
    td.destroy_process_group()
    print("rank %d: trained %d steps on %s, loss %.6f" % (rank, args.steps, args.backend, loss.item()),
          flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("backend")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--spawn", type=int, default=0)
    args = parser.parse_args()
    if args.spawn:
        with tempfile.TemporaryDirectory() as tmp:
            init_method = "file://" + os.path.join(tmp, "rendezvous")
            mp.spawn(train, args=(args.spawn, args, init_method), nprocs=args.spawn)
    else:
        train(None, None, args, None)


if __name__ == "__main__":
    main()
