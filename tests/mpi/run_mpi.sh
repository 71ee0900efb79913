#!/bin/bash
# run_mpi.sh <np|none> <driver> <plugin.so> <scenario>
# Runs the driver under real Open MPI (`mpirun -np N`), or MPICH's
# `mpiexec.mpich -n N` for the MPICH build (libdist-backend-mpich.so), or
# without any launcher for np=none, always bounded by a timeout.
set -u
np="$1"
driver="$(realpath "$2")"
plugin="$(realpath "$3")"
scenario="$4"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
store="$tmp/store_${scenario}_$$"
if [[ "$np" == "none" ]]; then
  # No launcher variables may leak in from the environment.
  exec env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK -u PMI_SIZE \
    timeout 60 "$driver" "$plugin" "$scenario" "$store"
fi
if [[ "$(basename "$plugin")" == *mpich* ]]; then
  # The MPICH build under MPICH's own launcher (Hydra): runs as root and
  # oversubscribes without flags.
  exec timeout 120 mpiexec.mpich -n "$np" "$driver" "$plugin" "$scenario" "$store"
fi
root_flags=()
[[ "$(id -u)" == "0" ]] && root_flags=(--allow-run-as-root)
# Shared memory and loopback only; quiet about the missing fabrics.
exec timeout 120 mpirun "${root_flags[@]}" --oversubscribe -np "$np" \
  --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca pml ob1 \
  "$driver" "$plugin" "$scenario" "$store"
