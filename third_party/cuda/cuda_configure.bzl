"""Finds CUDA and NCCL on the build machine (CUDA_HOME, else /usr/local/cuda).

Makes @local_cuda with targets :headers, :cuda_runtime and :nccl, and a file
:defs.bzl with CUDA_FOUND, so that BUILD files can skip the NCCL plugin
cleanly on machines without CUDA instead of failing the whole build.
"""

def _cuda_configure_impl(ctx):
    cuda_home = ctx.os.environ.get("CUDA_HOME", "/usr/local/cuda")
    root = ctx.path(cuda_home)
    found = root.get_child("include").get_child("cuda_runtime.h").exists and \
            root.get_child("include").get_child("nccl.h").exists
    if found:
        ctx.symlink(root.get_child("include"), "include")
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# The headers alone (for the CPU emulation in tests/nccl/emulation).
cc_library(
    name = "headers",
    hdrs = glob(["include/**"]),
    includes = ["include"],
)

cc_library(
    name = "cuda_runtime",
    deps = [":headers"],
    linkopts = ["-L{home}/lib64", "-Wl,-rpath,{home}/lib64", "-lcudart"],
)

cc_library(
    name = "nccl",
    deps = [":cuda_runtime"],
    linkopts = ["-L{home}/lib64", "-lnccl"],
)
""".format(home = cuda_home))
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(name = "headers")

cc_library(name = "cuda_runtime")

cc_library(name = "nccl")
""")
    ctx.file("defs.bzl", "CUDA_FOUND = {}\nCUDA_HOME = \"{}\"\n".format(found, cuda_home))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME"],
    local = True,
)
