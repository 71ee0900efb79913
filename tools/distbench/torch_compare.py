#!/usr/bin/python3
"""dist against torch.distributed, in the same processes and rounds.

Starts N local ranks. Each rank sets up two process groups over loopback:
torch.distributed with its gloo backend, and dist (libdist.so through its C
ABI, with ctypes) with the backend named by --backend. Then, for every
operation and size, each round times a block of calls through torch and a
block through dist, alternating which goes first; per-call time of a block
is the slowest rank's. The result per size is the median over rounds of
each side's time and of the per-round ratio dist / torch (< 1: dist is
faster).

What each side pays is what its user pays: torch's calls go through its
Python API, dist's through ctypes (the script prints what one ctypes call
costs here, so the reader can see how much of dist's time that is).

torch is Debian's python3-torch (1.13, `apt-get install python3-torch`,
634 MB installed); it is not a dependency of dist or of its tests.

  bazel build -c opt //core:libdist.so //plugins/backends/gloo:all //plugins/rendezvous/env:all
  /usr/bin/python3 tools/distbench/torch_compare.py -n 2 --json out.json
"""

import argparse
import ctypes
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time

OPS = ("all_reduce", "broadcast", "all_gather", "barrier")
DIST_FLOAT32 = 6
DIST_SUM = 0


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    if text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- dist through its C ABI -------------------------------------------------


class DistDevice(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int32)]


class DistBuffer(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("count", ctypes.c_uint64),
        ("dtype", ctypes.c_int),
        ("device", DistDevice),
        ("stream", ctypes.c_void_p),
    ]


