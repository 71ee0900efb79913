#!/usr/bin/env bash
# The plugin template builds OUTSIDE the tree, against an installed dist
# alone: lay out an install with the project's installer (//:install), copy
# the template into an empty folder, build it with plain make (and CMake when
# present) using only `pkg-config dist`, check that it exports only its entry
# symbol, then load it with the installed libdist.so from a small host
# program, and run the conformance kit on it.
set -euo pipefail
installer=$1
conformance=$2
template_dir=$(dirname "$3")   # any file of the template

work="$TEST_TMPDIR/oot"
prefix="$work/prefix"
rm -rf "$work" && mkdir -p "$work/src"

echo "== install into $prefix"
RUNFILES_DIR="${RUNFILES_DIR:-$TEST_SRCDIR}" "$installer" "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists dist || { echo "FAIL: pkg-config cannot find dist in $PKG_CONFIG_PATH"; exit 1; }
echo "pkg-config dist: $(pkg-config --modversion dist) cflags: $(pkg-config --cflags dist)"

echo "== copy the template into an empty folder (no tree, no Bazel)"
cp "$template_dir"/{Makefile,CMakeLists.txt,kvstore_backend.cc,plugin.lds} "$work/src/"
chmod u+w "$work/src"/*

echo "== make"
make -C "$work/src"
plugin="$work/src/libdist-backend-kvstore.so"

exports=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TWDBRVi]$/ { print $3 }')
if [[ "$exports" != "dist_backend_plugin_v1" ]]; then
  echo "FAIL: the plugin must export only dist_backend_plugin_v1, it exports: $exports"; exit 1
fi
echo "exports only: $exports"

if command -v cmake >/dev/null; then
  echo "== cmake"
  cmake -S "$work/src" -B "$work/cmake-build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/cmake-build"
  cmake_exports=$(nm -D --defined-only "$work/cmake-build/libdist-backend-kvstore.so" |
                  awk '$2 ~ /^[TWDBRVi]$/ { print $3 }')
  [[ "$cmake_exports" == "dist_backend_plugin_v1" ]] ||
    { echo "FAIL: the CMake build exports: $cmake_exports"; exit 1; }
else
  echo "(cmake not installed: CMake build skipped)"
fi

echo "== a host program against the install loads it and reduces"
cat > "$work/host.c" <<'C'
#include <dist/dist.h>
#include <dist/registry.h>
#include <stdio.h>

int main(int argc, char** argv) {
  const dist_backend_plugin_t* table = NULL;
  dist_error_t* err = dist_load_backend(argv[1], &table);
  if (err) { fprintf(stderr, "load: %s\n", dist_error_message(err)); return 1; }
  dist_init_options_t o = dist_init_options_default();
  o.backend = argv[1];
  o.init_method = argv[2];
  o.rank = 0;
  o.world_size = 1;
  o.timeout_ms = 20000;
  dist_process_group_t* pg = NULL;
  err = dist_init(&o, &pg);
  if (err) { fprintf(stderr, "init: %s\n", dist_error_message(err)); return 1; }
  int64_t x[3] = {5, -7, 11};
  dist_buffer_t b = dist_make_buffer(x, 3, DIST_INT64, dist_cpu());
  err = dist_all_reduce(pg, &b, &b, DIST_MAX, NULL);
  if (err) { fprintf(stderr, "all_reduce: %s\n", dist_error_message(err)); return 1; }
  printf("loaded %s %s (ABI %u.%u) via %s; all_reduce -> %lld %lld %lld\n", table->name,
         table->version, table->abi_major, table->abi_minor, dist_backend_name(pg, DIST_DEVICE_CPU),
         (long long)x[0], (long long)x[1], (long long)x[2]);
  int ok = x[0] == 5 && x[1] == -7 && x[2] == 11;
  dist_destroy(pg);
  return ok ? 0 : 1;
}
C
cc -std=c11 -Wall -Werror -o "$work/host" "$work/host.c" $(pkg-config --cflags --libs dist)
"$work/host" "$plugin" "file://$work/rendezvous?rank=0&world_size=1"

echo "== the conformance kit on the out-of-tree build"
"$conformance" --plugin="$plugin" -n 2 --quick --only_failures --timeout_s=100
echo "PASS: built outside the tree with make, loaded, conformant"
