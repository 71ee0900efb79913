#!/usr/bin/env bash
# mpirun across two namespace hosts: Open MPI's mpirun runs on h1 and
# starts its daemon on h2 through launch_agent.sh (instead of ssh), as on
# two real machines. hello_allreduce runs on 4 ranks (2 per host) on the
# mpi backend, then on gloo with env:// taking the ranks from
# OMPI_COMM_WORLD_*.
#
#   mpirun_test.sh HELLO_ALLREDUCE
set -uo pipefail
here=$(dirname "$(realpath "$0")")
source "$here/hosts.sh"
hello=$(realpath "$1")
agent="$here/launch_agent.sh"
cluster_require
command -v mpirun >/dev/null || cluster_skip "mpirun is missing (apt-get install openmpi-bin)"
cluster_up dcm 2
# The hosts' /tmp is their own, and the checkout may live under /tmp (as a CI
# clone can): hand the agent over in the directory every host sees.
cp "$agent" "$CLUSTER_DIR/launch_agent.sh"
agent="$CLUSTER_DIR/launch_agent.sh"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

mpi_run() {
  on 1 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CLUSTER_DIR="$CLUSTER_DIR" \
    timeout 120 mpirun --host h1:2,h2:2 -np 4 \
    --mca plm_rsh_agent "$agent" \
    --mca oob_tcp_if_include eth0 --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 \
    "$@" "$hello"
}

check() {
  local name=$1 backend=$2 rc=$3 output=$4 correct
  correct=$(grep -c "of 4 ($backend): all_reduce sum -> \[10, 20, ..., 80\] correct" <<<"$output")
  if [[ $rc == 0 && $correct == 4 ]]; then
    echo "ok   $name"
  else
    fail "$name (exit code $rc, $correct of 4 ranks correct)"; tail -n 20 <<<"$output"
  fi
}

# The ranks really run on both hosts.
output=$(on 1 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CLUSTER_DIR="$CLUSTER_DIR" \
  timeout 120 mpirun --host h1:2,h2:2 -np 4 --mca plm_rsh_agent "$agent" \
  --mca oob_tcp_if_include eth0 hostname 2>&1)
if [[ $(sort <<<"$output" | uniq -c | tr -s ' ') == " 2 h1"$'\n'" 2 h2" ]]; then
  echo "ok   mpirun places 2 ranks on h1 and 2 on h2"
else
  fail "mpirun did not place the ranks on both hosts: $output"
fi

# DIST_BACKEND=mpi alone: the Open MPI build, ranks and store from MPI
# (mpi://); rank 0 announces its non-loopback address, as the ranks span hosts.
output=$(mpi_run -x DIST_BACKEND=mpi 2>&1)
check "mpi backend under mpirun (mpi://, nothing else set)" openmpi $? "$output"
# With env:// chosen, rank 0's address for the core's store comes from MASTER_*.
output=$(mpi_run -x DIST_BACKEND=mpi -x DIST_INIT_METHOD=env:// -x MASTER_ADDR="$(cluster_addr 1)" \
  -x MASTER_PORT=29701 2>&1)
check "mpi backend under mpirun (env://)" openmpi $? "$output"

output=$(mpi_run -x DIST_BACKEND=gloo -x MASTER_ADDR="$(cluster_addr 1)" -x MASTER_PORT=29700 2>&1)
check "gloo backend under mpirun (env:// from OMPI_COMM_WORLD_*)" gloo $? "$output"

if ((failures == 0)); then echo "PASS"; fi
exit $failures
