"""Finds Debian's libtorch-dev, pybind11-dev and python3-dev on the build machine.

Makes @local_torch with :extension (what a torch C++ extension compiles and
links against) and defs.bzl with TORCH_FOUND, so the torch.distributed
backend (sdk/python/dist_torch) is skipped cleanly where torch is absent,
as the NCCL plugin is without CUDA.
"""

def _torch_configure_impl(ctx):
    include = ctx.path("/usr/include")
    python = ctx.which("python3")
    found = include.get_child("torch").get_child("csrc").get_child("distributed").get_child("c10d").get_child("ProcessGroup.hpp").exists and \
            include.get_child("pybind11").get_child("pybind11.h").exists
    python_include = ""
    if found:
        result = ctx.execute(["/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
        python_include = result.stdout.strip()
        found = result.return_code == 0 and ctx.path(python_include + "/Python.h").exists
    if found:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Compile options come from defs.bzl (TORCH_COPTS): a library's copts do
# not reach the targets that depend on it.
cc_library(
    name = "extension",
    linkopts = ["-ltorch", "-ltorch_cpu", "-lc10", "-ltorch_python"],
)
""")
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(name = "extension")
""")
    copts = [
        "-isystem",
        "/usr/include/torch/csrc/api/include",
        "-isystem",
        python_include,
        "-Wno-deprecated-declarations",
    ] if found else []
    ctx.file("defs.bzl", "TORCH_FOUND = {}\nTORCH_COPTS = {}\n".format(found, copts))

torch_configure = repository_rule(
    implementation = _torch_configure_impl,
    local = True,
)
