#!/usr/bin/env bash
# Lays out an installation of dist under PREFIX:
#   PREFIX/bin/                      distinfo, distrun, distbench, disttrace, dist_store_server, ...
#   PREFIX/lib/libdist.so            the core
#   PREFIX/lib/dist/plugins/         every plugin
#   PREFIX/include/dist/             the SDK headers
#   PREFIX/lib/pkgconfig/dist.pc     relocatable (paths relative to the .pc file)
#   PREFIX/lib/python3/dist-packages/dist/        the Python package (PYTHONPATH)
#   PREFIX/lib/python3/dist-packages/dist_torch/  the torch.distributed backend,
#                                                 where torch was found at build time
# Run through Bazel, which builds everything first:
#   bazel run //:install -- PREFIX
set -euo pipefail
# Called "install" by Bazel, this script must never run a bare `install`:
# under `bazel test` the runfiles directory (which holds this script as
# ./install) can be on PATH. Use /usr/bin/install.

prefix=${1:?usage: install PREFIX}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
# Under `bazel run` the inputs are in the runfiles tree of this script.
here=${RUNFILES_DIR:-$0.runfiles}/dist
[[ -d $here ]] || here=$(cd "$(dirname "$0")/../.." && pwd)

mkdir -p "$prefix/bin" "$prefix/lib/dist/plugins" "$prefix/include/dist/cpp" "$prefix/lib/pkgconfig"
/usr/bin/install -m 0755 "$here/core/libdist.so" "$prefix/lib/libdist.so"
for plugin in "$here"/core/dist/plugins/libdist-*.so; do
  [[ -e $plugin ]] && /usr/bin/install -m 0755 "$plugin" "$prefix/lib/dist/plugins/"
done
for header in "$here"/sdk/include/dist/*.h "$here"/sdk/include/dist/*.hpp; do
  /usr/bin/install -m 0644 "$header" "$prefix/include/dist/"
done
for header in "$here"/sdk/include/dist/cpp/*.hpp; do
  /usr/bin/install -m 0644 "$header" "$prefix/include/dist/cpp/"
done
for tool in tools/distinfo/distinfo tools/distrun/distrun tools/distbench/distbench \
            tools/disttrace/disttrace plugins/store/dist_store_server sdk/conformance/dist_conformance; do
  if [[ -x $here/$tool ]]; then
    /usr/bin/install -m 0755 "$here/$tool" "$prefix/bin/"
    # Bazel links tools against its own _solib tree; installed, they find
    # libdist.so in ../lib instead.
    patchelf --set-rpath '$ORIGIN/../lib' "$prefix/bin/${tool##*/}"
  fi
done
python_dir="$prefix/lib/python3/dist-packages/dist"
mkdir -p "$python_dir"
for module in "$here"/sdk/python/dist/*.py; do
  /usr/bin/install -m 0644 "$module" "$python_dir/"
done
if [[ -e $here/sdk/python/dist_torch/_C.so ]]; then
  torch_dir="$prefix/lib/python3/dist-packages/dist_torch"
  mkdir -p "$torch_dir"
  /usr/bin/install -m 0644 "$here"/sdk/python/dist_torch/*.py "$torch_dir/"
  /usr/bin/install -m 0755 "$here/sdk/python/dist_torch/_C.so" "$torch_dir/"
  # Bazel links it against its own _solib tree; installed, it finds
  # libdist.so in PREFIX/lib.
  patchelf --set-rpath '$ORIGIN/../../..' "$torch_dir/_C.so"
fi
version=$(sed -n 's/.*kCoreVersion\[\] = "\(.*\)";/\1/p' "$here/core/version.h")
cat > "$prefix/lib/pkgconfig/dist.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include
plugindir=\${libdir}/dist/plugins

Name: dist
Description: Collectives and process groups for native programs, with run-time backend plugins
Version: ${version}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -ldist
Cflags: -I\${includedir}
PC
echo "installed dist ${version} into $prefix"
