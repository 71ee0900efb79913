"""Gloo built from a pinned upstream source with one small patch.

Why not Debian's libgloo: the gloo plugin needs a few things Gloo 0.5 keeps
protected (a pair's socket and peer address, failing a pair, adopting pairs
connected elsewhere, choosing slots, repointing a buffer). Reaching them
through Debian's shared library would rest on its class layout matching
headers Debian does not even ship whole. 0002-public-hooks.patch makes them
public methods instead, small enough to send upstream (README.md). The
source is the snapshot Debian 12 packages (upstream commit 5b143513,
2022-05-18, `git archive` of gloo/ and LICENSE), so the algorithms are the
ones users of Debian's libgloo get; 0001 is the upstream fix for Linux 6
headers that Debian applies too.
"""

def _pinned_gloo_impl(ctx):
    ctx.extract(ctx.attr.archive)
    for patch in ctx.attr.patches:
        ctx.patch(patch, strip = 1)
    ctx.symlink(ctx.attr.config, "gloo/config.h")
    ctx.symlink(ctx.attr.build_file, "BUILD.bazel")

pinned_gloo = repository_rule(
    implementation = _pinned_gloo_impl,
    attrs = {
        "archive": attr.label(allow_single_file = True),
        "patches": attr.label_list(allow_files = True),
        "config": attr.label(allow_single_file = True),
        "build_file": attr.label(allow_single_file = True),
    },
)
