#!/bin/bash
# run_core_mpi.sh <openmpi|mpich> <np> <driver> <args...>: the driver under
# that implementation's own launcher with DIST_BACKEND=mpi and nothing else
# (no init method, no MASTER_ADDR/PORT), bounded by a timeout.
set -u
launcher="$1"
np="$2"
driver="$(realpath "$3")"
shift 3
unset DIST_INIT_METHOD MASTER_ADDR MASTER_PORT RANK WORLD_SIZE DIST_CONFIG DIST_PLUGIN_PATH
# CORE_MPI_BACKEND / CORE_MPI_INIT (the test's env) run another backend or
# init method under the same launcher: gloo over env:// reads the launcher's
# rank variables, with rank 0's store on a free loopback port.
export DIST_BACKEND="${CORE_MPI_BACKEND:-mpi}"
if [[ -n "${CORE_MPI_INIT:-}" ]]; then
  export DIST_INIT_METHOD="$CORE_MPI_INIT"
  if [[ "$CORE_MPI_INIT" == env://* ]]; then
    export MASTER_ADDR=127.0.0.1
    MASTER_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    export MASTER_PORT
  fi
fi
case "$launcher" in
  mpich) exec timeout 120 mpiexec.mpich -n "$np" "$driver" "$@" ;;
  openmpi)
    root_flags=()
    [[ "$(id -u)" == "0" ]] && root_flags=(--allow-run-as-root)
    exec timeout 120 mpirun "${root_flags[@]}" --oversubscribe -np "$np" \
      --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca pml ob1 "$driver" "$@" ;;
  *) echo "run_core_mpi.sh: unknown launcher '$launcher'" >&2; exit 2 ;;
esac
