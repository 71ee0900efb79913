"""Bazel test macro for the dist conformance kit.

    load("//sdk/conformance:conformance.bzl", "dist_conformance_test")

    dist_conformance_test(
        name = "gloo_conformance",
        plugin = "//plugins/backends/gloo:libdist-backend-gloo.so",
        world_sizes = [1, 2, 3, 4],
    )

makes one test per world size (`gloo_conformance_np1`, ...) and a
test_suite `gloo_conformance` over them. Each test starts N real processes of
dist_conformance on the plugin (`launcher = "mpirun"` for backends that need
an MPI launcher) and fails if any check fails. A run in which every check
was skipped (the backend's probe says it cannot run here) fails too, having
tested nothing, unless the target sets `allow_all_skipped = True` (a GPU
backend on a machine without one): then it passes with a `DIST_SKIPPED:`
line giving the reason, which tools/dev/test.sh counts as skipped.
"""

def dist_conformance_test(
        name,
        plugin,
        world_sizes = [1, 2],
        launcher = "local",
        quick = True,
        via = "abi",
        extra_args = [],
        timeout_s = 110,
        tags = [],
        size = "small",
        allow_all_skipped = False,
        **kwargs):
    """One test per world size running dist_conformance on `plugin`.

    Args:
      name: test_suite name; the tests are <name>_np<N>.
      plugin: label of the backend plugin .so.
      world_sizes: numbers of ranks to run with.
      launcher: "local" (fork + loopback tcp:// rendezvous), "mpirun" (Open MPI) or
        "mpiexec.mpich" (MPICH's Hydra).
      quick: quick sizes (large = 64 KiB, roots 0 and N-1).
      via: "abi" (the plugin's table directly) or "core" (dist_init and the host API).
      extra_args: more dist_conformance flags.
      timeout_s: the kit kills every rank after this and fails.
      tags: test tags.
      size: test size; "small" (Bazel's 120 s) fits timeout_s = 110.
      allow_all_skipped: pass (counted as skipped) when the backend cannot
        run here, instead of failing.
      **kwargs: passed to each sh_test (timeout, ...).
    """
    if launcher not in ["local", "mpirun", "mpiexec.mpich"]:
        fail("dist_conformance_test: launcher must be 'local', 'mpirun' or 'mpiexec.mpich', not '%s'" % launcher)
    tests = []
    for n in world_sizes:
        test = "%s_np%d" % (name, n)
        native.sh_test(
            name = test,
            srcs = ["//sdk/conformance:run_conformance_test.sh"],
            args = [
                "$(rootpath //sdk/conformance:dist_conformance)",
                "--plugin=$(rootpath %s)" % plugin,
                "-n",
                str(n),
                "--launcher=" + launcher,
                "--via=" + via,
                "--timeout_s=%d" % timeout_s,
                "--only_failures",
            ] + (["--quick"] if quick else []) +
                   (["--allow_all_skipped"] if allow_all_skipped else []) + extra_args,
            data = [
                "//sdk/conformance:dist_conformance",
                plugin,
            ],
            tags = tags + (["mpi"] if launcher != "local" else []),
            size = size,
            **kwargs
        )
        tests.append(":" + test)
    native.test_suite(name = name, tests = tests, tags = tags)