class DistError(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("code", ctypes.c_int),
        ("message", ctypes.c_char_p),
        ("destroy", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
    ]


class Dist:
    """The few calls of sdk/include/dist/dist.h this script needs."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        for name in ("dist_all_reduce", "dist_broadcast", "dist_all_gather", "dist_barrier",
                     "dist_init"):
            getattr(self.lib, name).restype = ctypes.c_void_p
        self.lib.dist_rank.restype = ctypes.c_int32
        self.lib.dist_rank.argtypes = [ctypes.c_void_p]
        self.lib.dist_destroy.argtypes = [ctypes.c_void_p]
        self.group = ctypes.c_void_p()
        # NULL options: backend, init method, rank and world size from the
        # environment (DIST_BACKEND, env://).
        self.check(self.lib.dist_init(None, ctypes.byref(self.group)), "dist_init")

    @staticmethod
    def check(error, what):
        if error:
            e = DistError.from_address(error)
            message = e.message.decode()
            e.destroy(error)
            raise RuntimeError(f"{what}: {message}")

    @staticmethod
    def buffer(tensor):
        return DistBuffer(tensor.data_ptr(), tensor.numel(), DIST_FLOAT32, DistDevice(0, 0), None)

    def destroy(self):
        self.lib.dist_destroy(self.group)


# ---- one rank ---------------------------------------------------------------


def run_rank(args):
    import torch
    import torch.distributed as tdist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.torch_port}",
                             rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    d = Dist(args.libdist)
    lib, group = d.lib, d.group

    # What one ctypes call into libdist costs here.
    calls = 20000
    start = time.perf_counter_ns()
    for _ in range(calls):
        lib.dist_rank(group)
    ctypes_ns = (time.perf_counter_ns() - start) / calls

    def slowest(ns):  # the slowest rank's time, outside the timed blocks
        t = torch.tensor([float(ns)], dtype=torch.float64)
        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
        return t.item()

    class Case:
        """One operation on `count` floats a rank, through torch and through dist."""

        def __init__(self, op, count):
            self.op, self.count = op, count
            self.x = torch.zeros(count, dtype=torch.float32)  # the input
            self.out = self.x  # the result (in place but for all_gather)
            x, bx = self.x, Dist.buffer(self.x)
            self.keep = [bx]  # ctypes structures the calls point to
            if op == "all_reduce":
                self.torch = lambda: tdist.all_reduce(x)
                self.dist = lambda: lib.dist_all_reduce(group, ctypes.byref(bx), ctypes.byref(bx),
                                                        DIST_SUM, None)
            elif op == "broadcast":
                self.torch = lambda: tdist.broadcast(x, src=0)
                self.dist = lambda: lib.dist_broadcast(group, ctypes.byref(bx), ctypes.byref(bx), 0,
                                                       None)
            elif op == "all_gather":
                self.out = torch.zeros(count * world, dtype=torch.float32)
                chunks, bo = list(self.out.chunk(world)), Dist.buffer(self.out)
                self.keep.append(bo)
                self.torch = lambda: tdist.all_gather(chunks, x)
                self.dist = lambda: lib.dist_all_gather(group, ctypes.byref(bx), ctypes.byref(bo),
                                                        None)
            else:
                self.torch = lambda: tdist.barrier()
                self.dist = lambda: lib.dist_barrier(group, None)

        def wrong(self):
            """Elements either side got wrong, against a reference computed here:
            rank r's input holds r+1 everywhere."""
            if self.op == "barrier":
                return 0
            if self.op == "all_reduce":
                expected = torch.full_like(self.out, world * (world + 1) / 2)
            elif self.op == "broadcast":
                expected = torch.full_like(self.out, 1.0)
            else:
                expected = torch.arange(1, world + 1,
                                        dtype=torch.float32).repeat_interleave(self.count)
            wrong = 0
            for is_dist in (False, True):
                self.out.zero_()
                self.x.fill_(rank + 1)
                if is_dist:
                    Dist.check(self.dist(), self.op)
                else:
                    self.torch()
                wrong += int((self.out != expected).sum().item())
            self.x.zero_()  # zeros while timed: sums stay finite
            return wrong

    results = []
    for op in args.ops:
        sizes = [4] if op == "barrier" else args.sizes
        for size in sizes:
            case = Case(op, max(1, size // 4))
            for _ in range(args.warmup):
                case.torch()
                Dist.check(case.dist(), op)
            wrong = case.wrong()
            torch_us, dist_us, ratios = [], [], []
            for r in range(args.rounds):
                order = (("torch", case.torch), ("dist", case.dist))
                if r % 2:
                    order = order[::-1]
                times = {}
                for name, call in order:
                    tdist.barrier()
                    start = time.perf_counter_ns()
                    if name == "dist":
                        for _ in range(args.iters):
                            error = call()
                            if error:
                                Dist.check(error, op)
                    else:
                        for _ in range(args.iters):
                            call()
                    times[name] = slowest((time.perf_counter_ns() - start) / args.iters) / 1000
                torch_us.append(times["torch"])
                dist_us.append(times["dist"])
                ratios.append(times["dist"] / times["torch"])
            results.append({
                "op": op,
                "bytes": size if op != "barrier" else 0,
                "torch_us": statistics.median(torch_us),
                "dist_us": statistics.median(dist_us),
                "time_ratio": statistics.median(ratios),
                "wrong": slowest(wrong),
            })
    d.destroy()
    tdist.destroy_process_group()
    if rank == 0:
        report = {"world_size": world, "backend": os.environ["DIST_BACKEND"],
                  "torch": torch.__version__, "ctypes_call_ns": ctypes_ns,
                  "rounds": args.rounds, "iters": args.iters, "results": results}
        print(json.dumps(report))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=2, help="ranks")
    parser.add_argument("--backend", default="gloo", help="dist's backend (DIST_BACKEND)")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--sizes", default="8,64,512,4K,16K,32K,256K")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.join(root, "bazel-out", "k8-opt", "bin")
    parser.add_argument("--libdist", default=os.path.join(out, "core", "libdist.so"))
    parser.add_argument("--plugin_path", default=":".join(
        os.path.join(out, "plugins", p) for p in ("backends/gloo", "backends/shm",
                                                   "rendezvous/env")))
    parser.add_argument("--json", help="also write the report here")
    parser.add_argument("--rank_main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--torch_port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.ops = [op for op in args.ops.split(",") if op]
    for op in args.ops:
        if op not in OPS:
            parser.error(f"--ops: unknown operation '{op}'; use some of {','.join(OPS)}")
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    if args.rank_main:
        run_rank(args)
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("torch_compare: torch is not installed; apt-get install python3-torch, "
                 "and run this with /usr/bin/python3")
    if not os.path.exists(args.libdist):
        sys.exit(f"torch_compare: no {args.libdist}; build it with "
                 "`bazel build -c opt //core:libdist.so` or pass --libdist")
    torch_port, dist_port = free_port(), free_port()
    procs = []
    for rank in range(args.n):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.n), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(dist_port), DIST_BACKEND=args.backend,
                   DIST_PLUGIN_PATH=args.plugin_path)
        argv = [sys.executable, os.path.abspath(__file__), "--rank_main",
                f"--torch_port={torch_port}"] + sys.argv[1:]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True))
    # A rank that fails stops the others at once (they would wait for it
    # in torch's or dist's rendezvous until its timeout).
    deadline = time.monotonic() + 1800
    while any(p.poll() is None for p in procs):
        failed = [p for p in procs if p.poll() not in (None, 0)]
        if failed or time.monotonic() > deadline:
            for p in procs:
                p.kill()
            sys.exit("torch_compare: a rank failed (its error is above); the others were stopped"
                     if failed else "torch_compare: ran past 30 minutes; every rank was stopped")
        time.sleep(0.1)
    if any(p.returncode != 0 for p in procs):
        sys.exit("torch_compare: a rank failed (its error is above)")
    outputs = [p.stdout.read() for p in procs]
    report = json.loads(outputs[0])
    print(f"# {report['world_size']} ranks, dist {report['backend']} against torch "
          f"{report['torch']} gloo; one ctypes call {report['ctypes_call_ns']:.0f} ns")
    print(f"{'op':<11} {'bytes':>8} {'torch us':>10} {'dist us':>10} {'dist/torch':>11} "
          f"{'wrong':>6}")
    for r in report["results"]:
        print(f"{r['op']:<11} {r['bytes']:>8} {r['torch_us']:>10.1f} {r['dist_us']:>10.1f} "
              f"{r['time_ratio']:>11.2f} {r['wrong']:>6.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
