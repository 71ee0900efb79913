#!/usr/bin/env bash
# Data-parallel training equals single-process training on the whole batch:
# ddp_train --check fails (exit 3) when any weight differs by more than the
# tolerance. Real processes on real backends: gloo and shm through distrun,
# mpi through mpirun.
set -euo pipefail
distrun=$1
ddp_train=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0

run() {
  local label=$1; shift
  local out
  if out=$(timeout 120 "$@" 2>&1); then
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
port=$(( 20000 + RANDOM % 20000 ))
run "mpi, 2 ranks (mpirun)" env DIST_BACKEND=mpi MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  mpirun --oversubscribe -np 2 -x DIST_BACKEND -x MASTER_ADDR -x MASTER_PORT "$ddp_train" --check --steps 15
# A run that must fail: a tolerance of -1 can never be met, so --check has to report it.
if timeout 60 "$distrun" -n 2 --backend gloo "$ddp_train" --check --steps 2 --tolerance -1 >/dev/null 2>&1; then
  echo "FAIL the check accepted an impossible tolerance"; failures=$((failures + 1))
else
  echo "ok   an impossible tolerance is reported as a mismatch"
fi
exit $failures
