#!/bin/bash
# run_init_bench.sh <openmpi|mpich> [np=2] [rounds=9]: launches init_bench
# alternately as `mpi`, `dist` and `split` under the implementation's own
# launcher and prints the median of each (slowest rank, seconds from main()
# to every rank ready) and dist/mpi. Run from the workspace root after
# `bazel build //plugins/rendezvous/mpi/bench:all`.
set -euo pipefail
flavor=${1:?usage: run_init_bench.sh openmpi|mpich [np] [rounds]}
np=${2:-2}
rounds=${3:-9}
bin=bazel-bin/plugins/rendezvous/mpi/bench/init_bench_$flavor
case $flavor in
  openmpi) launch=(mpirun --allow-run-as-root --oversubscribe -np "$np") ;;
  mpich) launch=(mpiexec.mpich -n "$np") ;;
  *) echo "run_init_bench.sh: unknown implementation '$flavor' (openmpi or mpich)" >&2; exit 2 ;;
esac
export DIST_BACKEND=mpi
unset DIST_INIT_METHOD MASTER_ADDR MASTER_PORT
declare -A all
for ((r = 0; r < rounds; r++)); do
  for mode in mpi dist split; do
    line=$(timeout 120 "${launch[@]}" "$bin" "$mode" | grep "^$mode ")
    all[$mode]+="${line#"$mode "}"$'\n'
  done
done
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }
mpi=$(printf '%s' "${all[mpi]}" | median)
dist=$(printf '%s' "${all[dist]}" | median)
split_total=$(printf '%s' "${all[split]}" | awk '{print $1}' | median)
split_dist=$(printf '%s' "${all[split]}" | awk '{print $2}' | median)
echo "$flavor np=$np rounds=$rounds (median, slowest rank, seconds from main to all ready)"
echo "  MPI_Init + barrier              $mpi"
echo "  dist_init (mpi://) + barrier    $dist   ratio $(awk -v a="$dist" -v b="$mpi" 'BEGIN {printf "%.2f", a / b}')"
echo "  MPI_Init, then dist_init        $split_total   of which dist_init $split_dist"
