#!/usr/bin/env bash
# The README's demo command: installs what is missing, builds, and runs
# hello_allreduce on 4 local ranks with the backend chosen at run time
# (DIST_BACKEND, default gloo), then shows what `distinfo` sees.
set -euo pipefail
cd "$(dirname "$0")/../.."

bash tools/dev/install-deps.sh
bazel build //examples/hello_allreduce //tools:distrun //tools:distinfo

backend=${DIST_BACKEND:-gloo}
ranks=${DIST_DEMO_RANKS:-4}
echo
echo "== hello_allreduce: $ranks ranks, backend $backend (set DIST_BACKEND=shm|mpi|mpich|gloo to change) =="
if [[ $backend == mpi || $backend == openmpi ]]; then
  # Nothing but DIST_BACKEND=mpi: ranks and store come from MPI (mpi://).
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  DIST_BACKEND=mpi mpirun --oversubscribe -np "$ranks" -x DIST_BACKEND \
    bazel-bin/examples/hello_allreduce/hello_allreduce
elif [[ $backend == mpich ]]; then
  # The same program under MPICH's launcher picks the MPICH build.
  DIST_BACKEND=mpi mpiexec.mpich -n "$ranks" bazel-bin/examples/hello_allreduce/hello_allreduce
else
  bazel-bin/tools/distrun/distrun -n "$ranks" --backend "$backend" \
    bazel-bin/examples/hello_allreduce/hello_allreduce
fi
echo
echo "== distinfo: the backends on this machine =="
bazel-bin/tools/distinfo/distinfo
