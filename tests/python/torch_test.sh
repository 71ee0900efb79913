#!/usr/bin/env bash
# torch.distributed on backend "dist", as a user gets it: installed by
# //:install into a fresh prefix, run by Debian's Python and torch.
#  - every c10d operation against references (torch_collectives_worker.py)
#    on gloo and shm under distrun and on mpi under Open MPI and MPICH;
#  - DistributedDataParallel for 200 steps on 2 and 4 ranks, started by
#    distrun and by torch.multiprocessing, ends with the parameters of the
#    same run on torch's built-in gloo (to float tolerance);
#  - a dead peer is a RuntimeError naming it; the benchmark runs.
set -euo pipefail
source "$(dirname "$0")/test_lib.sh"

for n in 1 3; do
  run "collectives, gloo, $n ranks" "$n" "$distrun" -n "$n" --backend gloo "$python" "$here/torch_collectives_worker.py"
done
run "collectives, shm, 4 ranks" 4 "$distrun" -n 4 --backend shm "$python" "$here/torch_collectives_worker.py"
run "collectives, mpi, 2 ranks (Open MPI's mpirun)" 2 env -u DIST_INIT_METHOD DIST_BACKEND=mpi \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) \
  mpirun --oversubscribe -np 2 -x DIST_BACKEND -x PYTHONPATH -x MASTER_ADDR -x MASTER_PORT \
  "$python" "$here/torch_collectives_worker.py"
run "collectives, mpi, 3 ranks (MPICH's mpiexec)" 3 env -u DIST_INIT_METHOD DIST_BACKEND=mpi \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) \
  mpiexec.mpich -n 3 "$python" "$here/torch_collectives_worker.py"

# DDP: dist (over each plugin) against torch's gloo, same batches.
ddp=$here/torch_ddp_worker.py
compare() {  # LABEL A B: parameters equal to float tolerance
  if "$python" -c "
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
diff = (a - b).abs().max().item()
print('max difference %.3g' % diff)
sys.exit(0 if diff <= 1e-5 else 1)" "$2" "$3"; then
    echo "ok   $1"
  else
    echo "FAIL $1"; failures=$((failures + 1))
  fi
}
for n in 2 4; do
  run "DDP, torch gloo, $n ranks (torch.multiprocessing)" "$n" "$python" "$ddp" gloo "$prefix/gloo$n.pt" --spawn "$n"
  run "DDP, dist over gloo, $n ranks (distrun)" "$n" "$distrun" -n "$n" --backend gloo "$python" "$ddp" dist "$prefix/dist-gloo$n.pt"
  run "DDP, dist over shm, $n ranks (torch.multiprocessing)" "$n" env DIST_BACKEND=shm "$python" "$ddp" dist "$prefix/dist-shm$n.pt" --spawn "$n"
  compare "DDP on dist over gloo ends where torch's gloo does, $n ranks" "$prefix/gloo$n.pt" "$prefix/dist-gloo$n.pt"
  compare "DDP on dist over shm ends where torch's gloo does, $n ranks" "$prefix/gloo$n.pt" "$prefix/dist-shm$n.pt"
done
run "DDP, dist over mpi, 2 ranks (Open MPI's mpirun)" 2 env -u DIST_INIT_METHOD DIST_BACKEND=mpi \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) \
  mpirun --oversubscribe -np 2 -x DIST_BACKEND -x PYTHONPATH -x MASTER_ADDR -x MASTER_PORT \
  "$python" "$ddp" dist "$prefix/dist-mpi2.pt"
compare "DDP on dist over mpi ends where torch's gloo does, 2 ranks" "$prefix/gloo2.pt" "$prefix/dist-mpi2.pt"
# The check itself must be able to fail: a different run is not equal.
run "DDP, torch gloo, 2 ranks, 3 steps" 2 "$python" "$ddp" gloo "$prefix/short.pt" --spawn 2 --steps 3
if "$python" -c "
import sys, torch
sys.exit(0 if (torch.load(sys.argv[1]) - torch.load(sys.argv[2])).abs().max().item() <= 1e-5 else 1)" \
  "$prefix/gloo2.pt" "$prefix/short.pt"; then
  echo "FAIL the comparison cannot tell 3 steps from 200"; failures=$((failures + 1))
else
  echo "ok   the comparison tells 3 steps from 200"
fi

for backend in gloo shm; do
  run "$backend, 3 ranks, rank 2 dies" 2 "$distrun" -n 3 --backend "$backend" "$python" "$here/torch_failure_worker.py"
done
# The benchmark runs (figures: sdk/python/dist_torch/README.md).
if out=$(cd "$prefix" && timeout 180 "$python" -m dist_torch.bench --ranks 2 --max-bytes 4096 --rounds 1 2>&1) &&
   grep -q "^| 4 KiB | " <<<"$out"; then
  echo "ok   python3 -m dist_torch.bench"
else
  echo "FAIL python3 -m dist_torch.bench"; echo "$out" | tail -10; failures=$((failures + 1))
fi
exit $failures
