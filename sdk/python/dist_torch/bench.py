"""all_reduce through torch.distributed: torch's own gloo against backend
"dist" over each of dist's CPU plugins, side by side in one run.

  python3 -m dist_torch.bench [--ranks 2 4] [--max-bytes 67108864] [--rounds 5]

Every rank is a process started with torch.multiprocessing (file:// init);
all backends run in the same processes, alternating round by round, so
machine noise falls on all of them alike. Prints one table per world size:
median microseconds per call (float32 sum) and dist's time as a ratio of
torch gloo's (below 1: dist is faster)."""

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as td
import torch.multiprocessing as mp

PLUGINS = ("gloo", "shm")


def sizes(max_bytes):
    size = 8
    while size <= max_bytes:
        yield size
        size *= 8 if size < 4096 else 4


def iterations(nbytes):
    # Enough calls that one timing is well above the clock's grain, few
    # enough that 64 MiB stays quick.
    return max(3, min(2000, (8 << 20) // max(nbytes, 1) // 8))


def worker(rank, world_size, init_method, args, results):
    import dist_torch  # noqa: F401

    td.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size)
    groups = {"torch gloo": None}  # the default group
    for plugin in PLUGINS:
        os.environ["DIST_BACKEND"] = plugin  # read by dist when the group is made
        groups["dist " + plugin] = td.new_group(backend="dist")
    table = []
    for nbytes in sizes(args.max_bytes):
        x = torch.ones(max(1, nbytes // 4))
        count = iterations(nbytes)
        times = {name: [] for name in groups}
        for _ in range(args.rounds):
            for name, group in groups.items():
                td.all_reduce(x, group=group)  # warm
                td.barrier()
                start = time.perf_counter()
                for _ in range(count):
                    td.all_reduce(x, group=group)
                times[name].append((time.perf_counter() - start) / count * 1e6)
        # Every rank's time is the same collective; rank 0 reports its own.
        table.append((nbytes, {name: statistics.median(t) for name, t in times.items()}))
    if rank == 0:
        results[world_size] = table
    td.destroy_process_group()


def human(nbytes):
    for unit in ("B", "KiB", "MiB"):
        if nbytes < 1024:
            return "%d %s" % (nbytes, unit)
        nbytes //= 1024
    return "%d GiB" % nbytes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    manager = mp.Manager()
    results = manager.dict()
    for world_size in args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(worker, args=(world_size, "file://" + os.path.join(tmp, "store"), args, results),
                     nprocs=world_size)
    names = ["torch gloo"] + ["dist " + p for p in PLUGINS]
    for world_size in args.ranks:
        print("\nall_reduce, float32 sum, N=%d: median us per call (ratio to torch gloo)" % world_size)
        print("| size | " + " | ".join(names) + " |")
        print("|---:|" + "---:|" * len(names))
        for nbytes, row in results[world_size]:
            base = row["torch gloo"]
            cells = ["%.1f" % base] + ["%.1f (%.2fx)" % (row[n], row[n] / base) for n in names[1:]]
            print("| %s | %s |" % (human(nbytes), " | ".join(cells)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
