#!/usr/bin/env bash
# Data-parallel training equals single-process training on the whole batch:
# ddp_train --check fails (exit 3) when any weight differs by more than the
# tolerance. Real processes on real backends: gloo and shm through distrun,
# mpi through Open MPI's mpirun and MPICH's mpiexec.mpich; and a run that
# loses a rank and finishes on the survivors (distrun --survive).
set -euo pipefail
distrun=$1
ddp_train=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0

# run LABEL CMD...; with EXPECT set, the output must also contain it.
run() {
  local label=$1; shift
  local out
  if out=$(timeout 120 "$@" 2>&1) && { [ -z "${EXPECT:-}" ] || grep -qF -- "$EXPECT" <<<"$out"; }; then
    local matches
    matches=$(grep -c "MATCH$" <<<"$out" || true)
    echo "ok   $label ($matches ranks matched)"
  else
    echo "FAIL $label"; echo "$out" | tail -20; failures=$((failures + 1))
  fi
}

for n in 1 2 3; do
  run "gloo, $n ranks" "$distrun" -n "$n" --backend gloo "$ddp_train" --check --steps 15
done
run "shm, 2 ranks" "$distrun" -n 2 --backend shm "$ddp_train" --check --steps 15
# DIST_BACKEND=mpi and nothing else: the build of the launcher's MPI, over mpi://.
EXPECT="of 2 (openmpi)" run "mpi, 2 ranks (Open MPI's mpirun)" env -u DIST_INIT_METHOD -u MASTER_ADDR -u MASTER_PORT \
  DIST_BACKEND=mpi mpirun --oversubscribe -np 2 -x DIST_BACKEND "$ddp_train" --check --steps 15
EXPECT="of 2 (mpich)" run "mpi, 2 ranks (MPICH's mpiexec.mpich)" env -u DIST_INIT_METHOD -u MASTER_ADDR -u MASTER_PORT \
  DIST_BACKEND=mpi mpiexec.mpich -n 2 "$ddp_train" --check --steps 15
# Survival: rank 2 SIGKILLs itself at step 5, the others shrink to 3 ranks
# and finish; every step still covers the whole batch, so --check holds.
# Rank 0 too: the store lives in distrun, not in rank 0.
for backend in gloo shm; do
  for victim in 2 0; do
    EXPECT="the job survived the loss of rank $victim" run "$backend, 4 ranks, rank $victim killed at step 5" \
      "$distrun" -n 4 --survive --backend "$backend" "$ddp_train" --check --steps 15 --kill_rank "$victim"
  done
done
# Grow back: distrun restarts the killed rank as a joining process, the
# survivors shrink, admit it (dist_grow) and send it the weights and the
# step; all four finish with weights equal to the single process's.
for backend in gloo shm; do
  EXPECT="joined as rank 3 of 4 at step 5" run "$backend, 4 ranks, rank 2 killed and restarted" \
    "$distrun" -n 4 --max-restarts 1 --backend "$backend" "$ddp_train" --check --steps 15 --kill_rank 2
done
# A run that must fail: a tolerance of -1 can never be met, so --check has to report it.
if timeout 60 "$distrun" -n 2 --backend gloo "$ddp_train" --check --steps 2 --tolerance -1 >/dev/null 2>&1; then
  echo "FAIL the check accepted an impossible tolerance"; failures=$((failures + 1))
else
  echo "ok   an impossible tolerance is reported as a mismatch"
fi
exit $failures
