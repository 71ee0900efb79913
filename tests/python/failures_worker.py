"""Failures reach Python as dist.Error (a RuntimeError) carrying dist's code
and message, never as a crash of the interpreter.

  failures_worker.py bad-input    one process: bad arguments, environment, library
  failures_worker.py dead-peer    under a launcher with 2+ ranks: the last
                                  rank dies; every other rank gets an error
                                  naming it, well within the timeout
Prints "<mode>: N checks passed"; exits 1 on the first surprise."""

import os
import sys
import time

import numpy as np

mode = sys.argv[1]
checks = 0


def fail(text):
    print("%s: %s" % (mode, text), flush=True)
    sys.exit(1)


def expect_error(what, code, call, mentions=()):
    global checks
    try:
        call()
    except dist.Error as e:
        if not isinstance(e, RuntimeError) or e.code != code:
            fail("%s: got %r (%s), want %s" % (what, e.code, e.message, code))
        for word in mentions:
            if word not in e.message:
                fail("%s: the message %r does not mention %r" % (what, e.message, word))
        checks += 1
        return e
    fail("%s: no error, want %s" % (what, code))


if mode == "bad-input":
    library = os.environ.pop("DIST_LIBRARY")
    os.environ["DIST_LIBRARY"] = "/nonexistent/libdist.so"
    import dist  # importing never fails; the library loads on first use

    expect_error("no library", dist.ErrorCode.NOT_FOUND, dist.version, ["DIST_LIBRARY", "//:install"])
    os.environ["DIST_LIBRARY"] = library
    one = dict(rank=0, world_size=1)
    expect_error("unknown backend", dist.ErrorCode.NOT_FOUND,
                 lambda: dist.init(backend="nope", init_method="file:///tmp/dist-py-bad", **one), ["nope"])
    expect_error("malformed init method", dist.ErrorCode.INVALID_ARGUMENT,
                 lambda: dist.init(backend="gloo", init_method="tcp://:notaport", **one))
    expect_error("rank outside the world", dist.ErrorCode.INVALID_ARGUMENT,
                 lambda: dist.init(backend="gloo", init_method="file:///tmp/dist-py-bad", rank=3, world_size=2))
    os.environ["DIST_TIMEOUT"] = "soon"
    expect_error("bad DIST_TIMEOUT", dist.ErrorCode.INVALID_ARGUMENT,
                 lambda: dist.init(backend="gloo", init_method="file:///tmp/dist-py-bad", **one), ["DIST_TIMEOUT"])
    del os.environ["DIST_TIMEOUT"]
    try:
        dist.init(rank=0)
        fail("rank without world_size was accepted")
    except ValueError:
        checks += 1
    try:
        dist.ReduceOp  # noqa
        dist.group._op("median")
        fail("an unknown reduce op was accepted")
    except ValueError:
        checks += 1
elif mode == "dead-peer":
    import dist

    pg = dist.init(timeout=30)
    last = pg.world_size - 1
    pg.barrier()
    if pg.rank == last:
        os._exit(0)  # dies without a word to anyone
    start = time.monotonic()
    try:
        for _ in range(1000):
            pg.all_reduce(np.ones(1024, np.float32))
        fail("1000 all_reduces went through with rank %d dead" % last)
    except dist.Error as e:
        error = e
    seconds = time.monotonic() - start
    if seconds > 20:
        fail("the error took %.1f s (timeout 30 s): %s" % (seconds, error))
    if "rank %d" % last not in error.message and "ranks %d" % last not in error.message:
        fail("the error does not name rank %d: %s" % (last, error))
    print("rank %d: after %.2f s: %s" % (pg.rank, seconds, error), flush=True)
    checks += 1
    time.sleep(3)  # so that the other survivors see rank `last` go, not this rank's exit
    pg.abort("peer died")
    pg.destroy()
else:
    fail("unknown mode")
print("%s: %d checks passed" % (mode, checks), flush=True)
