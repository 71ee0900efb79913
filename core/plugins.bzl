"""Copies plugin .so files into core/dist/plugins/, beside libdist.so.

The core looks for plugins in <dir of libdist.so>/dist/plugins, so every
program in the Bazel tree that links //core:dist finds the bundled plugins
without DIST_PLUGIN_PATH, exactly as an installed program finds
PREFIX/lib/dist/plugins next to PREFIX/lib/libdist.so.
"""

def bundle_plugins(name, plugins, **kwargs):
    outs = ["dist/plugins/README"]
    cmds = ["echo 'dist plugins bundled by //core:%s' > $(location dist/plugins/README)" % name]
    for label in plugins:
        out = "dist/plugins/" + label.split(":")[-1]
        outs.append(out)
        cmds.append("cp -f $(location %s) $(location %s)" % (label, out))
    native.genrule(
        name = name,
        srcs = plugins,
        outs = outs,
        cmd = " && ".join(cmds),
        **kwargs
    )
