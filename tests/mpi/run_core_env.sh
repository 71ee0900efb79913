#!/bin/bash
# run_core_env.sh <np> <driver> <mpi plugin.so> <env rendezvous plugin.so>
# mpirun + env://: MASTER_ADDR/MASTER_PORT for the TCP store, the plugins
# found through DIST_PLUGIN_PATH.
set -u
np="$1"
driver="$(realpath "$2")"
plugin_dirs="$(dirname "$(realpath "$3")"):$(dirname "$(realpath "$4")")"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
root_flags=()
[[ "$(id -u)" == "0" ]] && root_flags=(--allow-run-as-root)
exec timeout 120 mpirun "${root_flags[@]}" --oversubscribe -np "$np" \
  --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca pml ob1 \
  -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x DIST_PLUGIN_PATH="$plugin_dirs" \
  "$driver"
