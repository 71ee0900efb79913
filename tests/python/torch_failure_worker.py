"""A dead peer under torch.distributed on backend "dist": the last rank dies
after a barrier; every other rank's next collectives raise RuntimeError
naming it, well within the timeout, and the interpreter does not crash.
Prints "dead-peer: 1 checks passed" on each surviving rank."""

import datetime
import os
import sys
import time

import torch
import torch.distributed as td

import dist_torch  # noqa: F401

td.init_process_group("dist", timeout=datetime.timedelta(seconds=30))
rank, last = td.get_rank(), td.get_world_size() - 1
td.barrier()
if rank == last:
    os._exit(0)  # gone without a word
start = time.monotonic()
try:
    for _ in range(1000):
        td.all_reduce(torch.ones(1024))
    print("rank %d: 1000 all_reduces went through with rank %d dead" % (rank, last))
    sys.exit(1)
except RuntimeError as e:
    message = str(e)
seconds = time.monotonic() - start
if seconds > 20 or ("rank %d" % last) not in message:
    print("rank %d: after %.1f s: %s" % (rank, seconds, message))
    sys.exit(1)
print("rank %d: after %.2f s: %s" % (rank, seconds, message.splitlines()[0]), flush=True)
print("dead-peer: 1 checks passed", flush=True)
time.sleep(3)  # so that the other survivors see rank `last` go, not this rank's exit
os._exit(0)  # the group cannot be torn down cleanly with a rank gone
