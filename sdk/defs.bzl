"""Bazel macros for building dist plugins and project code.

    load("//sdk:defs.bzl", "dist_backend_plugin")

    dist_backend_plugin(
        name = "mybackend",          # builds libdist-backend-mybackend.so
        srcs = ["mybackend.cc"],
        deps = [...],
    )

The plugin exports only its versioned entry symbol (a linker version script
hides everything else), so two plugins built on different versions of the
same library never clash inside one process.
"""

# Warnings for the project's own code (not for system headers).
DIST_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
]

def _plugin(kind, entry_symbol, name, srcs, deps, copts, linkopts, visibility, **kwargs):
    script = "_{}_version_script".format(name)
    native.genrule(
        name = script,
        outs = ["{}.lds".format(name)],
        cmd = "printf '{\\n  global: %s;\\n  local: *;\\n};\\n' > $@" % entry_symbol,
    )
    native.cc_binary(
        name = "libdist-{}-{}.so".format(kind, name),
        srcs = srcs,
        deps = deps + ["//sdk:headers"],
        copts = DIST_COPTS + ["-fvisibility=hidden"] + copts,
        linkshared = True,
        linkopts = [
            # Record only the libraries the plugin uses: Abseil comes as 40
            # shared libraries, and dlopen matches each one recorded against
            # every library already loaded (issue 15: 5 ms of dist_init).
            # Safe with -z defs, which fails the link on anything unresolved.
            "-Wl,--as-needed",
        ] + linkopts + [
            "-Wl,--version-script=$(location :{}.lds)".format(name),
            "-Wl,-z,defs",  # an unresolved symbol is a build error, not a load error
        ],
        additional_linker_inputs = [":{}.lds".format(name)],
        visibility = visibility,
        **kwargs
    )

def dist_backend_plugin(name, srcs, deps = [], copts = [], linkopts = [], visibility = ["//visibility:public"], **kwargs):
    """Builds libdist-backend-<name>.so exporting only dist_backend_plugin_v1."""
    _plugin("backend", "dist_backend_plugin_v1", name, srcs, deps, copts, linkopts, visibility, **kwargs)

def dist_rendezvous_plugin(name, srcs, deps = [], copts = [], linkopts = [], visibility = ["//visibility:public"], **kwargs):
    """Builds libdist-rendezvous-<name>.so exporting only dist_rendezvous_plugin_v1."""
    _plugin("rendezvous", "dist_rendezvous_plugin_v1", name, srcs, deps, copts, linkopts, visibility, **kwargs)
