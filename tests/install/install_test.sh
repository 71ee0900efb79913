#!/usr/bin/env bash
# Installs dist into a prefix, builds a host program there with a plain C
# compiler and pkg-config (no Bazel), runs it on 2 ranks with two backends,
# then moves the whole prefix and runs it again (the layout is relocatable).
set -euo pipefail
host_source=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
prefix=$tmp/prefix
RUNFILES_DIR=$TEST_SRCDIR bash "$TEST_SRCDIR/dist/tools/dev/install.sh" "$prefix"

for path in lib/libdist.so lib/pkgconfig/dist.pc include/dist/dist.h \
            lib/dist/plugins/libdist-backend-gloo.so lib/dist/plugins/libdist-rendezvous-env.so \
            bin/distinfo bin/distrun bin/distbench bin/disttrace bin/dist_store_server \
            bin/dist_conformance; do
  [[ -e $prefix/$path ]] || { echo "FAIL: $path missing from the install"; exit 1; }
done

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c11 -Wall -Werror -o "$tmp/host" "$host_source" $(pkg-config --cflags --libs dist)
echo "built with: cc $(pkg-config --cflags --libs dist)"

run_two_ranks() {  # backend, binary
  local port=$((20000 + RANDOM % 20000)) pids=() status=0
  for rank in 0 1; do
    DIST_BACKEND=$1 RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      DIST_TIMEOUT=30s timeout 60 "$2" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  return $status
}

run_two_ranks gloo "$tmp/host"
run_two_ranks shm "$tmp/host"
# The installed tools find the installed plugins too.
"$prefix/bin/distinfo" --require gloo,shm >/dev/null
# grep without -q, so that disttrace never writes into a closed pipe (pipefail).
"$prefix/bin/disttrace" --help | grep "usage: disttrace" >/dev/null || { echo "FAIL: installed disttrace"; exit 1; }

# Relocate: the core finds its plugins beside itself wherever it lives.
mv "$prefix" "$tmp/moved"
cc -std=c11 -o "$tmp/host_moved" "$host_source" -I"$tmp/moved/include" -L"$tmp/moved/lib" \
  -Wl,-rpath,"$tmp/moved/lib" -ldist
run_two_ranks gloo "$tmp/host_moved"
echo "install test: ok"
