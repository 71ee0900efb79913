#!/usr/bin/env bash
# The Python package as a user gets it: installed by //:install into a fresh
# prefix, imported from PREFIX/lib/python3/dist-packages (no DIST_LIBRARY:
# the package finds PREFIX/lib/libdist.so itself), run by Debian's Python
# with NumPy on real backends: gloo and shm under distrun, mpi under Open
# MPI's mpirun and MPICH's mpiexec. Every rank checks its results against
# NumPy references (collectives_worker.py); failures must arrive as
# dist.Error with dist's message (failures_worker.py).
set -euo pipefail
source "$(dirname "$0")/test_lib.sh"

for n in 1 2 3 4; do
  run "gloo, $n ranks" "$n" "$distrun" -n "$n" --backend gloo "$python" "$here/collectives_worker.py"
done
for n in 2 4; do
  run "shm, $n ranks" "$n" "$distrun" -n "$n" --backend shm "$python" "$here/collectives_worker.py"
done
run "mpi, 2 ranks (Open MPI's mpirun)" 2 env -u DIST_INIT_METHOD DIST_BACKEND=mpi \
  mpirun --oversubscribe -np 2 -x DIST_BACKEND -x PYTHONPATH "$python" "$here/collectives_worker.py"
run "mpi, 3 ranks (MPICH's mpiexec)" 3 env -u DIST_INIT_METHOD DIST_BACKEND=mpi \
  mpiexec.mpich -n 3 "$python" "$here/collectives_worker.py"
run "bad input" 1 env DIST_LIBRARY="$prefix/lib/libdist.so" "$python" "$here/failures_worker.py" bad-input
for backend in gloo shm; do
  run "$backend, 3 ranks, rank 2 dies" 2 "$distrun" -n 3 --backend "$backend" "$python" "$here/failures_worker.py" dead-peer
done

# A check that must fail: a worker whose reference is wrong has to be caught.
sed 's/^everything = \(.*\)$/everything = \1 + 1/' "$here/collectives_worker.py" >"$prefix/wrong_reference.py"
if timeout 60 "$distrun" -n 2 --backend gloo "$python" "$prefix/wrong_reference.py" >/dev/null 2>&1; then
  echo "FAIL a wrong reference went unnoticed"; failures=$((failures + 1))
else
  echo "ok   a wrong reference is reported"
fi
exit $failures
